import CArchive
import Foundation

/// Builds the archives an attacker would send, entry by entry, with libarchive.
struct HostileArchive {
    enum Entry {
        case file(String, String, mode: Int = 0o644)
        case zeros(String, bytes: Int64)
        case directory(String)
        case symlink(String, target: String)
        case hardlink(String, target: String)
        case device(String)
        case fifo(String)
    }

    enum Format { case tarGz, zip }

    static func write(_ entries: [Entry], format: Format = .tarGz, to url: URL) throws {
        guard let archive = archive_write_new() else { throw CocoaError(.fileWriteUnknown) }
        defer { archive_write_free(archive) }
        switch format {
        case .tarGz:
            archive_write_set_format_pax_restricted(archive)
            archive_write_add_filter_gzip(archive)
        case .zip:
            archive_write_set_format_zip(archive)
        }
        guard archive_write_open_filename(archive, url.path) == ARCHIVE_OK else { throw CocoaError(.fileWriteUnknown) }
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        for item in entries {
            guard let entry = archive_entry_new() else { throw CocoaError(.fileWriteUnknown) }
            defer { archive_entry_free(entry) }
            archive_entry_set_mtime(entry, 946_684_800, 0)
            var data: [UInt8] = []
            var zeroBytes: Int64 = 0
            switch item {
            case .file(let name, let text, let mode):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ifreg)
                archive_entry_set_perm(entry, mode_t(mode))
                data = Array(text.utf8)
                archive_entry_set_size(entry, Int64(data.count))
            case .zeros(let name, let bytes):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ifreg)
                archive_entry_set_perm(entry, 0o644)
                archive_entry_set_size(entry, bytes)
                zeroBytes = bytes
            case .directory(let name):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ifdir)
                archive_entry_set_perm(entry, 0o755)
            case .symlink(let name, let target):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_iflnk)
                archive_entry_set_perm(entry, 0o777)
                archive_entry_set_symlink(entry, target)
            case .hardlink(let name, let target):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ifreg)
                archive_entry_set_perm(entry, 0o644)
                archive_entry_set_hardlink(entry, target)
                archive_entry_set_size(entry, 0)
            case .device(let name):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ifchr)
                archive_entry_set_perm(entry, 0o666)
                archive_entry_set_rdevmajor(entry, 1)
                archive_entry_set_rdevminor(entry, 3)
            case .fifo(let name):
                archive_entry_set_pathname(entry, name)
                archive_entry_set_filetype(entry, kiosk_ae_ififo)
                archive_entry_set_perm(entry, 0o644)
            }
            guard archive_write_header(archive, entry) == ARCHIVE_OK else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: String(cString: archive_error_string(archive))])
            }
            if !data.isEmpty { _ = archive_write_data(archive, data, data.count) }
            while zeroBytes > 0 {
                let chunk = Int(min(zeroBytes, Int64(zeros.count)))
                _ = archive_write_data(archive, zeros, chunk)
                zeroBytes -= Int64(chunk)
            }
        }
        archive_write_close(archive)
    }
}
