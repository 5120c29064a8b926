import Foundation
import KioskCore

/// The client's state folder: the database, partial downloads and the library.
public struct KioskHome: Sendable, Equatable {
    public let root: URL

    public init(root: URL) {
        self.root = root
    }

    /// `--home`, else `KIOSK_HOME`, else `$XDG_DATA_HOME/kiosk`, else `~/.local/share/kiosk`.
    public static func resolve(flag: String?, environment: [String: String]) -> KioskHome {
        if let flag, !flag.isEmpty { return KioskHome(root: URL(fileURLWithPath: flag)) }
        if let home = environment["KIOSK_HOME"], !home.isEmpty { return KioskHome(root: URL(fileURLWithPath: home)) }
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty {
            return KioskHome(root: URL(fileURLWithPath: data).appendingPathComponent("kiosk"))
        }
        let user = environment["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        return KioskHome(root: user.appendingPathComponent(".local/share/kiosk"))
    }

    public var database: URL { root.appendingPathComponent("kiosk.sqlite") }

    /// Where the bytes of `productId`'s download collect. Paths are built only from valid IDs.
    /// - Throws: ``ClientError/unsafeProductID(_:source:)``.
    func partialFile(_ productId: String) throws -> URL {
        guard ProductID.isValid(productId) else { throw ClientError.unsafeProductID(productId, source: "the library") }
        return downloads.appendingPathComponent("\(productId).partial")
    }
    public var downloads: URL { root.appendingPathComponent("downloads", isDirectory: true) }

    /// The manifest of what is installed for `productId` (every entry's SHA-256), kept at install
    /// so an update knows which installed files it may keep without reading them all first.
    /// - Throws: ``ClientError/unsafeProductID(_:source:)``.
    func installedManifest(_ productId: String) throws -> URL {
        guard ProductID.isValid(productId) else { throw ClientError.unsafeProductID(productId, source: "the library") }
        return root.appendingPathComponent("manifests", isDirectory: true).appendingPathComponent("\(productId).json")
    }
    /// Beside the installed manifest: each installed file's status as it was when its bytes were
    /// last known to be the published ones (``InstalledStatus``).
    func installedStatus(_ productId: String) throws -> URL {
        try installedManifest(productId).deletingPathExtension().appendingPathExtension("status.json")
    }
    /// Beside the installed manifest: an installed publication file's chunks (``InstalledChunks``).
    func installedChunks(_ productId: String) throws -> URL {
        try installedManifest(productId).deletingPathExtension().appendingPathExtension("chunks.json")
    }
    public var library: URL { root.appendingPathComponent("Library", isDirectory: true) }

    /// Creates the folders that do not exist yet.
    /// - Throws: ``ClientError/local(path:problem:action:)`` naming the folder that cannot be made.
    public func prepare() throws {
        for folder in [root, downloads, library] {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue { continue }
            guard mkdir(folder.path, 0o755) == 0 || errno == EEXIST else {
                let problem = String(cString: strerror(errno))
                if folder == root, errno == ENOENT {
                    do {
                        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                        continue
                    } catch {}
                }
                throw ClientError.local(path: folder.path, problem: "cannot be created (\(problem))",
                                        action: "choose a writable folder with --home or KIOSK_HOME")
            }
        }
    }
}
