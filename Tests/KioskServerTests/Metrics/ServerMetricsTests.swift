import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

@Suite("Server metrics")
struct ServerMetricsTests: StoreSuite {
    @Test("/metrics counts requests by route and status, payments by outcome and bytes served", arguments: TestEngine.all)
    func metrics(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let payment = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            _ = try await http.pay(Self.book, token: account.token, method: .decline)
            let receipt = payment.transaction.signedTransaction ?? ""
            let content = try await HTTPClient().send(KioskTransfer.HTTPRequest(
                url: http.baseURL + "/v1/content/\(Self.book)", headers: [("Authorization", "Receipt \(receipt)")]))
            #expect(content.status == 200)

            let text = String(decoding: try await http.send("GET", "/metrics").body, as: UTF8.self)
            #expect(text.contains(#"kiosk_payments_total{outcome="purchased"} 1"#))
            #expect(text.contains(#"kiosk_payments_total{outcome="declined"} 1"#))
            #expect(text.contains("kiosk_content_bytes_served_total \(content.body.count)"))
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/payments",method="POST",status="402"} 1"#))
            #expect(text.contains(#"kiosk_downloads_in_flight 0"#))
        }
    }

    @Test("a HEAD answered through the router has its log line and latency sample, as its GET has (Hummingbird's generated HEAD route drops the body the line was written in)")
    func headIsLogged() async throws {
        try await Self.withStore(engine: .sqlite) { server, http, account in
            let payment = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            let receipt = payment.transaction.signedTransaction ?? ""
            #expect(try await http.send("HEAD", "/healthz").status == 200)
            #expect(try await http.send("HEAD", "/v1/catalog").status == 200)
            #expect(try await http.send("HEAD", "/v1/content/\(Self.book)", authorization: "Receipt \(receipt)").status == 200)
            let text = String(decoding: try await http.send("GET", "/metrics").body, as: UTF8.self)
            for route in ["/healthz", "/v1/catalog", "/v1/content/{productId}"] {
                #expect(text.contains(#"kiosk_http_request_duration_seconds_count{route="\#(route)",method="HEAD"} 1"#), "\(route): \(text)")
            }
        }
    }
}
