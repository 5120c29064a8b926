import CArchive
import Crypto
import Foundation

/// Unpacks one zip entry fetched on its own (its local header, data and data descriptor, as a
/// ``ContentManifest`` range names them) into a file, checking it is the entry the manifest
/// promised: the same path, at most the promised size, and the promised SHA-256.
public struct ZipEntryReader: Sendable {
    /// Why a fetched entry was not the one promised.
    public struct Mismatch: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var problem: String
        public var description: String { "the fetched bytes of \"\(path)\" \(problem)" }
    }

    public init() {}

    /// Unpacks the single entry in `source` (the entry's archive bytes) into `destination`
    /// (which must not exist), or throws and leaves nothing at `destination`.
    /// - Throws: ``Mismatch`` when the bytes are not `entry`'s.
    public func unpack(_ source: Data, as entry: ContentManifest.Entry, to destination: URL) throws {
        do {
            try read(source, as: entry, to: destination)
        } catch {
            unlink(destination.path)
            throw error
        }
    }

    /// Checks that `source` (the entry's archive bytes) unpacks to exactly `entry`, writing nothing.
    /// - Throws: ``Mismatch`` when the bytes are not `entry`'s.
    public func check(_ source: Data, as entry: ContentManifest.Entry) throws {
        try read(source, as: entry, to: nil)
    }

    private func read(_ source: Data, as entry: ContentManifest.Entry, to destination: URL?) throws {
        // libarchive reads 24 bytes ahead for a data descriptor, which is 16 without zip64: the
        // padding is never part of the entry, only room for that look.
        var padded = source
        padded.append(Data(count: 24))
        try padded.withUnsafeBytes { try write($0, as: entry, to: destination) }
    }

    private func write(_ source: UnsafeRawBufferPointer, as entry: ContentManifest.Entry, to destination: URL?) throws {
        guard let handle = archive_read_new() else { throw Mismatch(path: entry.path, problem: "could not be read (\(ArchiveVersion.unavailable("a reader")))") }
        defer { archive_read_free(handle) }
        archive_read_support_format_zip_streamable(handle)
        func message() -> String { archive_error_string(handle).map { String(cString: $0) } ?? "unknown libarchive error" }
        guard archive_read_open_memory(handle, source.baseAddress, source.count) == ARCHIVE_OK else {
            throw Mismatch(path: entry.path, problem: "are not a zip entry (\(message()))")
        }
        var header: OpaquePointer?
        guard archive_read_next_header(handle, &header) >= ARCHIVE_WARN, let header else {
            throw Mismatch(path: entry.path, problem: "are not a zip entry (\(message()))")
        }
        let name = ArchiveExtractor.entryName(header)
        let path = (try? ArchiveExtractor.checkedRelativePath(name).joined(separator: "/")) ?? name
        guard path == entry.path, UInt32(archive_entry_filetype(header)) == kiosk_ae_ifreg else {
            throw Mismatch(path: entry.path, problem: "hold another entry (\"\(name)\")")
        }
        // Without a destination the bytes are only hashed (a resume checking what it already has).
        var descriptor: Int32 = -1
        if let destination {
            descriptor = open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw UnpackError.disk(entry: entry.path, message: String(cString: strerror(errno))) }
        }
        defer { if descriptor >= 0 { close(descriptor) } }
        var digest = EntryDigest()
        var size: Int64 = 0
        while true {
            var block: UnsafeRawPointer?
            var count = 0
            var offset: la_int64_t = 0
            let read = archive_read_data_block(handle, &block, &count, &offset)
            if read == ARCHIVE_EOF { break }
            guard read >= ARCHIVE_WARN else { throw Mismatch(path: entry.path, problem: "do not unpack (\(message()))") }
            let end = Int64(offset) + Int64(count)
            guard end <= entry.size else { throw Mismatch(path: entry.path, problem: "unpack past the \(entry.size) bytes the manifest says") }
            if let block, count > 0, descriptor >= 0 {
                var done = 0
                while done < count {
                    let wrote = pwrite(descriptor, block + done, count - done, off_t(Int64(offset) + Int64(done)))
                    guard wrote > 0 else {
                        throw errno == ENOSPC || errno == EDQUOT ? UnpackError.noSpace(entry: entry.path) : UnpackError.disk(entry: entry.path, message: String(cString: strerror(errno)))
                    }
                    done += wrote
                }
            }
            digest.add(block, count: count, at: Int64(offset))
            size = max(size, end)
        }
        guard size == entry.size, descriptor < 0 || ftruncate(descriptor, off_t(size)) == 0 else {
            throw Mismatch(path: entry.path, problem: "unpack to \(size) bytes, the manifest says \(entry.size)")
        }
        guard digest.finalize(size: size) == entry.sha256 else {
            throw Mismatch(path: entry.path, problem: "do not have the SHA-256 the manifest says")
        }
    }
}
