import Foundation
import KioskServer
import KioskTestSupport
import Testing

/// Traces (issue 66): `kiosk serve --otlp-endpoint` exports, through swift-otel, a span per
/// request, its database work, and the delivery of the notification it announced — across the
/// outbox, in the same trace — to an OTLP/HTTP receiver whose spans the OpenTelemetry project's
/// own `opentelemetry-proto` decodes (scripts/otlp_sink.py).
@Suite("Traces over OTLP, from a request through the database and the outbox")
struct TracingTests {
    /// scripts/otlp_sink.py: the OTLP receiver and the notification endpoint, one JSON line per
    /// span or POST it received; started and stopped by PID.
    final class OTLPSink: @unchecked Sendable {
        let file: URL
        let server: ScriptServer
        var port: Int { server.port }

        init(file: URL) throws {
            self.file = file
            server = try ScriptServer("otlp_sink.py", [file.path], library: "opentelemetry-proto")
        }

        func stop() { server.stop() }

        /// What it received so far, a dictionary per line.
        func received() -> [[String: Any]] {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        /// Waits (a bounded number of looks, not a time that decides) for a line `matching`.
        func waitFor(_ what: String, _ matching: ([String: Any]) -> Bool) async throws -> [String: Any] {
            for _ in 0..<400 {
                if let line = received().first(where: matching) { return line }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw TestServiceError("the OTLP sink never received \(what); it holds \(received().count) lines")
        }
    }

    @Test("a purchase is one trace: the request's server span, its database spans under it, and the notification's delivery span, whose POST carries the trace to the endpoint; nothing secret in any attribute", arguments: TestEngine.all)
    func purchaseTrace(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let sink = try OTLPSink(file: directory.path("received.jsonl"))
        defer { sink.stop() }
        var extra = ["--otlp-endpoint", "http://127.0.0.1:\(sink.port)", "--notification-interval", "0.2"]
        if case .postgres(let url)? = try await engine.freshDatabase() { extra += ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let admin = ["--server", server.url, "--data", store.data.path]
        #expect(try await KioskCommand.run(["admin", "webhooks", "add", "http://127.0.0.1:\(sink.port)/hook"] + admin).status == 0)
        let device = ReaderDevice(home: directory.path("device"))
        try await device.buy("com.kiosk.books.small-engines", server: server.url)
        // A client's traceparent: a malformed one (with a secret beside it) is dropped without a
        // word of the request's headers in the log; a well-formed one is continued.
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let http = StoreHTTP(baseURL: server.url)
        for bad in ["x", "00-" + String(repeating: "0", count: 32) + "-" + String(repeating: "0", count: 16) + "-01", String(repeating: "f", count: 4_000)] {
            let answer = try await http.send("GET", "/v1/admin/accounts", token: adminToken, headers: [("traceparent", bad), ("tracestate", String(repeating: "k=v,", count: 100))])
            #expect(answer.status == 200)
        }
        let clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
        #expect(try await http.send("GET", "/healthz", headers: [("traceparent", "00-\(clientTrace)-00f067aa0ba902b7-01")]).status == 200)
        let hook = try await sink.waitFor("the notification's POST") { $0["post"] as? String == "/hook" }
        // Stopped, the server flushes the spans it has not exported yet.
        #expect(await server.stop() == 0, "\(server.log)")

        // traceparent: 00-TRACE-SPAN-FLAGS (W3C Trace Context).
        let traceParent = try #require(hook["traceparent"] as? String, "the notification's POST carries a traceparent")
        let fields = traceParent.split(separator: "-").map(String.init)
        try #require(fields.count == 4 && fields[0] == "00" && fields[1].count == 32 && fields[2].count == 16, "\(traceParent)")
        let (trace, postedBy) = (fields[1], fields[2])
        let spans = sink.received().filter { $0["span"] != nil }
        let inTrace = spans.filter { $0["trace"] as? String == trace }
        func named(_ predicate: (String) -> Bool) -> [[String: Any]] { inTrace.filter { predicate($0["span"] as? String ?? "") } }
        let delivery = try #require(named { $0 == "notification delivery" }.first, "the delivery is a span of the purchase's trace: \(inTrace.map { $0["span"] ?? "" })")
        #expect(delivery["id"] as? String == postedBy, "the endpoint continues the delivery's own span")
        #expect(delivery["kind"] as? Int == 4, "a producer span (OTLP's SPAN_KIND_PRODUCER)")
        // The request that bought: a server span (kind 2) at the trace's root, the delivery's parent.
        let request = try #require(inTrace.first { $0["kind"] as? Int == 2 && ($0["parent"] as? String ?? "x").isEmpty }, "\(inTrace)")
        #expect(delivery["parent"] as? String == request["id"] as? String, "the delivery continues the request that announced it")
        let database = named { $0.hasPrefix("database ") }
        #expect(!database.isEmpty && database.allSatisfy { $0["parent"] as? String == request["id"] as? String },
                "the request's database work is its children: \(database.map { $0["span"] ?? "" })")
        let system = engine == .postgres ? "postgresql" : "sqlite"
        #expect(database.allSatisfy { ($0["attributes"] as? [String: Any])?["db.system.name"] as? String == system })
        #expect(spans.allSatisfy { $0["service"] as? String == "kiosk" })
        #expect(spans.allSatisfy { !($0["span"] as? String ?? "").hasPrefix("database ") || !($0["parent"] as? String ?? "").isEmpty },
                "database work is traced only within a trace: the workers' polls make no traces of their own")
        #expect(spans.contains { $0["trace"] as? String == clientTrace && $0["parent"] as? String == "00f067aa0ba902b7" }, "a well-formed traceparent is continued")
        #expect(!server.log.contains(adminToken), "no header of a request reaches the log: \(server.log.suffix(2_000))")
        // Only the method, the route and the status: never a path's values, a query or an error's words.
        let keys = Set(spans.flatMap { (($0["attributes"] as? [String: Any]) ?? [:]).keys })
        #expect(keys.isSubset(of: ["http.request.method", "http.route", "http.response.status_code", "error.type", "db.system.name",
                                   "kiosk.notification.id", "kiosk.notification.type", "kiosk.delivery.attempt"]), "\(keys.sorted())")
        // No receipt, token or authorization is ever a span's attribute.
        let receipt = try #require(try device.receipts().first?.receipt)
        let everything = try String(decoding: JSONSerialization.data(withJSONObject: spans), as: UTF8.self)
        #expect(!everything.contains(receipt.prefix(40)) && !everything.lowercased().contains("authorization"), "a secret in a span")
    }

    @Test("an --otlp-endpoint that is no collector's http(s) address is refused, naming the flag and what it takes")
    func badEndpoint() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        for endpoint in ["127.0.0.1:4318", "ftp://127.0.0.1:4318", "http://", "http:///path", "http://[::1", "http://127.0.0.1:99999", "http://u:p@127.0.0.1:4318"] {
            let run = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", store.data.path,
                                                  "--port", "0", "--otlp-endpoint", endpoint])
            #expect(run.status != 0 && run.stderr.contains("--otlp-endpoint must be the collector's http:// or https:// address"), "\(endpoint): \(run.stderr)")
        }
    }

    @Test("the collector's base address or its traces address are both sent to /v1/traces once")
    func tracesAddress() throws {
        #expect(try TraceExport.tracesURL("http://127.0.0.1:4318").get() == "http://127.0.0.1:4318/v1/traces")
        #expect(try TraceExport.tracesURL("http://127.0.0.1:4318/").get() == "http://127.0.0.1:4318/v1/traces")
        #expect(try TraceExport.tracesURL("http://127.0.0.1:4318/v1/traces").get() == "http://127.0.0.1:4318/v1/traces")
        #expect(try TraceExport.tracesURL("https://otel.example.com/collector").get() == "https://otel.example.com/collector/v1/traces")
    }
}
