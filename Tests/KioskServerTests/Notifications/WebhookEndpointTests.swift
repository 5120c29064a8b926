import Foundation
import Glibc
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// Endpoints that misbehave harm only their own deliveries.
@Suite("Publisher endpoints that answer slowly, never, or with a page of their own")
struct WebhookEndpointTests {
    static let pack = "com.kiosk.credits.pack-5"

    /// A port that accepts connections (the kernel's backlog) and never answers.
    final class SilentPort: Sendable {
        let descriptor: Int32
        let port: Int

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
            }
            guard bound, listen(descriptor, 128) == 0 else {
                close(descriptor)
                throw POSIXError(.EADDRINUSE)
            }
            self.descriptor = descriptor
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }
    }

    @Test("an endpoint that never answers does not hold up another's deliveries; a 200 with a 1 MiB page is delivered")
    func silentEndpointHoldsUpNoOther() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent("data"))
        configuration.notificationDelivery = nil
        var delivery = NotificationDeliveryConfiguration()
        delivery.requestTimeout = 4
        let silent = try SilentPort()
        let healthy = WebhookReceiver()
        healthy.failing.store(false, ordering: .relaxed)
        let chatty = WebhookReceiver(answerBytes: 1 << 20)
        chatty.failing.store(false, ordering: .relaxed)
        let accounts = 20
        let (server, pass) = (configuration, delivery)
        try await healthy.run { healthyURL in
            try await chatty.run { chattyURL in
                try await LiveServer.run(server) { server, _ in
                    let silentURL = "http://127.0.0.1:\(silent.port)/hook"
                    for url in [silentURL, healthyURL, chattyURL] {
                        _ = try await server.store.notifications.addWebhook(url)
                    }
                    for _ in 0..<accounts {
                        let account = try await server.store.accounts.createAccount()
                        _ = try await server.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                      idempotencyKey: UUID().uuidString), accountId: account.accountId)
                    }
                    let started = ContinuousClock.now
                    let passing = Task { try await server.store.notifications.deliverDue(pass) }
                    // Well before the silent endpoint's first timeout, the others have every notification.
                    let arrived = try await NotificationDeliveryTests.eventually(3) {
                        Set(healthy.accepted.map(\.notificationUUID)).count >= accounts && Set(chatty.accepted.map(\.notificationUUID)).count >= accounts
                    }
                    #expect(arrived, "healthy \(healthy.accepted.count), chatty \(chatty.accepted.count) of \(accounts) after \(ContinuousClock.now - started)")
                    #expect(ContinuousClock.now - started < .seconds(4))
                    _ = try await passing.value
                    let rows = try await server.store.notifications.list(failed: false)
                    for url in [healthyURL, chattyURL] {
                        #expect(rows.filter { $0.url == url }.allSatisfy { $0.state == "delivered" && $0.attempts == 1 }, "\(url)")
                    }
                    let waiting = rows.filter { $0.url == silentURL }
                    #expect(waiting.count == accounts)
                    #expect(waiting.allSatisfy { $0.state == "pending" && $0.attempts == 1 && $0.lastError != nil })
                }
            }
        }
    }
}
