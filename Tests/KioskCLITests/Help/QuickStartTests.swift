import Foundation
import KioskTestSupport
import Testing

/// The README's quick start, run as written against a server the test starts: the front door
/// cannot promise what the commands no longer do.
@Suite("The README's quick start")
struct QuickStartTests {
    /// The shell block that follows the `<!-- quick-start: … -->` marker in README.md.
    static func quickStartBlock() throws -> String {
        let readme = try String(contentsOf: SampleStore.repository.appendingPathComponent("README.md"), encoding: .utf8)
        guard let marker = readme.range(of: "<!-- quick-start:"),
              let open = readme.range(of: "```sh\n", range: marker.upperBound..<readme.endIndex),
              let close = readme.range(of: "\n```", range: open.upperBound..<readme.endIndex)
        else { throw QuickStartMissing() }
        return String(readme[open.upperBound..<close.lowerBound])
    }

    struct QuickStartMissing: Error, CustomStringConvertible {
        var description: String { "README.md has no ```sh block after a <!-- quick-start: --> marker" }
    }

    @Test("every step of the quick start does what its comment says")
    func quickStart() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        // The reader's terminal is in the store's folder, where `kiosk admin` finds .kiosk-server.
        let folder = directory.path("terminal")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(".kiosk-server"), withDestinationURL: store.data)
        let home = directory.path("kiosk-reader").path
        let bin = KioskCommand.executable.deletingLastPathComponent().path
        let script = try Self.quickStartBlock()

        let result = try await offCooperativePool { () -> (status: Int32, output: String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", script]
            process.currentDirectoryURL = folder
            var environment = ProcessInfo.processInfo.environment
            environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
            environment["KIOSK_SERVER"] = server.url
            environment["KIOSK_HOME"] = home
            process.environment = environment
            let log = directory.path("quick-start.log")
            FileManager.default.createFile(atPath: log.path, contents: nil)
            let handle = try FileHandle(forWritingTo: log)
            process.standardOutput = handle
            process.standardError = handle
            try process.runAlone()
            process.waitForExit()
            return (process.terminationStatus, try String(contentsOf: log, encoding: .utf8))
        }
        let output = result.output
        let atlas = "com.kiosk.books.night-sky-atlas"
        #expect(result.status == 0, "\(output)")
        for line in ["catalog synced: 13 added", "installed com.kiosk.books.river-of-maps", "balance: 10 credits",
                     "installed com.kiosk.magazines.harbor-monthly.issue-02", "installed com.kiosk.magazines.harbor-monthly.issue-03",
                     "\(atlas): interrupted;", "installed \(atlas)", "restored ", "revoked",
                     "installed com.kiosk.books.salt-and-stars", "/Library/com.kiosk.books.salt-and-stars/salt-and-stars.epub\n", "Wren Calloway"] {
            #expect(output.contains(line), "the quick start no longer prints \"\(line)\":\n\(output)")
        }
        // The atlas resumed from its bytes: the second run fetched less than the whole archive.
        let received = output.split(separator: "\n").compactMap { line -> Int? in
            guard line.hasPrefix("received ") else { return nil }
            return Int(line.dropFirst("received ".count).prefix { $0.isNumber })
        }
        let size = try FileManager.default.attributesOfItem(atPath: store.content.appendingPathComponent("books/night-sky-atlas/plates/northern-sky.png").path)[.size] as? Int ?? 0
        #expect(received.contains { $0 > 0 && $0 < size }, "no download resumed part-way: \(received)\n\(output)")
        let library = URL(fileURLWithPath: home).appendingPathComponent("Library")
        #expect(try FolderSnapshot.files(in: library.appendingPathComponent(atlas)) == FolderSnapshot.files(in: store.content.appendingPathComponent("books/night-sky-atlas")))
        // Refunded: gone from the reader's library; the tablet restored the books and issues.
        #expect(!FileManager.default.fileExists(atPath: library.appendingPathComponent("com.kiosk.books.river-of-maps").path))
        #expect(FileManager.default.fileExists(atPath: URL(fileURLWithPath: home + "-tablet").appendingPathComponent("Library/\(atlas)").path))
        _ = await server.stop()
    }
}
