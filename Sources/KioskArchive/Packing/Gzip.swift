import CArchive
import Foundation

/// Gzip for in-memory bodies, with libarchive's raw format and gzip filter.
public enum Gzip {
    /// Compresses `data` into a gzip stream without a timestamp, so equal input gives equal output.
    public static func compress(_ data: Data) throws -> Data {
        guard let handle = archive_write_new() else {
            throw ArchiveError.library(path: "<memory>", message: ArchiveVersion.unavailable("a writer"))
        }
        defer { archive_write_free(handle) }
        func check(_ code: Int32) throws {
            guard code >= ARCHIVE_WARN else {
                let message = archive_error_string(handle).map { String(cString: $0) } ?? "error \(code)"
                throw ArchiveError.library(path: "<memory>", message: message)
            }
        }
        try check(archive_write_set_format_raw(handle))
        try check(archive_write_add_filter_gzip(handle))
        try check(archive_write_set_options(handle, "gzip:!timestamp"))
        try check(archive_write_set_bytes_in_last_block(handle, 1))

        // Deflate never grows data by more than a few bytes per 16 KiB block, plus the header.
        let capacity = data.count + data.count / 100 + 4096
        var output = Data(count: capacity)
        var used = 0
        try output.withUnsafeMutableBytes { buffer in
            try check(archive_write_open_memory(handle, buffer.baseAddress, capacity, &used))
            guard let entry = archive_entry_new() else {
                throw ArchiveError.library(path: "<memory>", message: ArchiveVersion.unavailable("an entry"))
            }
            defer { archive_entry_free(entry) }
            archive_entry_set_pathname(entry, "body")
            archive_entry_set_filetype(entry, kiosk_ae_ifreg)
            archive_entry_set_size(entry, Int64(data.count))
            try check(archive_write_header(handle, entry))
            let written = data.withUnsafeBytes { archive_write_data(handle, $0.baseAddress, $0.count) }
            guard written == data.count else { try check(Int32(truncatingIfNeeded: written)); return }
            try check(archive_write_close(handle))
        }
        return output.prefix(used)
    }
}
