import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

@Suite("Multi-MiB downloads cut and resumed, as a person runs them")
struct ResumeCommandTests {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas

    @Test("a reload mid-download: resume finishes the version it began with, then installs the new one before it returns")
    func reloadMidDownload() async throws {
        let setup = try await Setup()
        let resume = try setup.startSlow(["resume"], log: "reloaded")
        try await setup.waitForPartial(atLeast: 1 << 20)
        try Data("# Atlas, second edition\n".utf8).write(to: setup.store.content.appendingPathComponent("books/atlas/index.md"))
        setup.server.signal(SIGHUP)
        // The running resume learns of the new version from a sync in another terminal.
        var report = ""
        for _ in 0..<50 where !report.contains("1 changed") {
            try await Task.sleep(for: .milliseconds(100))
            report = try await KioskCommand.run(["sync"], environment: ["KIOSK_HOME": setup.home]).stdout
        }
        #expect(report.contains("1 changed"))
        try await offCooperativePool { resume.waitForExit() }
        #expect(resume.terminationStatus == 0, "\(setup.output("reloaded"))")
        #expect(setup.output("reloaded").stdout.contains("queued \(Self.atlas)"), "\(setup.output("reloaded"))")
        let index = URL(fileURLWithPath: setup.home).appendingPathComponent("Library/\(Self.atlas)/index.md")
        #expect(try String(contentsOf: index, encoding: .utf8).contains("second edition"))
        _ = await setup.server.stop()
    }

    @Test("a client killed with SIGKILL mid-download resumes and ends byte-exact, with little re-sent")
    func clientKilled() async throws {
        let setup = try await Setup()
        let slow = try setup.startSlowResume()
        try await setup.waitForPartial(atLeast: 2 << 20)
        kill(slow.processIdentifier, SIGKILL)
        try await offCooperativePool { slow.waitForExit() }
        let kept = setup.partialSize()
        #expect(kept > 0 && kept < setup.archiveSize)

        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        try await setup.expectInstalledByteExact()
        let total = kept + Setup.received(resumed.stdout)
        #expect(total == setup.archiveSize, "the resume re-sent bytes it already had")
        _ = await setup.server.stop()
    }

    @Test("a server killed mid-download and restarted: the download waits, then resumes byte-exact")
    func serverRestarted() async throws {
        // Larger than the loopback socket buffers, which would otherwise deliver the rest after the kill.
        var setup = try await Setup(megabytes: 32)
        let slow = try setup.startSlowResume(bytesPerSecond: 4_000_000)
        try await setup.waitForPartial(atLeast: 2 << 20)
        setup.server.signal(SIGKILL)
        try await offCooperativePool { slow.waitForExit() }
        #expect(slow.terminationStatus == 3)
        let kept = setup.partialSize()
        let waiting = try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(waiting.contains("\"state\":\"waiting\""))

        setup.server = try await ServerProcess.start(setup.store, log: setup.directory.path("server2.log"))
        let resumed = try await KioskCommand.run(["resume", "--wait", "--max-wait", "30", "--server", setup.server.url], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try await setup.expectInstalledByteExact()
        #expect(kept + Setup.received(resumed.stdout) == setup.archiveSize)
        let transactions = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(transactions.contains("\"state\":\"finished\""))
        _ = await setup.server.stop()
    }

    @Test("curl -C -, wget -c and aria2c -c with the receipt finish an interrupted download byte-exact", arguments: ["curl", "wget", "aria2c"])
    func realClientsResume(tool: String) async throws {
        let setup = try await Setup()
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        let receipt = try await database.read { try String.fetchOne($0, sql: "SELECT receipt FROM payment WHERE productId = ?", arguments: [Self.atlas]) } ?? ""
        let url = "\(setup.server.url)/v1/content/\(Self.atlas)"
        let header = "Authorization: Receipt \(receipt)"
        let whole = setup.directory.path("whole.zip")
        #expect(try await Self.run("curl", ["-sf", "-H", header, "-o", whole.path, url]) == 0)
        let output = setup.directory.path("atlas.zip")
        try Data(contentsOf: whole).prefix(3_000_001).write(to: output)

        let status: Int32
        switch tool {
        case "curl": status = try await Self.run("curl", ["-sf", "-C", "-", "-H", header, "-o", output.path, url])
        case "wget": status = try await Self.run("wget", ["-q", "-c", "--header", header, "-O", output.path, url])
        default: status = try await Self.run("aria2c", ["-q", "-c", "--allow-overwrite=false", "--header", header, "-d", setup.directory.url.path, "-o", "atlas.zip", url])
        }
        #expect(status == 0)
        #expect(try Data(contentsOf: output) == Data(contentsOf: whole))
        #expect(try FileDigest.sha256(of: output).count == 64)
        _ = await setup.server.stop()
    }

    static func run(_ tool: String, _ arguments: [String]) async throws -> Int32 {
        try await offCooperativePool { try runBlocking(tool, arguments) }
    }

    static func runBlocking(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runAlone()
        process.waitForExit()
        return process.terminationStatus
    }
}
