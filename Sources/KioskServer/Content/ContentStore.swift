import Foundation
import KioskArchive
import KioskCore
import Logging

/// Turns each product's content source into the archive file the server serves.
///
/// Folders are packed into `<data>/content/`; ready-made archives are served from where they are.
/// A small record beside each archive remembers the source's fingerprint and SHA-256, so a
/// restart re-packs and re-hashes only what changed.
public struct ContentStore: Sendable {
    let directory: URL
    let logger: Logger

    public init(dataDirectory: URL, logger: Logger) {
        self.directory = dataDirectory.appendingPathComponent("content", isDirectory: true)
        self.logger = logger
    }

    /// The archive for `source`, packed or hashed only when the source changed.
    public func prepare(productID: String, source: ContentSource) throws -> PackedContent {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let recordURL = directory.appendingPathComponent("\(productID).json")
        let fingerprint = try Self.fingerprint(of: source)
        let archive = source.isFolder
            ? directory.appendingPathComponent("\(productID).\(source.format.fileExtension)")
            : source.location

        if let data = try? Data(contentsOf: recordURL),
           let record = try? JSONDecoder().decode(Record.self, from: data),
           record.fingerprint == fingerprint,
           let size = try? FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int64,
           size == record.size
        {
            return PackedContent(file: archive, size: record.size, sha256: record.sha256)
        }

        let packed: PackedContent
        if source.isFolder {
            logger.info("packing content", metadata: ["product": "\(productID)", "format": "\(source.format.rawValue)"])
            packed = try ContentPacker().pack(folder: source.location, format: source.format, to: archive)
        } else {
            let size = try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int64 ?? 0
            packed = PackedContent(file: archive, size: size, sha256: try FileDigest.sha256(of: archive))
        }
        let record = Record(fingerprint: fingerprint, size: packed.size, sha256: packed.sha256)
        try JSONEncoder.kiosk.encode(record).write(to: recordURL, options: .atomic)
        return packed
    }

    private static func fingerprint(of source: ContentSource) throws -> String {
        if source.isFolder {
            return try ContentPacker.fingerprint(of: source.location, format: source.format)
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: source.location.path)
        let size = attributes[.size] as? Int64 ?? -1
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        return "file\t\(source.location.path)\t\(size)\t\(modified)"
    }

    private struct Record: Codable {
        var fingerprint: String
        var size: Int64
        var sha256: String
    }
}
