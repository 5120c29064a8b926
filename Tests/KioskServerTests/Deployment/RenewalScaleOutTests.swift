import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// Two instances over one PostgreSQL database share the renewal and delivery work: each due
/// period is renewed once and each notification delivered once, whichever instance takes it.
@Suite("Renewals and deliveries on two instances over one PostgreSQL")
struct RenewalScaleOutTests {
    static let monthly = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    @Test("1,000 subscriptions due, both instances renewing and delivering at once: 1,000 renewals, one each, and every notification delivered once")
    func twoInstancesRenewOnce() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let database = try await TestPostgres.shared.freshDatabase()
        @Sendable func configuration(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent(name))
            configuration.database = database
            return configuration
        }
        let receiver = WebhookReceiver()
        receiver.failing.store(false, ordering: .relaxed)
        let count = 1_000
        try await receiver.run { hook in
            try await LiveServer.run(configuration("a")) { a, _ in
                try await LiveServer.run(configuration("b")) { b, _ in
                    _ = try await a.store.notifications.addWebhook(hook)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for slice in 0..<8 {
                            group.addTask {
                                for _ in stride(from: slice, to: count, by: 8) {
                                    let account = try await a.store.accounts.createAccount()
                                    _ = try await a.store.payments.pay(PaymentRequest(productId: Self.monthly, quantity: 1, paymentMethod: .approve,
                                                                             idempotencyKey: UUID().uuidString), accountId: account.accountId)
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    // Every period ended an hour ago.
                    let ended = StoreClock.wallClock.wallNow().addingTimeInterval(-3600)
                    try await a.store.database.write { db in
                        try await db.update("subscription").set("expiresDate", to: ended).set("dueAt", to: ended).run()
                    }
                    async let byA = a.store.subscriptions.renewDue(limit: 50)
                    async let byB = b.store.subscriptions.renewDue(limit: 50)
                    let (stepsA, stepsB) = try await (byA, byB)
                    #expect(stepsA + stepsB == count)
                    #expect(stepsA > 0 && stepsB > 0, "both instances took a share: \(stepsA) and \(stepsB)")
                    let renewals = try await a.store.database.read { db in
                        try await db.select().column("originalTransactionId").from("storeTransaction").where("paymentMethod", .equal, "renewal")
                            .all(decodingColumn: "originalTransactionId", as: String.self)
                    }
                    #expect(renewals.count == count)
                    #expect(Set(renewals).count == count)

                    var delivered = 0
                    for _ in 0..<20 where delivered < 2 * count {
                        async let byA = a.store.notifications.deliverDue(NotificationDeliveryConfiguration())
                        async let byB = b.store.notifications.deliverDue(NotificationDeliveryConfiguration())
                        let (dA, dB) = try await (byA, byB)
                        delivered += dA + dB
                    }
                    let accepted = receiver.accepted
                    #expect(delivered == 2 * count)
                    #expect(accepted.count == 2 * count)
                    #expect(Set(accepted.map(\.notificationUUID)).count == accepted.count)
                    #expect(accepted.filter { $0.type == "DID_RENEW" }.count == count)
                }
            }
        }
    }
}
