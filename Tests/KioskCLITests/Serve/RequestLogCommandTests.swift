import Foundation
import KioskTestSupport
import Testing

@Suite("kiosk serve's request log and latency histograms")
struct RequestLogCommandTests {
    /// A request log line as `kiosk serve` writes it: timestamp, level, label, then the fields in
    /// name order and the request.
    static func lineShape(method: String, route: String, status: Int) throws -> Regex<AnyRegexOutput> {
        let route = NSRegularExpression.escapedPattern(for: route)
        return try Regex(
            #"^\S+ info kiosk\.server : account=[0-9a-f-]+ agent="kiosk/1" bytes=(\d+) client=127\.0\.0\.1 duration_ms=(\d+)\.\d route="#
                + route + #" status=\#(status) \#(method) "# + route + #" \#(status)$"#)
    }

    @Test("a slow download's line comes when its last byte is sent, with its whole duration, the client's address and agent; /metrics has its latency histogram")
    func slowDownloadIsLoggedAtItsEnd() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // Larger than what the loopback's socket buffers hold (a few MiB), so that the server's
        // last byte waits for the slow reader: 32 MiB at 8 MB/s is about 4 s.
        try store.addLargeBook("com.kiosk.books.plates", megabytes: 32)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let environment = ["KIOSK_HOME": directory.path("home").path, "KIOSK_MAX_RECEIVE_SPEED": "8000000"]
        let buy = try await KioskCommand.run(["buy", "com.kiosk.books.plates", "--server", server.url], environment: environment)
        #expect(buy.status == 0, "\(buy.stderr)")
        let shape = try Self.lineShape(method: "GET", route: "/v1/content/{productId}", status: 200)
        // Request lines are buffered like nginx's `access_log … flush=1s`: written within a second.
        var line: Substring?
        for _ in 0..<30 {
            line = server.log.split(separator: "\n").first { $0.contains("GET /v1/content/{productId} 200") }
            if line != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let logged = try #require(line, "no content line in \(server.log)")
        let match = try #require(try shape.wholeMatch(in: logged), "unexpected line: \(logged)")
        let bytes = Int(match.output[1].substring ?? "") ?? 0
        let milliseconds = Int(match.output[2].substring ?? "") ?? 0
        #expect(bytes > 32 << 20, "\(logged)")
        #expect(milliseconds >= 2000, "the download's line says \(milliseconds) ms: \(logged)")

        let metrics = try await StoreHTTP(baseURL: server.url).send("GET", "/metrics")
        let lines = String(decoding: metrics.body, as: UTF8.self).split(separator: "\n").map(String.init)
        // The download took 2 to 10 s: not in the 1 s bucket, in the 10 s one, counted once.
        #expect(lines.contains(#"kiosk_http_request_duration_seconds_bucket{route="/v1/content/{productId}",method="GET",le="1.0"} 0"#), "\(lines)")
        #expect(lines.contains(#"kiosk_http_request_duration_seconds_bucket{route="/v1/content/{productId}",method="GET",le="10.0"} 1"#), "\(lines)")
        #expect(lines.contains(#"kiosk_http_request_duration_seconds_count{route="/v1/content/{productId}",method="GET"} 1"#), "\(lines)")
        #expect(lines.contains { $0.hasPrefix(#"kiosk_http_request_duration_seconds_count{route="/v1/payments",method="POST"} "#) })
        _ = await server.stop()
    }

    @Test("one log line per request with status, duration, bytes, route and account, never the token; /metrics only on the admin address")
    func logAndMetrics() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: ["--metrics-port", "0"], log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        #expect(try await http.pay("com.kiosk.credits.pack-5", token: account.token).status == 200)
        #expect(try await http.send("GET", "/metrics").status == 404)
        // Request lines are buffered like nginx's `access_log … flush=1s`: written within a second.
        for _ in 0..<30 where !server.log.contains("POST /v1/payments 200") {
            try await Task.sleep(for: .milliseconds(100))
        }
        let log = server.log
        let line = try #require(log.split(separator: "\n").first { $0.contains("POST /v1/payments 200") })
        #expect(line.contains("account=\(account.accountId)") && line.contains("status=200") && line.contains("route=/v1/payments"))
        #expect(line.contains("duration_ms=") && line.contains("bytes="))
        #expect(!log.contains(account.token))
        let announced = try #require(log.split(separator: "\n").first { $0.contains("metrics on http://") })
        let metricsURL = String(announced.split(separator: " ").last ?? "")
        let metrics = try await StoreHTTP(baseURL: String(metricsURL.dropLast("/metrics".count))).send("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("kiosk_payments_total"))
        _ = await server.stop()
    }
}
