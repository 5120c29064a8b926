import Foundation
import KioskCore

/// An archive on disk with what the catalog says about it.
public struct PackedContent: Sendable, Equatable {
    public var file: URL
    public var size: Int64
    public var sha256: String
    /// The archive's ``ContentManifest`` on disk and its SHA-256, when one was made.
    public var manifestFile: URL?
    public var manifestSha256: String?

    public init(file: URL, size: Int64, sha256: String, manifestFile: URL? = nil, manifestSha256: String? = nil) {
        self.file = file
        self.size = size
        self.sha256 = sha256
        self.manifestFile = manifestFile
        self.manifestSha256 = manifestSha256
    }
}

/// Packs a content folder into a zip or tar.gz, deterministically.
///
/// Entries are sorted by path and carry a fixed time, owner and permissions, and the gzip header
/// has no timestamp: the same folder gives the same bytes and SHA-256 on any machine, at any
/// time. That is what lets a client resume a download across a server restart.
public struct ContentPacker: Sendable {
    /// 2000-01-01T00:00:00Z: representable in zip's DOS time, unlike the Unix epoch.
    public static let fixedModificationTime = 946_684_800

    public init() {}

    /// Packs `folder` into `destination`, replacing it atomically.
    /// - Throws: ``ArchiveError`` when the folder holds a symlink or special file, or libarchive fails.
    public func pack(folder: URL, format: ArchiveFormat, to destination: URL) throws -> PackedContent {
        let entries = try Self.entries(of: folder)
        let temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).tmp")
        defer { try? FileManager.default.removeItem(at: temporary) }

        let writer = try ArchiveWriter(format: format, path: temporary.path)
        try writer.open()
        for entry in entries {
            if entry.isDirectory {
                try writer.addDirectory(entry.name, mtime: Self.fixedModificationTime)
            } else {
                try writer.addFile(entry.name, from: entry.url, size: entry.size, mtime: Self.fixedModificationTime)
            }
        }
        try writer.close()

        let size = try FileManager.default.attributesOfItem(atPath: temporary.path)[.size] as? Int64 ?? 0
        let sha256 = try FileDigest.sha256(of: temporary)
        // rename(2) replaces an old archive atomically: a reader sees the old bytes or the new, never half.
        guard rename(temporary.path, destination.path) == 0 else {
            throw ArchiveError.library(path: destination.path, message: "cannot move the new archive into place: \(String(cString: strerror(errno)))")
        }
        return PackedContent(file: destination, size: size, sha256: sha256)
    }

    /// One file or folder inside a content folder, by its path relative to that folder.
    struct Entry {
        var name: String
        var url: URL
        var isDirectory: Bool
        var size: Int64
        var modificationTime: Date
    }

    /// Every file and folder under `folder`, sorted by relative path.
    /// - Throws: ``ArchiveError/unpackableEntry(path:reason:)`` for anything but files and folders.
    static func entries(of folder: URL) throws -> [Entry] {
        let keys: [URLResourceKey] = [.isDirectoryKey, .isRegularFileKey, .isSymbolicLinkKey, .fileSizeKey, .contentModificationDateKey]
        guard let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: keys) else {
            throw ArchiveError.unpackableEntry(path: folder.path, reason: "the folder cannot be read")
        }
        let base = folder.standardizedFileURL.path
        var entries: [Entry] = []
        for case let url as URL in enumerator {
            let values = try url.resourceValues(forKeys: Set(keys))
            let path = url.standardizedFileURL.path
            let name = String(path.dropFirst(base.count + 1))
            if values.isSymbolicLink == true {
                throw ArchiveError.unpackableEntry(path: path, reason: "symbolic links are not packed; copy the file in instead")
            }
            if values.isDirectory == true {
                entries.append(Entry(name: name, url: url, isDirectory: true, size: 0, modificationTime: values.contentModificationDate ?? .distantPast))
            } else if values.isRegularFile == true {
                entries.append(Entry(name: name, url: url, isDirectory: false, size: Int64(values.fileSize ?? 0), modificationTime: values.contentModificationDate ?? .distantPast))
            } else {
                throw ArchiveError.unpackableEntry(path: path, reason: "only regular files and folders can be packed")
            }
        }
        // Byte order of the UTF-8 names, the same on every machine and locale.
        return entries.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    /// A fingerprint of the folder's listing (names, sizes, modification times).
    ///
    /// The server re-packs a folder only when this changes, so a restart does not repack every book.
    public static func fingerprint(of folder: URL, format: ArchiveFormat) throws -> String {
        var listing = "format=\(format.rawValue)\n"
        for entry in try entries(of: folder) {
            listing += "\(entry.name)\t\(entry.isDirectory ? "d" : "f")\t\(entry.size)\t\(entry.modificationTime.timeIntervalSince1970)\n"
        }
        return FileDigest.sha256(of: Data(listing.utf8))
    }
}
