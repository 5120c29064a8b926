import KioskArchive
import KioskTransfer

/// What `kiosk --version` prints: the program, the commit it was built from, and the Swift,
/// libcurl and libarchive it runs with (what a bug report needs).
enum VersionInfo {
    static let version = "0.1.0"

    static var text: String {
        """
        kiosk \(version) (commit \(buildCommit))
        Swift \(swiftVersion)
        \(CurlVersion.description)
        \(ArchiveVersion.description)
        """
    }

    /// The compiler that built this program.
    static var swiftVersion: String {
        #if compiler(>=6.4)
        return "6.4 or later"
        #elseif compiler(>=6.3)
        return "6.3"
        #elseif compiler(>=6.2)
        return "6.2"
        #elseif compiler(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }
}
