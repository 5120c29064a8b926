import CArchive
import Foundation
import KioskCore

/// The published manifest of one content version: every entry's path, kind, size and SHA-256,
/// and, for a zip, the bytes of the archive that hold each file entry on its own (its local
/// header, compressed data and data descriptor).
///
/// It is served beside the archive and its SHA-256 is in the catalog beside the archive's, so a
/// client trusts it exactly as it trusts the archive. An update fetches only the entries whose
/// SHA-256 differs from what is installed, checks each against this manifest as it arrives, and
/// checks the whole new tree against it before the tree is installed. A tar.gz is one gzip
/// stream, whose entries cannot be read on their own: its manifest has no ranges and an update
/// of it downloads the whole archive.
///
/// A publication delivered as its file (EPUB, PDF, CBZ) is never unpacked: its manifest lists no
/// entries but the file's content-defined ``chunks`` instead (``ContentChunks``), from which a
/// device builds an update out of the chunks it holds and ranges for the rest.
public struct ContentManifest: Sendable, Equatable, Codable {
    public struct Entry: Sendable, Equatable, Codable {
        /// Relative to the archive's root, `/`-separated, without `.` components.
        public var path: String
        public var kind: ArchiveManifest.Kind
        /// Bytes of a file once unpacked; 0 for the other kinds.
        public var size: Int64
        /// Lowercase hex SHA-256 of a file's unpacked bytes.
        public var sha256: String?
        /// Where a symlink points.
        public var target: String?
        /// The first archive byte of the entry (its local header), for zip files.
        public var offset: Int64?
        /// How many archive bytes the entry takes, header to the end of its data descriptor.
        public var length: Int64?

        public init(path: String, kind: ArchiveManifest.Kind, size: Int64, sha256: String? = nil, target: String? = nil, offset: Int64? = nil, length: Int64? = nil) {
            self.path = path
            self.kind = kind
            self.size = size
            self.sha256 = sha256
            self.target = target
            self.offset = offset
            self.length = length
        }
    }

    public var format: ArchiveFormat
    /// The archive this manifest describes.
    public var archiveSha256: String
    public var archiveSize: Int64
    public var entries: [Entry]
    /// How a publication file was cut (``ContentChunks/scheme``); nil for archives.
    public var chunking: String?
    /// A publication file's chunks, in order; together they are the whole file.
    public var chunks: [ContentChunks.Chunk]?

    public init(format: ArchiveFormat, archiveSha256: String, archiveSize: Int64, entries: [Entry],
                chunking: String? = nil, chunks: [ContentChunks.Chunk]? = nil) {
        self.format = format
        self.archiveSha256 = archiveSha256
        self.archiveSize = archiveSize
        self.entries = entries
        self.chunking = chunking
        self.chunks = chunks
    }

    /// The manifest of a publication file (of `sha256`): its chunks.
    public static func chunked(file: URL, format: ArchiveFormat, sha256: String) throws -> ContentManifest {
        let placed = try ContentChunks.chunks(of: file)
        let size = placed.last.map { $0.offset + $0.chunk.length } ?? 0
        return ContentManifest(format: format, archiveSha256: sha256, archiveSize: size, entries: [],
                               chunking: ContentChunks.scheme, chunks: placed.map(\.chunk))
    }

    /// True when every file entry can be fetched on its own.
    public var hasRanges: Bool {
        entries.allSatisfy { $0.kind != .file || ($0.offset != nil && $0.length != nil) }
    }

    /// The manifest the installer checks a tree against.
    public var checkable: ArchiveManifest {
        var manifest = ArchiveManifest()
        for entry in entries {
            manifest.add(ArchiveManifest.Entry(path: entry.path, kind: entry.kind, size: entry.size, sha256: entry.sha256, target: entry.target))
        }
        return manifest
    }

    /// The manifest's bytes as served: sorted keys, so one archive always gives the same bytes.
    public func encoded() throws -> Data {
        try JSONEncoder.kiosk.encode(self)
    }

    /// Reads `archive` (of `sha256`) entry by entry, hashing each file, and for a zip finds each
    /// entry's bytes through its central directory.
    /// - Throws: ``UnpackError`` for an archive libarchive cannot read or with an unsafe path.
    /// Refuses an archive that libarchive reads as another format than `declared` (a tar.gz said
    /// to be a zip): the device unpacks what the catalog says it is.
    static func check(_ reader: ArchiveHandle, isA declared: ArchiveFormat) throws {
        let family = archive_format(reader.handle) & ARCHIVE_FORMAT_BASE_MASK
        let gzip = archive_filter_code(reader.handle, 0) == ARCHIVE_FILTER_GZIP
        let actual: String = switch family {
        case ARCHIVE_FORMAT_ZIP: "a zip archive"
        case ARCHIVE_FORMAT_TAR: gzip ? "a tar.gz archive" : "a tar archive that is not gzip-compressed"
        default: "an archive of another kind"
        }
        let matches = switch declared {
        case .zip, .epub, .cbz: family == ARCHIVE_FORMAT_ZIP
        case .tarGz: family == ARCHIVE_FORMAT_TAR && gzip
        case .pdf: false
        }
        guard matches else { throw UnpackError.unsupportedFormat("it is \(actual), not \(declared.rawValue)") }
    }

    /// - Parameter wholeZip: a zip must also have a central directory that reads (a publisher's
    ///   ready-made file: libarchive streams a zip cut inside its directory, other tools refuse it).
    public static func build(archive: URL, format: ArchiveFormat, sha256: String, wholeZip: Bool = false) throws -> ContentManifest {
        let size = (try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int64) ?? 0
        let reader = try ArchiveHandle.reader(path: archive.path)
        var entries: [Entry] = []
        var hardlinked: [String: Entry] = [:]
        while true {
            var entryPointer: OpaquePointer?
            let status = archive_read_next_header(reader.handle, &entryPointer)
            if status == ARCHIVE_EOF { break }
            guard status >= ARCHIVE_WARN, let entry = entryPointer else {
                throw UnpackError.corrupt(entry: nil, message: reader.message)
            }
            if entries.isEmpty, hardlinked.isEmpty { try Self.check(reader, isA: format) }
            let name = ArchiveExtractor.entryName(entry)
            if ArchiveExtractor.isDestinationItself(name) { continue }
            let path = try ArchiveExtractor.checkedRelativePath(name).joined(separator: "/")
            var digest = EntryDigest()
            var written: Int64 = 0
            while true {
                var block: UnsafeRawPointer?
                var count = 0
                var offset: la_int64_t = 0
                let read = archive_read_data_block(reader.handle, &block, &count, &offset)
                if read == ARCHIVE_EOF { break }
                guard read >= ARCHIVE_WARN else { throw UnpackError.corrupt(entry: name, message: reader.message) }
                digest.add(block, count: count, at: Int64(offset))
                written = max(written, Int64(offset) + Int64(count))
            }
            if let link = archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry),
               let target = hardlinked[(try? ArchiveExtractor.checkedRelativePath(String(cString: link)).joined(separator: "/")) ?? ""] {
                var copy = target
                copy.path = path
                copy.offset = nil
                copy.length = nil
                entries.append(copy)
                continue
            }
            let made: Entry
            switch UInt32(archive_entry_filetype(entry)) {
            case kiosk_ae_ifdir:
                made = Entry(path: path, kind: .directory, size: 0)
            case kiosk_ae_iflnk:
                let target = (archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)).map { String(cString: $0) } ?? ""
                made = Entry(path: path, kind: .symlink, size: 0, target: target)
            default:
                let fileSize = max(written, archive_entry_size_is_set(entry) != 0 ? Int64(archive_entry_size(entry)) : 0)
                made = Entry(path: path, kind: .file, size: fileSize, sha256: digest.finalize(size: fileSize))
            }
            hardlinked[path] = made
            entries.append(made)
        }
        if wholeZip, format == .zip || format == .epub {
            do {
                _ = try ZipDirectory.ranges(of: archive)
            } catch {
                throw UnpackError.unsupportedFormat("it is a zip whose central directory cannot be read (\(error)); zip tools refuse it")
            }
        }
        if format == .zip || format == .epub, let ranges = try? ZipDirectory.ranges(of: archive) {
            for index in entries.indices where entries[index].kind == .file {
                guard let range = ranges[entries[index].path] else { continue }
                entries[index].offset = range.offset
                entries[index].length = range.length
            }
        }
        return ContentManifest(format: format, archiveSha256: sha256, archiveSize: size, entries: entries)
    }
}

/// Where each entry of a zip lies, read from its central directory.
enum ZipDirectory {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// Each entry's local header offset and the bytes up to the next entry (or the central
    /// directory), by its path without a trailing `/`. An entry named twice is left out.
    static func ranges(of archive: URL) throws -> [String: (offset: Int64, length: Int64)] {
        let handle = try FileHandle(forReadingFrom: archive)
        defer { try? handle.close() }
        let size = Int64(try handle.seekToEnd())
        let tailLength = min(size, 65_557)
        try handle.seek(toOffset: UInt64(size - tailLength))
        let tail = [UInt8](try handle.read(upToCount: Int(tailLength)) ?? Data())
        guard tail.count >= 22, let end = stride(from: tail.count - 22, through: 0, by: -1).first(where: { tail.uint32(at: $0) == 0x0605_4b50 }) else {
            throw Problem(description: "no end of central directory")
        }
        var directoryOffset = Int64(tail.uint32(at: end + 16))
        var directorySize = Int64(tail.uint32(at: end + 12))
        if directoryOffset == 0xFFFF_FFFF || directorySize == 0xFFFF_FFFF, end >= 20, tail.uint32(at: end - 20) == 0x0706_4b50 {
            let recordOffset = Int64(tail.uint64(at: end - 20 + 8))
            try handle.seek(toOffset: UInt64(recordOffset))
            let record = [UInt8](try handle.read(upToCount: 56) ?? Data())
            guard record.count == 56, record.uint32(at: 0) == 0x0606_4b50 else { throw Problem(description: "bad zip64 end record") }
            directorySize = Int64(record.uint64(at: 40))
            directoryOffset = Int64(record.uint64(at: 48))
        }
        guard directoryOffset >= 0, directorySize >= 0, directoryOffset + directorySize <= size else {
            throw Problem(description: "the central directory lies outside the file")
        }
        try handle.seek(toOffset: UInt64(directoryOffset))
        let directory = [UInt8](try handle.read(upToCount: Int(directorySize)) ?? Data())
        var starts: [(name: String, offset: Int64)] = []
        var position = 0
        while position + 46 <= directory.count, directory.uint32(at: position) == 0x0201_4b50 {
            let nameLength = Int(directory.uint16(at: position + 28))
            let extraLength = Int(directory.uint16(at: position + 30))
            let commentLength = Int(directory.uint16(at: position + 32))
            var offset = Int64(directory.uint32(at: position + 42))
            guard position + 46 + nameLength + extraLength <= directory.count else { throw Problem(description: "truncated central directory") }
            let name = String(decoding: directory[(position + 46)..<(position + 46 + nameLength)], as: UTF8.self)
            if offset == 0xFFFF_FFFF {
                // The zip64 extra field holds the sizes that overflowed, in order, then the offset.
                var extra = position + 46 + nameLength
                let extraEnd = extra + extraLength
                while extra + 4 <= extraEnd {
                    let id = directory.uint16(at: extra)
                    let length = Int(directory.uint16(at: extra + 2))
                    if id == 0x0001 {
                        var field = extra + 4
                        if directory.uint32(at: position + 24) == 0xFFFF_FFFF { field += 8 }
                        if directory.uint32(at: position + 20) == 0xFFFF_FFFF { field += 8 }
                        if field + 8 <= extra + 4 + length { offset = Int64(directory.uint64(at: field)) }
                    }
                    extra += 4 + length
                }
            }
            starts.append((name, offset))
            position += 46 + nameLength + extraLength + commentLength
        }
        starts.sort { $0.offset < $1.offset }
        var ranges: [String: (offset: Int64, length: Int64)] = [:]
        var named = Set<String>()
        for (index, start) in starts.enumerated() {
            let next = index + 1 < starts.count ? starts[index + 1].offset : directoryOffset
            let path = start.name.split(separator: "/").filter { $0 != "." }.joined(separator: "/")
            guard next > start.offset, !named.contains(path) else {
                ranges[path] = nil
                continue
            }
            named.insert(path)
            ranges[path] = (start.offset, next - start.offset)
        }
        return ranges
    }
}

extension [UInt8] {
    func uint16(at index: Int) -> UInt16 {
        UInt16(self[index]) | UInt16(self[index + 1]) << 8
    }

    func uint32(at index: Int) -> UInt32 {
        UInt32(uint16(at: index)) | UInt32(uint16(at: index + 2)) << 16
    }

    func uint64(at index: Int) -> UInt64 {
        UInt64(uint32(at: index)) | UInt64(uint32(at: index + 4)) << 32
    }
}
