import Foundation

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
    public var downloads: URL { root.appendingPathComponent("downloads", isDirectory: true) }
    public var library: URL { root.appendingPathComponent("Library", isDirectory: true) }

    /// Creates the folders that do not exist yet.
    public func prepare() throws {
        for folder in [root, downloads, library] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
    }
}
