import Foundation
import Testing

/// Debian's `openssl`, the tests' independent maker of keys and signatures (Play's licensing key
/// and its purchases' signatures, a service account's key).
public enum OpenSSL {
    /// Runs `openssl ARGUMENTS` in `directory`; fails the test, naming the command, when it fails,
    /// and says what to install when openssl is missing.
    public static func run(_ arguments: [String], in directory: TemporaryDirectory) throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "openssl is missing: apt-get install openssl")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory.url
        process.standardError = FileHandle.nullDevice
        try process.runAlone()
        process.waitForExit()
        try #require(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " ")) failed")
    }
}
