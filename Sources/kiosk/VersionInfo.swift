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

    /// What the command line's configuration carries: the whole text only when `--version` is
    /// asked for, since libcurl's version line starts OpenLDAP, which loads the SASL plugins and
    /// Berkeley DB into the command's memory (0.9 MiB). ArgumentParser also takes `--version=…`
    /// as the flag; nothing after `--` is an option.
    static func text(for arguments: [String]) -> String {
        let asked = arguments.dropFirst().prefix { $0 != "--" }.contains { $0 == "--version" || $0.hasPrefix("--version=") }
        return asked ? text : program
    }
}
