import KioskArchive
import KioskCommandLine
import KioskTransfer

/// What `kiosk --version` prints: the program, the commit it was built from, and the Swift,
/// libcurl and libarchive it runs with (what a bug report needs).
enum VersionInfo {
    static var text: String {
        """
        \(program)
        Swift \(ProgramVersion.swift)
        \(CurlVersion.description)
        \(ArchiveVersion.description)
        """
    }

    /// The first line alone, which names no library.
    static var program: String { "kiosk \(ProgramVersion.number) (commit \(buildCommit))" }
}
