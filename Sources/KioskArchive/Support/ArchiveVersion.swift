import CArchive

/// The libarchive this program runs with, for `kiosk --version`.
public enum ArchiveVersion {
    /// libarchive's own line, e.g. `libarchive 3.6.2 zlib/1.2.13 liblzma/5.4.1 …`.
    public static var description: String {
        guard let text = archive_version_details() else { return "libarchive (version unknown)" }
        return String(cString: text)
    }
}
