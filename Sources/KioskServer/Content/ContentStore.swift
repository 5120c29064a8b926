import Foundation
import KioskArchive
import KioskCore
import Logging

/// The archives the server serves, content-addressed: `<data>/content/<sha256>.<ext>` (or, for
/// `kiosk publish`, `<out>/archives/<sha256>.<ext>`).
///
/// A file's name is its SHA-256, it is written under a temporary name and renamed into place,
/// and it never changes afterwards: the ETag a response carries (the SHA-256) always names the
/// bytes it sends, whatever reloads happen meanwhile. It is on disk before it has that name
/// (synced, renamed, the folder synced), so a crash cannot leave a name whose bytes were never
/// written. Folders are packed deterministically; a ready-made archive is copied in, so editing
/// the original in place changes nothing served.
/// A small record per product (`records/<id>.json`) remembers the source's fingerprint, so a
/// restart re-packs and re-hashes only what changed.
public struct ContentStore: Sendable {
    let directory: URL
    /// Where the packing records and scratch files live (beside the archives, not among them).
    let stateDirectory: URL
    let logger: Logger
    /// How long an archive no catalog names any more stays on disk for resumes in flight.
    public static let gracePeriod: TimeInterval = 3600

    public init(dataDirectory: URL, logger: Logger) {
        self.directory = dataDirectory.appendingPathComponent("content", isDirectory: true)
        self.stateDirectory = directory
        self.logger = logger
    }

    /// Archives in `archives`, and the records of what was packed in `state`, which must be on the
    /// same file system (archives are renamed into place from there).
    public init(archives: URL, state: URL, logger: Logger) {
        self.directory = archives
        self.stateDirectory = state
        self.logger = logger
    }

    var records: URL { stateDirectory.appendingPathComponent("records", isDirectory: true) }
    var scratch: URL { stateDirectory.appendingPathComponent("tmp", isDirectory: true) }

    /// The archive for `source`, packed or hashed only when the source changed, and an EPUB's
    /// package document (read once, for the check and for what the catalog takes from it).
    func prepare(productID: String, source: ContentSource) throws -> (packed: PackedContent, epub: EPUBPackage?) {
        var epub: EPUBPackage?
        if source.format.deliveredAsFile {
            // A publication is sold as the publisher's file: it must open as what it says it is.
            do {
                if source.format == .epub {
                    epub = try EPUBPackage.read(source.location, container: try PublicationCheck.checkEPUB(source.location))
                } else {
                    try PublicationCheck.check(source.location, as: source.format)
                }
            } catch let refusal as PublicationCheck.Refusal {
                throw UndeliverableContent(file: source.location, format: source.format, detail: refusal.reason)
            }
        }
        return (try pack(productID: productID, source: source), epub)
    }

    /// The archive for `source`, checked as its format: packed or hashed only when it changed.
    private func pack(productID: String, source: ContentSource) throws -> PackedContent {
        let fileManager = FileManager.default
        for folder in [directory, records, scratch] {
            try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        let recordURL = records.appendingPathComponent("\(productID).json")
        let fingerprint = try Self.fingerprint(of: source)
        if let data = try? Data(contentsOf: recordURL),
           let record = try? JSONDecoder().decode(Record.self, from: data),
           record.fingerprint == fingerprint,
           let size = try? fileManager.attributesOfItem(atPath: archive(record.sha256, source.format).path)[.size] as? Int64,
           size == record.size
        {
            let packed = PackedContent(file: archive(record.sha256, source.format), size: record.size, sha256: record.sha256)
            // A ready-made file always has its manifest (it was checked to open as its format; a
            // publication's is its chunks); one recorded without, by an older Kiosk, is made below.
            if record.manifestless == true, source.isFolder { return packed }
            if let manifestSha256 = record.manifestSha256,
               let manifest = try? Data(contentsOf: manifestFile(record.sha256)),
               FileDigest.sha256(of: manifest) == manifestSha256 {
                return PackedContent(file: packed.file, size: packed.size, sha256: packed.sha256,
                                     manifestFile: manifestFile(record.sha256), manifestSha256: manifestSha256)
            }
            // Packed by a Kiosk without manifests, or the manifest went missing: packing again makes one.
        }

        let temporary = scratch.appendingPathComponent("\(UUID().uuidString).\(source.format.fileExtension)")
        defer { try? fileManager.removeItem(at: temporary) }
        let packed: PackedContent
        if source.isFolder {
            logger.info("packing content", metadata: ["product": "\(productID)", "format": "\(source.format.rawValue)"])
            packed = try ContentPacker().pack(folder: source.location, format: source.format, to: temporary)
        } else {
            try fileManager.copyItem(at: source.location, to: temporary)
            // The disk writes the copy while it is hashed; the sync below then finds little left.
            try Self.startWriteback(temporary)
            let size = try fileManager.attributesOfItem(atPath: temporary.path)[.size] as? Int64 ?? 0
            packed = PackedContent(file: temporary, size: size, sha256: try FileDigest.sha256(of: temporary))
        }
        let final = archive(packed.sha256, source.format)
        // Same name, same bytes: if another process got there first, its file is as good.
        if !fileManager.fileExists(atPath: final.path) {
            // Synced here rather than left to the kernel's write-back, which would also flush it
            // some 30 s later in one burst, stalling every commit's fsync meanwhile.
            try Self.synchronize(temporary)
            guard rename(temporary.path, final.path) == 0 else {
                throw ContentStoreError(path: final.path, message: String(cString: strerror(errno)))
            }
            try Self.synchronize(directory)
        }
        var manifestSha256: String?
        do {
            manifestSha256 = try writeManifest(of: final, format: source.format, sha256: packed.sha256, readyMade: !source.isFolder)
        } catch {
            // A ready-made file that does not open as its format cannot be delivered: refused
            // before it is sold. (A folder Kiosk packed itself always opens.)
            guard source.isFolder else { throw UndeliverableContent(file: source.location, format: source.format, error: error) }
            // Without a manifest the product is still served; its updates download the whole archive.
            logger.warning("no manifest for this archive; its updates will download it whole", metadata: ["product": "\(productID)", "error": "\(error)"])
            manifestSha256 = nil
        }
        let record = Record(fingerprint: fingerprint, size: packed.size, sha256: packed.sha256, manifestSha256: manifestSha256,
                            manifestless: manifestSha256 == nil ? true : nil)
        let recordTemporary = scratch.appendingPathComponent("\(UUID().uuidString).json")
        try JSONEncoder.kiosk.encode(record).write(to: recordTemporary)
        guard rename(recordTemporary.path, recordURL.path) == 0 else {
            throw ContentStoreError(path: recordURL.path, message: String(cString: strerror(errno)))
        }
        return PackedContent(file: final, size: packed.size, sha256: packed.sha256,
                             manifestFile: manifestSha256 == nil ? nil : manifestFile(packed.sha256), manifestSha256: manifestSha256)
    }

    /// The manifest file's name for the archive of `sha256`, beside the archive.
    public static func manifestName(_ sha256: String) -> String { "\(sha256).manifest.json" }

    func manifestFile(_ sha256: String) -> URL {
        directory.appendingPathComponent(Self.manifestName(sha256))
    }

    /// Writes the ``ContentManifest`` of `archive` beside it (once: one archive gives one
    /// manifest) and returns its SHA-256: its entries, or a publication file's chunks.
    private func writeManifest(of archive: URL, format: ArchiveFormat, sha256: String, readyMade: Bool) throws -> String {
        let file = manifestFile(sha256)
        // A publication is installed as its file, never by entries: its manifest is its chunks.
        let manifest = format.deliveredAsFile
            ? try ContentManifest.chunked(file: archive, format: format, sha256: sha256)
            : try ContentManifest.build(archive: archive, format: format, sha256: sha256, wholeZip: readyMade)
        let bytes = try manifest.encoded()
        if (try? Data(contentsOf: file)) != bytes {
            let temporary = scratch.appendingPathComponent("\(UUID().uuidString).json")
            try bytes.write(to: temporary)
            try Self.synchronize(temporary)
            guard rename(temporary.path, file.path) == 0 else {
                throw ContentStoreError(path: file.path, message: String(cString: strerror(errno)))
            }
        }
        return FileDigest.sha256(of: bytes)
    }

    /// Where the cover `cover` is kept: beside the archives, named by its SHA-256, so `kiosk
    /// publish` carries it to nginx or a CDN with them.
    public func coverFile(_ cover: CoverImage) -> URL {
        directory.appendingPathComponent(Self.coverName(cover))
    }

    public static func coverName(_ cover: CoverImage) -> String {
        "\(cover.sha256).cover.\(CoverImage.fileExtension(of: cover.type))"
    }

    /// Keeps a cover image's bytes (once: same bytes, same name) and describes them.
    /// - Returns: nil for bytes that are no image Kiosk serves (see ``CoverImage/mediaType(of:)``).
    func storeCover(_ bytes: Data) throws -> (cover: CoverImage, file: URL)? {
        guard let type = CoverImage.mediaType(of: bytes) else { return nil }
        let cover = CoverImage(sha256: FileDigest.sha256(of: bytes), type: type, size: Int64(bytes.count))
        let file = coverFile(cover)
        if (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) != cover.size {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let temporary = scratch.appendingPathComponent("\(UUID().uuidString).cover")
            try bytes.write(to: temporary)
            try Self.synchronize(temporary)
            guard rename(temporary.path, file.path) == 0 else {
                throw ContentStoreError(path: file.path, message: String(cString: strerror(errno)))
            }
        }
        return (cover, file)
    }

    func archive(_ sha256: String, _ format: ArchiveFormat) -> URL {
        directory.appendingPathComponent("\(sha256).\(format.fileExtension)")
    }

    /// Marks the archives `catalogs` name as in use now, and deletes those no catalog has named for
    /// longer than the grace period.
    func collectGarbage(keeping catalogs: [PublishedCatalog], archives: [PackedContent] = [], now: Date = Date()) {
        let fileManager = FileManager.default
        let packed = catalogs.flatMap { $0.archives.values } + archives
        let kept = Set(packed.map { $0.file.lastPathComponent } + packed.compactMap { $0.manifestFile?.lastPathComponent }
                       + catalogs.flatMap { $0.covers.values.map(\.lastPathComponent) })
        for name in kept {
            // The modification time records when a catalog last named the file.
            _ = utimes(directory.appendingPathComponent(name).path, nil)
        }
        guard let names = try? fileManager.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where !kept.contains(name) && name.count > 64 && name.prefix(64).allSatisfy(\.isHexDigit) {
            let url = directory.appendingPathComponent(name)
            guard let modified = try? fileManager.attributesOfItem(atPath: url.path)[.modificationDate] as? Date,
                  now.timeIntervalSince(modified) > Self.gracePeriod else { continue }
            try? fileManager.removeItem(at: url)
            logger.info("removed an archive no catalog names", metadata: ["file": "\(name)"])
        }
    }

    /// Waits until `url` (a file or a folder) is on disk.
    private static func synchronize(_ url: URL) throws {
        try withDescriptor(url) { descriptor in fsync(descriptor) == 0 }
    }

    /// Asks the kernel to start writing `url` to disk without waiting for it.
    private static func startWriteback(_ url: URL) throws {
        try withDescriptor(url) { descriptor in Platform.startWriteback(descriptor, offset: 0, length: 0) }
    }

    private static func withDescriptor(_ url: URL, _ body: (Int32) -> Bool) throws {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ContentStoreError(path: url.path, message: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        guard body(descriptor) else { throw ContentStoreError(path: url.path, message: String(cString: strerror(errno))) }
    }

    private static func fingerprint(of source: ContentSource) throws -> String {
        if source.isFolder {
            return try ContentPacker.fingerprint(of: source.location, format: source.format)
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: source.location.path)
        let size = attributes[.size] as? Int64 ?? -1
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        // The declared format too: the same file said to be another format is checked again.
        return "file\t\(source.location.path)\t\(size)\t\(modified)\t\(source.format.rawValue)"
    }

    private struct Record: Codable {
        var fingerprint: String
        var size: Int64
        var sha256: String
        var manifestSha256: String?
        /// The archive could not be read for a manifest (a ready-made file libarchive refuses).
        var manifestless: Bool?
    }
}

/// A ready-made content file that does not open as the format the catalog gives it: a PDF said to
/// be a zip, a tar.gz said to be a zip, a truncated archive.
public struct UndeliverableContent: Error, CustomStringConvertible {
    public var file: URL
    public var format: ArchiveFormat
    public var detail: String

    /// A publication's check refused it (``PublicationCheck``).
    var isPublication = false

    init(file: URL, format: ArchiveFormat, detail: String) {
        self.file = file
        self.format = format
        self.detail = detail
        isPublication = true
    }

    init(file: URL, format: ArchiveFormat, error: any Error) {
        self.file = file
        self.format = format
        switch error as? UnpackError {
        case .unsupportedFormat(let detail)? where detail.hasPrefix("it is "): self.detail = detail
        case .unsupportedFormat(let detail)?: self.detail = "libarchive: \(detail)"
        case .corrupt(_, let message)?: self.detail = "libarchive: \(message)"
        default: self.detail = "\(error)"
        }
    }

    public var description: String {
        isPublication ? "\(file.lastPathComponent) is not a valid \(format.rawValue): \(detail)" : "\(file.lastPathComponent) does not open as \(format.rawValue) (\(detail))"
    }
}

/// The content store could not write a file.
public struct ContentStoreError: Error, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message); check the data folder is writable and has free space" }
}
