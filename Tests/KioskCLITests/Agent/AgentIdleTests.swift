import Foundation
import KioskTestSupport
import Testing

/// What the agent does while nothing is due: it sleeps. Work that waits on no clock (an Ask to
/// Buy waiting for its answer, which the change feed brings) must not make it wake at once, round
/// after round: the agent before this test sent about 290 requests a second to the store while one Ask to
/// Buy waited.
@Suite("The agent at rest")
struct AgentIdleTests {
    @Test("while an Ask to Buy waits for its answer the agent sleeps: a handful of requests in 4 s, not hundreds")
    func agentSleepsWhileAskToBuyWaits() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        defer { Task { _ = await server.stop() } }
        let environment = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        #expect(try await KioskCommand.run(["sync"], environment: environment).status == 0)
        let asked = try await KioskCommand.run(["buy", "com.kiosk.books.river-of-maps", "--payment", "defer"], environment: environment)
        #expect(asked.stdout.contains("Ask to Buy") || asked.stdout.contains("waiting"), "\(asked.stdout)\(asked.stderr)")

        let before = Self.requests(in: server.log)
        let agent = try await KioskCommand.run(["4", KioskCommand.executable.path, "agent"], environment: environment,
                                               program: URL(fileURLWithPath: "/usr/bin/timeout"))
        #expect(agent.status == 124, "the agent should still be running when timeout stops it: \(agent.stderr)")
        let during = Self.requests(in: server.log) - before
        // A sync, a replay, the feed's long poll and a few probes; an agent that does not sleep
        // sends hundreds.
        #expect(during > 0 && during < 40, "the agent sent \(during) requests in 4 s")
    }

    /// The server's request log lines (one per answered request).
    static func requests(in log: String) -> Int {
        log.split(separator: "\n").filter { $0.contains("status=") }.count
    }
}
