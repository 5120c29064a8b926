import CArchive
import Foundation

/// A tar.gz a hostile publisher could ship: a harmless chapter, then an entry that climbs out.
enum HostileContent {
    static func write(to url: URL) throws {
        guard let archive = archive_write_new() else { throw CocoaError(.fileWriteUnknown) }
        defer { archive_write_free(archive) }
        archive_write_set_format_pax_restricted(archive)
        archive_write_add_filter_gzip(archive)
        guard archive_write_open_filename(archive, url.path) == ARCHIVE_OK else { throw CocoaError(.fileWriteUnknown) }
        for (name, text) in [("chapter.md", "# Chapter\n"), ("../../escaped.txt", "pwned\n")] {
            guard let entry = archive_entry_new() else { throw CocoaError(.fileWriteUnknown) }
            defer { archive_entry_free(entry) }
            let bytes = Array(text.utf8)
            archive_entry_set_pathname(entry, name)
            archive_entry_set_filetype(entry, kiosk_ae_ifreg)
            archive_entry_set_perm(entry, 0o644)
            archive_entry_set_size(entry, Int64(bytes.count))
            archive_write_header(archive, entry)
            archive_write_data(archive, bytes, bytes.count)
        }
        archive_write_close(archive)
    }
}
