import KioskArchive
import KioskCommandLine

/// What `kiosk-server --version` prints: the program, the commit it was built from, and the Swift
/// and libarchive (which packs the published archives) it runs with.
enum VersionInfo {
    static var text: String {
        """
        kiosk-server \(ProgramVersion.number) (commit \(buildCommit))
        Swift \(ProgramVersion.swift)
        \(ArchiveVersion.description)
        """
    }
}
