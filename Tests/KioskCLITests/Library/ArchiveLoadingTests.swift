import Foundation
import KioskTestSupport
import Testing

/// `kiosk` loads libarchive the first time it opens an archive (CArchive's LazyArchive.c), not at
/// start: commands that never unpack do not carry it and the libraries behind it.
@Suite("libarchive, loaded on first use")
struct ArchiveLoadingTests {
    /// A zip holding `chapter.txt`, written by Python's zipfile (not by Kiosk).
    static func zip(in directory: TemporaryDirectory) throws -> URL {
        let zip = directory.path("book.zip")
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w').writestr('chapter.txt', 'It was a dark night.')", zip.path]
        try python.runAlone()
        python.waitForExit()
        try #require(python.terminationStatus == 0, "python3 could not write a zip (make test installs it)")
        return zip
    }

    @Test("a command that opens no archive does not load libarchive; kiosk unpack loads it and unpacks")
    func loadedOnFirstUse() async throws {
        // The C library's loader lists every library it loads with LD_DEBUG=files.
        let help = try await KioskCommand.run(["fetch", "--help"], environment: ["LD_DEBUG": "files"])
        #expect(help.status == 0)
        #expect(help.stderr.contains("file=libcurl.so.4"), "the loader's list was not seen: \(help.stderr.prefix(300))")
        #expect(!help.stderr.contains("libarchive"), "kiosk fetch --help loaded libarchive")

        let directory = try TemporaryDirectory()
        let zip = try Self.zip(in: directory)
        let unpack = try await KioskCommand.run(["unpack", zip.path, "-C", directory.path("out").path], environment: ["LD_DEBUG": "files"])
        #expect(unpack.status == 0, "\(unpack.stderr.suffix(300))")
        #expect(unpack.stderr.contains("file=libarchive.so.13"))
        #expect(try String(contentsOf: directory.path("out/chapter.txt"), encoding: .utf8) == "It was a dark night.")
    }

    @Test("a libarchive that cannot be loaded: one line naming it and what to install, nothing unpacked; --version says so")
    func unloadable() async throws {
        let directory = try TemporaryDirectory()
        let zip = try Self.zip(in: directory)
        // An empty file where the loader looks first: not a library.
        let libraries = directory.path("lib")
        try FileManager.default.createDirectory(at: libraries, withIntermediateDirectories: true)
        try Data().write(to: libraries.appendingPathComponent("libarchive.so.13"))
        let environment = ["LD_LIBRARY_PATH": libraries.path]

        let unpack = try await KioskCommand.run(["unpack", zip.path, "-C", directory.path("out").path], environment: environment)
        #expect(unpack.status == 1)
        let lines = unpack.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("libarchive could not be loaded") && lines[0].contains("libarchive.so.13")
            && lines[0].contains("install libarchive13"), "\(unpack.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("out/chapter.txt").path))

        let version = try await KioskCommand.run(["--version"], environment: environment)
        #expect(version.status == 0 && version.stdout.contains("libarchive not loaded: "), "\(version.stdout)")
        // The program itself starts and runs without it.
        let fetchHelp = try await KioskCommand.run(["fetch", "--help"], environment: environment)
        #expect(fetchHelp.status == 0 && fetchHelp.stdout.contains("USAGE: kiosk fetch"))
    }
}
