import Foundation
import KioskTestSupport
import Testing

/// The case that once installed a book with files missing: `kiosk resume` stopped (Ctrl-Z,
/// SIGSTOP) past its claim's lease, a second `kiosk resume` takes the download over, and the first
/// is continued. The second must install every file byte-exact, and the first touch nothing of it.
@Suite("A kiosk process stopped past its lease and continued")
struct StoppedOwnerTests {
    static let book = "com.kiosk.books.many-pages"

    enum Continued: String, CaseIterable, CustomStringConvertible {
        /// While the second process is still downloading and unpacking ahead.
        case whileTheOtherRuns
        /// After the second process installed the book.
        case afterTheOtherInstalled
        var description: String { rawValue }
    }

    struct Setup {
        let directory: TemporaryDirectory
        let store: SampleStore
        let server: ServerProcess
        let home: String

        init() async throws {
            directory = try TemporaryDirectory()
            store = try SampleStore(in: directory)
            // 30 files of 200 KiB that do not compress, as tar.gz: unpacked while it downloads.
            try store.addManyFileBook(StoppedOwnerTests.book, files: 30, kilobytes: 200)
            server = try await ServerProcess.start(store, log: directory.path("server.log"))
            home = directory.path("home").path
            #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home]).status == 0)
            let bought = try await KioskCommand.run(["buy", StoppedOwnerTests.book, "--no-download"], environment: ["KIOSK_HOME": home])
            #expect(bought.status == 0, "\(bought.stderr)")
        }

        var library: URL { URL(fileURLWithPath: home).appendingPathComponent("Library") }
        var partial: URL { URL(fileURLWithPath: home).appendingPathComponent("downloads/\(StoppedOwnerTests.book).partial") }

        /// `kiosk resume` in the background with a one-second claim lease, throttled.
        func startResume(bytesPerSecond: Int, log: String) throws -> Process {
            let process = Process()
            process.executableURL = KioskCommand.executable
            process.arguments = ["resume"]
            process.environment = ProcessInfo.processInfo.environment.merging([
                "KIOSK_HOME": home, "KIOSK_MAX_RECEIVE_SPEED": String(bytesPerSecond), "KIOSK_CLAIM_LEASE_SECONDS": "1",
            ]) { $1 }
            FileManager.default.createFile(atPath: directory.path("\(log).out").path, contents: nil)
            FileManager.default.createFile(atPath: directory.path("\(log).err").path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: directory.path("\(log).out"))
            process.standardError = try FileHandle(forWritingTo: directory.path("\(log).err"))
            try process.runAlone()
            return process
        }

        func output(_ log: String) -> String {
            ((try? String(contentsOf: directory.path("\(log).out"), encoding: .utf8)) ?? "") + ((try? String(contentsOf: directory.path("\(log).err"), encoding: .utf8)) ?? "")
        }

        func partialSize() -> Int {
            (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
        }

        func waitForPartial(atLeast bytes: Int) async throws {
            for _ in 0..<300 where partialSize() < bytes {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(partialSize() >= bytes)
        }
    }

    static func wait(_ process: Process) async throws {
        try await offCooperativePool { process.waitForExit() }
    }

    @Test("the process that took over installs every file byte-exact; the continued one changes nothing and leaves nothing", arguments: Continued.allCases)
    func stoppedPastLease(continued: Continued) async throws {
        let setup = try await Setup()
        let first = try setup.startResume(bytesPerSecond: 1_000_000, log: "first")
        try await setup.waitForPartial(atLeast: 1 << 20)
        kill(first.processIdentifier, SIGSTOP)
        defer { kill(first.processIdentifier, SIGCONT) }
        // Past the one-second lease: nobody renews it while the first is stopped.
        try await Task.sleep(for: .milliseconds(1_800))
        let second = try setup.startResume(bytesPerSecond: continued == .whileTheOtherRuns ? 2_000_000 : 50_000_000, log: "second")
        switch continued {
        case .whileTheOtherRuns:
            try await Task.sleep(for: .milliseconds(1_200))
            #expect(second.isRunning, "the second finished before the first was continued; the case was not exercised")
            kill(first.processIdentifier, SIGCONT)
            try await Self.wait(second)
        case .afterTheOtherInstalled:
            try await Self.wait(second)
            kill(first.processIdentifier, SIGCONT)
        }
        try await Self.wait(first)
        #expect(second.terminationStatus == 0, "\(setup.output("second"))")
        #expect([0, 3].contains(first.terminationStatus), "\(setup.output("first"))")

        let source = setup.store.content.appendingPathComponent("books/many-pages")
        let installed = setup.library.appendingPathComponent(Self.book)
        #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: source), "first: \(setup.output("first"))\nsecond: \(setup.output("second"))")
        let downloads = try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(downloads.contains("\"state\":\"installed\""), "\(downloads)")
        let hidden = try FileManager.default.contentsOfDirectory(atPath: setup.library.path).filter { $0.hasPrefix(".") }
        #expect(hidden.isEmpty, "left in the library: \(hidden)")
        #expect(!FileManager.default.fileExists(atPath: setup.partial.path))

        // Nothing left to repair: a later resume finds the library whole and fetches nothing.
        let again = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!again.stdout.contains("received"), "\(again.stdout)")
        #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: source))
        _ = await setup.server.stop()
    }
}
