import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

/// Two `kiosk` processes on one KIOSK_HOME, and interruptions from outside, as people cause them.
@Suite("Two processes on one home, Ctrl-C and pauses from another terminal")
struct TwoProcessCommandTests {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas

    static func wait(_ process: Process) async throws {
        try await offCooperativePool { process.waitForExit() }
    }

    static func accounts(_ setup: Setup) throws -> Int {
        let database = try DatabaseQueue(path: setup.store.data.appendingPathComponent("kiosk-server.sqlite").path)
        return try database.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM account") ?? 0 }
    }

    static func charges(_ setup: Setup) throws -> [String: Int] {
        let database = try DatabaseQueue(path: setup.store.data.appendingPathComponent("kiosk-server.sqlite").path)
        return try database.read { db in
            Dictionary(try Row.fetchAll(db, sql: "SELECT accountId, COUNT(*) AS n FROM ledgerEntry WHERE kind = 'charge' GROUP BY accountId").map { ($0["accountId"], $0["n"]) }) { $0 + $1 }
        }
    }

    static func libraryLeftovers(_ setup: Setup) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: setup.home + "/Library").filter { $0.hasPrefix(".") }
    }

    @Test("buy and resume at once: the archive arrives once, both exit 0, one charge, installed byte-exact")
    func buyAndResume() async throws {
        let setup = try await Setup(buy: false)
        let buy = try setup.startSlow(["buy", Self.atlas], log: "buy")
        try await setup.waitForPartial(atLeast: 1 << 20)
        let resume = try setup.startSlow(["resume"], log: "resume")
        try await Self.wait(buy)
        try await Self.wait(resume)
        #expect(buy.terminationStatus == 0, "\(setup.output("buy"))")
        #expect(resume.terminationStatus == 0, "\(setup.output("resume"))")
        #expect(setup.output("resume").stdout.contains("installed \(Self.atlas) (downloaded by another kiosk process)"))
        let received = Setup.received(setup.output("buy").stdout) + Setup.received(setup.output("resume").stdout)
        #expect(received == setup.archiveSize, "the archive was downloaded more than once")
        try await setup.expectInstalledByteExact()
        #expect(try Self.charges(setup).values.reduce(0, +) == 1)
        let transactions = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(transactions.components(separatedBy: "\"state\":\"finished\"").count == 2)
        #expect(try Self.libraryLeftovers(setup).isEmpty)
        _ = await setup.server.stop()
    }

    @Test("two resumes at once: one downloads, the other waits; byte-exact, nothing left in staging")
    func twoResumes() async throws {
        let setup = try await Setup()
        let first = try setup.startSlow(["resume"], log: "first")
        let second = try setup.startSlow(["resume"], log: "second")
        try await Self.wait(first)
        try await Self.wait(second)
        #expect(first.terminationStatus == 0, "\(setup.output("first"))")
        #expect(second.terminationStatus == 0, "\(setup.output("second"))")
        let received = Setup.received(setup.output("first").stdout) + Setup.received(setup.output("second").stdout)
        #expect(received == setup.archiveSize)
        try await setup.expectInstalledByteExact()
        #expect(try Self.libraryLeftovers(setup).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: setup.partial.path))
        _ = await setup.server.stop()
    }

    @Test("first commands at once on a fresh home create one account; every purchase is charged to it")
    func oneAccount() async throws {
        let setup = try await Setup(megabytes: 1, buy: false)
        #expect(try Self.accounts(setup) == 0)
        let commands = [["buy", "com.kiosk.credits.pack-5"], ["buy", "com.kiosk.credits.pack-5"], ["buy", "com.kiosk.credits.pack-5"],
                        ["balance"], ["balance"], ["account"]]
        let results = try await withThrowingTaskGroup(of: KioskCommand.Result.self) { group in
            for arguments in commands {
                group.addTask { try await KioskCommand.run(arguments, environment: ["KIOSK_HOME": setup.home]) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for result in results { #expect(result.status == 0, "\(result.stderr)") }
        #expect(try Self.accounts(setup) == 1)
        #expect(try Self.charges(setup).values.sorted() == [3])
        let balance = try await KioskCommand.run(["balance"], environment: ["KIOSK_HOME": setup.home])
        #expect(balance.stdout == "15 credits\n")
        _ = await setup.server.stop()
    }

    @Test("Ctrl-C stops a download at once, says so in one line, and resume continues from its bytes")
    func interrupt() async throws {
        let setup = try await Setup()
        let resume = try setup.startSlow(["resume"], log: "interrupted")
        try await setup.waitForPartial(atLeast: 1 << 20)
        let started = ContinuousClock.now
        kill(resume.processIdentifier, SIGINT)
        try await Self.wait(resume)
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < stopBound, "exited \(elapsed) after SIGINT")
        #expect(resume.terminationStatus == 3)
        let lines = setup.output("interrupted").stdout.split(separator: "\n").filter { $0.contains("interrupted") }
        #expect(lines.count == 1 && lines.first?.hasPrefix("\(Self.atlas): interrupted;") == true, "\(setup.output("interrupted"))")
        let downloads = try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(downloads.contains("\"state\":\"waiting\""))
        let kept = setup.partialSize()
        #expect(kept >= 1 << 20)

        let finished = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(kept + Setup.received(finished.stdout) == setup.archiveSize)
        try await setup.expectInstalledByteExact()
        _ = await setup.server.stop()
    }

    @Test("a pause from another terminal stops the running download at once; its bytes are kept")
    func pauseFromElsewhere() async throws {
        let setup = try await Setup()
        let resume = try setup.startSlow(["resume"], log: "running")
        try await setup.waitForPartial(atLeast: 1 << 20)
        let pause = try await KioskCommand.run(["pause", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        let started = ContinuousClock.now
        #expect(pause.status == 0, "\(pause.stderr)")
        try await Self.wait(resume)
        #expect(ContinuousClock.now - started < stopBound, "exited \(ContinuousClock.now - started) after the pause")
        #expect(resume.terminationStatus == 3)
        #expect(setup.output("running").stdout.contains("\(Self.atlas): paused by another command"))
        #expect(!setup.output("running").stdout.contains("installed"))
        let downloads = try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(downloads.contains("\"state\":\"paused\""))
        let kept = setup.partialSize()
        #expect(kept > 0)

        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(kept + Setup.received(resumed.stdout) == setup.archiveSize)
        try await setup.expectInstalledByteExact()
        _ = await setup.server.stop()
    }
}
