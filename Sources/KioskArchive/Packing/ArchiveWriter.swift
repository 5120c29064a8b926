import CArchive
import Foundation
import KioskCore

/// Owns one libarchive write handle and frees it when done.
final class ArchiveWriter {
    private let handle: OpaquePointer
    private let path: String
    private var isOpen = false

    /// Creates a writer for `format`, with options that make the output depend only on the input.
    init(format: ArchiveFormat, path: String) throws {
        guard let handle = archive_write_new() else {
            throw ArchiveError.library(path: path, message: ArchiveVersion.unavailable("a writer"))
        }
        self.handle = handle
        self.path = path
        switch format {
        // A publication is never packed by Kiosk (the catalog refuses a folder for one); a zip
        // container is what its format would be.
        case .zip, .epub, .cbz, .pdf:
            try check(archive_write_set_format_zip(handle))
            try check(archive_write_set_options(handle, "zip:compression=deflate"))
        case .tarGz:
            try check(archive_write_set_format_pax_restricted(handle))
            try check(archive_write_add_filter_gzip(handle))
            // gzip headers carry the time of writing by default; leave it out for stable bytes.
            try check(archive_write_set_options(handle, "gzip:!timestamp"))
        }
    }

    deinit {
        if isOpen { archive_write_close(handle) }
        archive_write_free(handle)
    }

    func open() throws {
        try check(archive_write_open_filename(handle, path))
        isOpen = true
    }

    /// Writes a directory entry.
    func addDirectory(_ name: String, mtime: Int) throws {
        let entry = try makeEntry(name: name + "/", type: kiosk_ae_ifdir, permissions: 0o755, size: 0, mtime: mtime)
        defer { archive_entry_free(entry) }
        try check(archive_write_header(handle, entry))
    }

    /// Writes a regular file entry, streaming its bytes from `source` in 1 MiB reads.
    func addFile(_ name: String, from source: URL, size: Int64, mtime: Int) throws {
        let entry = try makeEntry(name: name, type: kiosk_ae_ifreg, permissions: 0o644, size: size, mtime: mtime)
        defer { archive_entry_free(entry) }
        try check(archive_write_header(handle, entry))
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        var written: Int64 = 0
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            let result = chunk.withUnsafeBytes { archive_write_data(handle, $0.baseAddress, $0.count) }
            guard result >= 0 else { try check(Int32(result)); return }
            written += Int64(chunk.count)
        }
        guard written == size else {
            throw ArchiveError.unpackableEntry(path: source.path, reason: "the file changed size while it was being packed")
        }
    }

    func close() throws {
        guard isOpen else { return }
        isOpen = false
        try check(archive_write_close(handle))
    }

    private func makeEntry(name: String, type: UInt32, permissions: UInt32, size: Int64, mtime: Int) throws -> OpaquePointer {
        guard let entry = archive_entry_new() else {
            throw ArchiveError.library(path: path, message: ArchiveVersion.unavailable("an entry"))
        }
        archive_entry_set_pathname_utf8(entry, name)
        archive_entry_set_filetype(entry, type)
        archive_entry_set_perm(entry, mode_t(permissions))
        archive_entry_set_size(entry, size)
        archive_entry_set_mtime(entry, time_t(mtime), 0)
        archive_entry_set_uid(entry, 0)
        archive_entry_set_gid(entry, 0)
        return entry
    }

    private func check(_ code: Int32) throws {
        guard code >= ARCHIVE_WARN else {
            let message = archive_error_string(handle).map { String(cString: $0) } ?? "error \(code)"
            throw ArchiveError.library(path: path, message: message)
        }
    }
}
