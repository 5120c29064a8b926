import Foundation
import KioskTestSupport
import Testing

/// A KIOSK_HOME on a small tmpfs: a disk that really fills.
@Suite("Full and read-only disks", .enabled(if: SmallDisk.canMount, "mounting a small tmpfs needs root; these tests do not run without it"))
struct FullDiskTests {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas

    @Test("a download larger than the free space is refused before it starts, saying how much is needed and where")
    func tooLargeForTheDisk() async throws {
        let directory = try TemporaryDirectory()
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 8)
        defer { disk.unmount() }
        let setup = try await Setup(megabytes: 16, home: disk.path.appendingPathComponent("home"))
        let resume = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resume.status == 3, "\(resume.stderr)")
        #expect(resume.stdout.contains("the download of \(Self.atlas) needs 16.0 MiB free in \(setup.home)/downloads, which has "), "\(resume.stdout)")
        #expect(resume.stdout.contains("free some space; the download waits with its bytes; due again after "))
        // Inside kiosk resume, nothing tells the reader to run kiosk resume.
        #expect(!resume.stdout.contains("kiosk resume"), "\(resume.stdout)")
        #expect(setup.partialSize() == 0)
        _ = await setup.server.stop()
    }

    @Test("the disk filled by something else mid-download: state stays consistent, pause and cancel work, resume continues once space is freed")
    func filledMidDownload() async throws {
        let directory = try TemporaryDirectory()
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 40)
        defer { disk.unmount() }
        let setup = try await Setup(home: disk.path.appendingPathComponent("home"))
        let environment = ["KIOSK_HOME": setup.home]

        // Filled mid-way: the download waits with its bytes, pause still works, then it continues.
        let slow = try setup.startSlowResume()
        try await setup.waitForPartial(atLeast: 2 << 20)
        disk.fill()
        try await offCooperativePool { slow.waitForExit() }
        #expect(slow.terminationStatus == 3, "\(setup.output("slow-resume"))")
        #expect(setup.output("slow-resume").stdout.contains("No space left on device"), "\(setup.output("slow-resume"))")
        #expect(setup.output("slow-resume").stdout.contains("free in \(setup.home)/downloads"))
        let waiting = try await KioskCommand.run(["downloads", "--json"], environment: environment)
        #expect(waiting.stdout.contains("\"state\":\"waiting\""), "\(waiting.stderr)")
        let paused = try await KioskCommand.run(["pause", Self.atlas], environment: environment)
        #expect(paused.status == 0, "\(paused.stderr)")
        let kept = setup.partialSize()
        #expect(kept >= 2 << 20)
        disk.free()
        let resumed = try await KioskCommand.run(["resume"], environment: environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(kept + Setup.received(resumed.stdout) == setup.archiveSize)
        try await setup.expectInstalledByteExact()

        // Filled again during a reinstall: cancel works on the full disk and frees the bytes.
        try FileManager.default.removeItem(atPath: setup.home + "/Library/\(Self.atlas)")
        let again = try setup.startSlowResume()
        try await setup.waitForPartial(atLeast: 2 << 20)
        disk.fill()
        try await offCooperativePool { again.waitForExit() }
        let cancelled = try await KioskCommand.run(["cancel", Self.atlas], environment: environment)
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        #expect(setup.partialSize() == 0)
        let state = try await KioskCommand.run(["downloads", "--json"], environment: environment)
        #expect(state.stdout.contains("\"state\":\"cancelled\""))
        disk.free()
        _ = await setup.server.stop()
    }

    @Test("the disk filled during an update of an EPUB by chunks: the download waits with what it built (exit 3, one line), then resumes from it and installs the new edition byte for byte")
    func filledDuringChunkedUpdate() async throws {
        let directory = try TemporaryDirectory()
        // Room for the home's reserve (ClientDatabase keeps 2 MiB when 16 MiB are free), as a reader's disk has.
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 40)
        defer { disk.unmount() }
        let store = try SampleStore(in: directory)
        let book = "com.kiosk.books.harbor-plates"
        let file = store.content.appendingPathComponent("publications/harbor-plates.epub")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        func edition(revising chapter: String) throws {
            let made = try PublicationTests.run("/usr/bin/python3", [SampleStore.repository.appendingPathComponent("scripts/make_epub.py").path, file.path,
                "--chapters", "40", "--chapter-bytes", "30000", "--plates", "2", "--plate-bytes", "1200000", "--revise", chapter])
            try #require(made.status == 0, "\(made.output)")
        }
        try edition(revising: "0")
        try store.editCatalog("books.json") { products in
            var product = products[0]
            product["id"] = book
            product["content"] = ["path": "publications/harbor-plates.epub", "format": "epub"]
            products.append(product)
        }
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = disk.path.appendingPathComponent("home").path
        let environment = ["KIOSK_HOME": home, "KIOSK_SERVER": server.url]
        #expect(try await KioskCommand.run(["buy", book], environment: environment).status == 0)
        // Every other chapter revised: about 400 KB of ranges, enough to outlast libcurl's first
        // unthrottled burst (it checks a receive cap only after draining a burst of buffers).
        try edition(revising: (1...40).filter { $0 % 2 == 1 }.map(String.init).joined(separator: ","))
        let second = try Data(contentsOf: file)
        server.signal(SIGHUP)
        var synced = ""
        for _ in 0..<50 where !synced.contains("1 changed") {
            try await Task.sleep(for: .milliseconds(100))
            synced = try await KioskCommand.run(["sync"], environment: environment).stdout
        }
        #expect(synced.contains("1 changed"), "\(synced)")

        // Slowed, so the first range is still arriving when the disk fills.
        let process = Process()
        process.executableURL = KioskCommand.executable
        process.arguments = ["resume"]
        process.environment = ProcessInfo.processInfo.environment.merging(environment.merging(["KIOSK_MAX_RECEIVE_SPEED": "8000"])  { $1 }) { $1 }
        let out = directory.path("resume.out")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = process.standardOutput
        try process.runAlone()
        let partial = home + "/downloads/\(book).partial"
        for _ in 0..<400 where ((try? FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int) ?? 0) < 40_000 {
            try await Task.sleep(for: .milliseconds(25))
        }
        _ = disk.fill()
        try await offCooperativePool { process.waitForExit() }
        let said = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 3, "\(said)")
        #expect(said.contains("No space left on device") && !said.contains("kiosk: :"), "\(said)")
        let waiting = try await KioskCommand.run(["downloads", "--json"], environment: environment)
        #expect(waiting.stdout.contains("\"state\":\"waiting\""), "\(waiting.stdout)")
        let built = (try? FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int) ?? 0
        #expect(built >= 40_000, "what the update built stays")

        disk.free()
        let resumed = try await KioskCommand.run(["resume"], environment: environment)
        #expect(resumed.status == 0, "\(resumed.stdout)\(resumed.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: home + "/Library/\(book)/harbor-plates.epub")) == second)
        let received = resumed.stdout.split(separator: "\n").compactMap { line -> Int? in
            line.hasPrefix("received ") ? Int(line.dropFirst("received ".count).prefix { $0.isNumber }) : nil
        }.reduce(0, +)
        #expect(received < second.count / 2, "the resume continued from what was built: received \(received) of \(second.count)")
        _ = await server.stop()
    }

    @Test("the disk full while a catalog arrives: one line saying so, the local catalog kept, no spool left; then the sync lands")
    func fullDuringSync() async throws {
        let directory = try TemporaryDirectory()
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 8)
        defer { disk.unmount() }
        let home = disk.path.appendingPathComponent("home")
        @Sendable func catalog(_ count: Int) -> String {
            let products = (0..<count).map { #"{"id":"com.example.p\#($0)","kind":"consumable","title":"p\#($0)","summary":"s","price":{"amount":"1.00","currency":"USD"}}"# }
            return #"{"products":[\#(products.joined(separator: ","))]}"#
        }
        try await HostileServer.run { server, url in
            let environment = ["KIOSK_HOME": home.path]
            server.catalog = .json(catalog(3))
            let first = try await KioskCommand.run(["sync", "--server", url], environment: environment)
            #expect(first.status == 0, "\(first.stderr)")

            // About 2.5 MB of catalog against a disk with 1 MiB left (room for the database's
            // own files, not for the catalog).
            server.catalog = .json(catalog(20_000))
            let filled = disk.fill()
            #expect(truncate(disk.path.appendingPathComponent("filler").path, off_t(filled - (1 << 20))) == 0)
            let full = try await KioskCommand.run(["sync"], environment: environment)
            #expect(full.status == 1)
            #expect(full.stderr.split(separator: "\n").count == 1, "\(full.stderr)")
            #expect(full.stderr.contains("\(home.path): the disk is full") && full.stderr.contains("the local catalog was kept"), "\(full.stderr)")
            disk.free()
            #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).filter { $0.hasPrefix(".catalog-") }.isEmpty)
            let kept = try await KioskCommand.run(["products", "--json"], environment: environment)
            #expect(kept.stdout.contains("com.example.p2") && !kept.stdout.contains("com.example.p3"), "\(kept.stdout.prefix(300))")

            let again = try await KioskCommand.run(["sync"], environment: environment)
            #expect(again.status == 0 && again.stdout.contains("19997 added, 0 changed, 0 removed"), "\(again.stdout)\(again.stderr)")
        }
    }

    @Test("a read-only home: one line naming the file and what to do")
    func readOnlyHome() async throws {
        let directory = try TemporaryDirectory()
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 16)
        defer { disk.unmount() }
        let setup = try await Setup(megabytes: 1, buy: false, home: disk.path.appendingPathComponent("home"))
        try disk.makeReadOnly()
        let sync = try await KioskCommand.run(["sync"], environment: ["KIOSK_HOME": setup.home])
        #expect(sync.status == 1)
        #expect(sync.stderr.split(separator: "\n").count == 1, "\(sync.stderr)")
        #expect(sync.stderr.hasPrefix("kiosk: \(setup.home)/kiosk.sqlite: "), "\(sync.stderr)")
        #expect(sync.stderr.contains("--home or KIOSK_HOME") || sync.stderr.contains("writable"), "\(sync.stderr)")
        _ = await setup.server.stop()
    }
}
