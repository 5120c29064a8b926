import CArchive

/// The libarchive this program runs with. It is loaded on first use, not at start (CArchive's
/// LazyArchive.c), so whether it could be loaded is known only here.
public enum ArchiveVersion {
    /// libarchive's own line, e.g. `libarchive 3.6.2 zlib/1.2.13 liblzma/5.4.1 …`, for `kiosk --version`.
    public static var description: String {
        guard let text = archive_version_details() else {
            return loadError.map { "libarchive not loaded: \($0)" } ?? "libarchive (version unknown)"
        }
        return String(cString: text)
    }

    /// Why making `thing` (a reader, a writer, an entry) failed: the library could not be loaded,
    /// with the loader's reason, or it could not allocate.
    static func unavailable(_ thing: String) -> String {
        if let loadError {
            return "libarchive could not be loaded (\(loadError)); install libarchive13"
        }
        return "libarchive could not allocate \(thing)"
    }

    /// Why libarchive could not be loaded (the loader's message), or nil once it is loaded.
    static var loadError: String? {
        kiosk_archive_load_error().map { String(cString: $0) }
    }
}
