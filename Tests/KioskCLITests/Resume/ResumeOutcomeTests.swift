import Foundation
import GRDB
import Hummingbird
import KioskTestSupport
import Testing

/// What `kiosk resume` reports and exits with when the work it carries on is purchases, not only
/// downloads; and Ctrl-C during a request that hangs.
@Suite("kiosk resume: saved purchases, refusals and interrupts")
struct ResumeOutcomeTests: KioskCommandSuite, BackgroundCommandSuite {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas
    static let book = "com.kiosk.books.small-engines"
    static let otherBook = "com.kiosk.books.river-of-maps"

    @Test("purchases saved while the store is down: resume says so and exits 3; once it is back, one the store refuses is named and resume exits 1, the other is delivered")
    func savedPurchases() async throws {
        let setup = try await SyncedHome()
        #expect(await setup.server.stop() == 0)

        let saved = try await setup.kiosk("buy", Self.otherBook)
        #expect(saved.status == 3, "\(saved.stdout)\(saved.stderr)")
        // No credits on this account: the store will refuse the redemption once it hears of it.
        let redeemed = try await setup.kiosk("redeem", Self.book)
        #expect(redeemed.status == 3, "\(redeemed.stdout)\(redeemed.stderr)")

        let waiting = try await setup.kiosk("resume")
        #expect(waiting.status == 3, "\(waiting.stdout)\(waiting.stderr)")
        let lines = Set(waiting.stdout.split(separator: "\n").map(String.init))
        #expect(lines.contains("\(Self.otherBook): purchase saved; the store cannot be reached, so it is sent as soon as it can be"), "\(waiting.stdout)")
        #expect(lines.contains("\(Self.book): purchase saved; the store cannot be reached, so it is sent as soon as it can be"), "\(waiting.stdout)")

        let again = try await ServerProcess.start(setup.store, log: setup.directory.path("server-2.log"))
        defer { Task { _ = await again.stop() } }
        let resumed = try await setup.kiosk("resume", "--server", again.url)
        #expect(resumed.status == 1, "\(resumed.stdout)\(resumed.stderr)")
        #expect(resumed.stderr.contains("kiosk: \(Self.book): the store refused the saved purchase, so nothing was charged (kiosk transactions says why)\n"), "\(resumed.stderr)")
        #expect(resumed.stdout.contains("installed \(Self.otherBook) in "), "\(resumed.stdout)")
        let states = try await setup.transactions().reduce(into: [String: String]()) { $0[$1["productId"] as? String ?? ""] = $1["state"] as? String }
        #expect(states == [Self.otherBook: "finished", Self.book: "failed"])
    }

    @Test("a store that answers but cannot take the saved purchase now (503, its database down): resume says so, not that the store cannot be reached, and exits 3")
    func storeCannotTakeItNow() async throws {
        let setup = try await SyncedHome()
        let router = Router(context: BasicRequestContext.self)
        router.on("**", method: .get) { _, _ in Self.unavailable() }
        router.on("**", method: .post) { _, _ in Self.unavailable() }
        try await LoopbackServer.run(router, label: "kiosk.test-unavailable") { port in
            let url = "http://127.0.0.1:\(port)"
            #expect(try await setup.kiosk("config", "set", "server", url).status == 0)
            let saved = try await setup.kiosk("buy", Self.otherBook)
            #expect(saved.status == 3, "\(saved.stdout)\(saved.stderr)")
            let waiting = try await setup.kiosk("resume")
            #expect(waiting.status == 3, "\(waiting.stdout)\(waiting.stderr)")
            #expect(waiting.stdout.contains("\(Self.otherBook): purchase saved; the store could not take it now"), "\(waiting.stdout)")
            #expect(!waiting.stdout.contains("cannot be reached"), "\(waiting.stdout)")
        }
        _ = await setup.server.stop()
    }

    /// The store's answer while its database is down.
    static func unavailable() -> Response {
        Response(status: .serviceUnavailable, headers: [.contentType: "application/json", .retryAfter: "1"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"code": "unavailable", "message": "the store's database did not answer; send the request again"}"#)))
    }

    @Test("Ctrl-C while a server accepts the connection and never answers: the command stops at once (within the suite's stop bound), says so in one line, exits 130")
    func interruptedRequest() async throws {
        let directory = try TemporaryDirectory()
        // A listening socket nobody accepts from: the kernel completes the connection, then silence.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 8) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        #expect(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))

        let process = Process()
        process.executableURL = KioskCommand.executable
        process.arguments = ["sync", "--server", "http://127.0.0.1:\(port)"]
        process.environment = ProcessInfo.processInfo.environment.merging(["KIOSK_HOME": directory.path("home").path]) { $1 }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.runAlone()
        try await Task.sleep(for: .seconds(1.5))
        #expect(process.isRunning, "sync ended before it was interrupted")
        let sent = ContinuousClock.now
        kill(process.processIdentifier, SIGINT)
        while process.isRunning, ContinuousClock.now - sent < .seconds(5) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!process.isRunning)
        // Within the suite's bound for a stop (``stopBound``): it catches a stop that waited for
        // the request's own timeout, not a machine busy with other work (1 s failed under load).
        #expect(ContinuousClock.now - sent < stopBound, "took \(ContinuousClock.now - sent) to stop")
        if process.isRunning { process.terminate() }
        process.waitForExit()
        #expect(process.terminationStatus == 130)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(stderr == "kiosk: interrupted; whatever was saved is completed by the next kiosk command\n", "\(stderr)")
    }

    @Test("resume exits 1 naming a download that failed for good, then and at the next resume")
    func resumeFailedForGood() async throws {
        let setup = try await AtlasHome(megabytes: 1)
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        // A receipt the store refuses for good: the download can never succeed as it stands.
        try await database.write { try $0.execute(sql: "UPDATE download SET receipt = 'not-a-receipt'") }
        let failed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
        let lines = failed.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasPrefix("kiosk: \(AtlasHome.atlas): ") == true, "\(failed.stderr)")
        let again = try await KioskCommand.run(["resume", "--json"], environment: ["KIOSK_HOME": setup.home])
        #expect(again.status == 1)
        let reason = try await database.read { try String.fetchOne($0, sql: "SELECT lastError FROM download") } ?? ""
        #expect(again.stderr == "kiosk: \(AtlasHome.atlas): failed for good earlier (\(reason)); kiosk restore downloads it again, kiosk cancel \(AtlasHome.atlas) drops it\n")
        let document = try Self.json(again.stdout)
        #expect(document["outcome"] as? String == "failed" && document["failedEarlier"] as? [String] == [AtlasHome.atlas])
        _ = await setup.server.stop()
    }

    @Test("kiosk resume --wait waiting for a store that is down stops on SIGINT at once (within the suite's stop bound)")
    func resumeWaitStops() async throws {
        let setup = try await Setup()
        _ = await setup.server.stop()
        let resume = try setup.startSlow(["resume", "--wait"], log: "resume-wait")
        try await Task.sleep(for: .seconds(2))
        let stopped = try await Self.stop(resume, signal: SIGINT)
        #expect(stopped.seconds < Double(stopBound.components.seconds), "\(stopped) \(setup.output("resume-wait"))")
        #expect(try await Self.downloadRow(setup.home, Self.atlas)?["state"] as? String == "waiting")
    }
}
