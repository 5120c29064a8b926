import KioskArchive
import KioskCommandLine
import KioskTransfer

/// What `kiosk --version` prints: the program, the commit it was built from, and the Swift,
/// libcurl and libarchive it runs with (what a bug report needs).
enum VersionInfo {
    static var text: String {
        """
        kiosk \(ProgramVersion.number) (commit \(buildCommit))
        Swift \(ProgramVersion.swift)
        \(CurlVersion.description)
        \(ArchiveVersion.description)
        """
    }
}
