import Foundation
import KioskTestSupport
import Testing

/// `kiosk serve --rate-limit-…` as an operator sets them, and readers' commands that meet them.
@Suite("kiosk serve rate limits")
struct RateLimitCommandTests {
    @Test("two readers behind one address buy at once under 1/second limits: the one refused (429, Retry-After: 1) waits and succeeds, each charged once")
    func buyWaitsOutRetryAfter() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: [
            "--rate-limit-accounts-per-address", "1/second", "--rate-limit-purchases-per-address", "1/second",
        ], log: directory.path("server.log"))
        let homes = ["a", "b"].map { directory.path($0).path }
        for home in homes {
            #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home]).status == 0)
        }
        // Each first buy also creates the home's account: both limits are met at once.
        let results = try await withThrowingTaskGroup(of: KioskCommand.Result.self) { group in
            for home in homes { group.addTask { try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": home]) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for result in results {
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("balance: 5 credits"), "\(result.stdout)")
        }
        await server.stop()
        // Read once the server stopped: its request log is flushed at exit.
        let refused = server.log.components(separatedBy: "status=429").count - 1
        #expect(refused >= 1, "the two buys never met the limit; the test proves nothing")
    }

    @Test("a rate limit that is not N/unit or off is a usage error naming the flag")
    func badRateLimit() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let result = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path,
                                                 "--data", store.data.path, "--port", "0", "--rate-limit-purchases-per-account", "lots"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--rate-limit-purchases-per-account must be N/second, N/minute, N/hour, N/day or off, not lots"), "\(result.stderr)")
        let proxy = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path,
                                                "--data", store.data.path, "--port", "0", "--trusted-proxy", "not-an-ip"])
        #expect(proxy.status == 2)
        #expect(proxy.stderr.contains("--trusted-proxy not-an-ip is not an IP address"), "\(proxy.stderr)")
    }

    @Test("a purchase the store will not take now (429 for long) fails in one line, nothing charged, and is never sent later: a reader who tries again pays once")
    func refusedPurchaseIsNotSentLater() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var server = try await ServerProcess.start(store, extraArguments: ["--rate-limit-purchases-per-account", "2/hour"], log: directory.path("server.log"))
        let home = directory.path("home").path
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home]).status == 0)
        for _ in 0..<2 {
            #expect(try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": home]).status == 0)
        }
        let refused = try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": home])
        #expect(refused.status == 1)
        #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("nothing was done; try again in"), "\(refused.stderr)")
        let transactions = try await KioskCommand.run(["transactions"], environment: ["KIOSK_HOME": home]).stdout
        #expect(!transactions.contains("purchasing"), "\(transactions)")

        // The store takes purchases again: nothing left over is sent; the reader's retry is one charge.
        _ = await server.stop()
        server = try await ServerProcess.start(store, log: directory.path("server-again.log"))
        let url = server.url
        #expect(try await KioskCommand.run(["sync", "--server", url], environment: ["KIOSK_HOME": home]).status == 0)
        let retried = try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": home])
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(!retried.stderr.contains("completed unfinished work"), "\(retried.stderr)")
        #expect(retried.stdout.contains("balance: 15 credits"), "\(retried.stdout)")
        _ = await server.stop()
    }
}
