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
        try await offCooperativePool { slow.waitUntilExit() }
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
        try await offCooperativePool { again.waitUntilExit() }
        let cancelled = try await KioskCommand.run(["cancel", Self.atlas], environment: environment)
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        #expect(setup.partialSize() == 0)
        let state = try await KioskCommand.run(["downloads", "--json"], environment: environment)
        #expect(state.stdout.contains("\"state\":\"cancelled\""))
        disk.free()
        _ = await setup.server.stop()
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
