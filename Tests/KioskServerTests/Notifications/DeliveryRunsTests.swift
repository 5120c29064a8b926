import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// A delivery pass sends runs of each account's notifications, one after another: two instances
/// passing over one database at once must still deliver each notification once and every
/// account's in the order the store wrote them.
@Suite("Runs of one account's deliveries, by two instances at once")
struct DeliveryRunsTests {
    static let pack = "com.kiosk.credits.pack-5"

    /// Two instances over one fresh database of `engine`, their delivery workers off, with a
    /// webhook registered to a receiver that accepts everything.
    static func twoInstances(_ engine: TestEngine, _ body: @Sendable (_ a: KioskServer, _ b: KioskServer, _ receiver: WebhookReceiver) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let database = try await engine.freshDatabase() ?? .sqlite(path: directory.path("shared.sqlite").path)
        @Sendable func configuration(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent(name))
            configuration.database = database
            configuration.notificationDelivery = nil
            return configuration
        }
        let receiver = WebhookReceiver()
        receiver.failing.store(false, ordering: .relaxed)
        try await receiver.run { hook in
            try await LiveServer.run(configuration("a")) { a, _ in
                try await LiveServer.run(configuration("b")) { b, _ in
                    _ = try await a.store.notifications.addWebhook(hook)
                    try await body(a, b, receiver)
                }
            }
        }
    }

    @Test("300 notifications of one account and 20 of others, delivered by two instances in small passes at once: each once, each account's in order", arguments: TestEngine.all)
    func twoInstancesKeepOrder(engine: TestEngine) async throws {
        try await Self.twoInstances(engine) { a, b, receiver in
            let busy = try await a.store.accounts.createAccount()
            var others: [String] = []
            for _ in 0..<20 { others.append(try await a.store.accounts.createAccount().accountId) }
            let buyers = others
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for _ in 0..<300 {
                        _ = try await a.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                          idempotencyKey: UUID().uuidString), accountId: busy.accountId)
                    }
                }
                group.addTask {
                    for account in buyers {
                        _ = try await b.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                          idempotencyKey: UUID().uuidString), accountId: account)
                    }
                }
                // Passes start while purchases are still being written.
                group.addTask {
                    var pass = NotificationDeliveryConfiguration()
                    pass.batch = 7
                    pass.connections = 3
                    for _ in 0..<40 {
                        async let byA = a.store.notifications.deliverDue(pass)
                        async let byB = b.store.notifications.deliverDue(pass)
                        _ = try await (byA, byB)
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                try await group.waitForAll()
            }
            var pass = NotificationDeliveryConfiguration()
            pass.batch = 16
            for _ in 0..<100 where Set(receiver.accepted.map(\.notificationUUID)).count < 320 {
                async let byA = a.store.notifications.deliverDue(pass)
                async let byB = b.store.notifications.deliverDue(pass)
                _ = try await (byA, byB)
            }
            let accepted = receiver.accepted
            #expect(accepted.count == 320)
            #expect(Set(accepted.map(\.notificationUUID)).count == accepted.count, "each notification once")
            let written = try await a.store.database.read { db in
                try await db.select().column("id").column("accountId").from("notification").orderBy("sequence").all()
            }
            for account in [busy.accountId] + others {
                let order = try written.filter { try $0.decode(column: "accountId", as: String.self) == account }
                    .map { try $0.decode(column: "id", as: String.self) }
                let arrived = accepted.filter { $0.accountId == account }.map(\.notificationUUID)
                #expect(arrived == order, "account \(account): \(arrived.count) arrived of \(order.count), in the order written")
            }
            let rows = try await a.store.notifications.list(failed: false, limit: 1_000)
            #expect(rows.count == 320)
            #expect(rows.allSatisfy { $0.state == "delivered" && $0.attempts == 1 })
        }
    }

    @Test("PostgreSQL: an instance that finds an account's first deliveries locked by another's claim in flight sends none of the account's later ones")
    func skipLockedKeepsOrder() async throws {
        try await Self.twoInstances(.postgres) { a, b, receiver in
            let busy = try await a.store.accounts.createAccount()
            for _ in 0..<10 {
                _ = try await a.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                  idempotencyKey: UUID().uuidString), accountId: busy.accountId)
            }
            // What a claim of the first three looks like to another instance before it commits: rows it must skip.
            let sentMeanwhile = try await a.store.database.write { db -> Int in
                try await db.raw(#"""
                    SELECT "notificationSequence" FROM "delivery" ORDER BY "notificationSequence" LIMIT 3 FOR UPDATE
                    """#).run()
                var pass = NotificationDeliveryConfiguration()
                pass.batch = 10
                return try await b.store.notifications.deliverDue(pass)
            }
            #expect(sentMeanwhile == 0)
            #expect(receiver.accepted.isEmpty, "nothing of the account sent while its first deliveries were another's")
            for _ in 0..<10 where receiver.accepted.count < 10 {
                _ = try await a.store.notifications.deliverDue(NotificationDeliveryConfiguration())
            }
            let written = try await a.store.database.read { db in
                try await db.select().column("id").from("notification").orderBy("sequence").all(decodingColumn: "id", as: String.self)
            }
            #expect(receiver.accepted.map(\.notificationUUID) == written)
        }
    }

    @Test("an account's due deliveries go out though a later one of its is not due yet (written a moment ahead of the pass's clock); a later one never goes before an earlier one that is not due", arguments: TestEngine.all)
    func notYetDueDoesNotHoldBackEarlier(engine: TestEngine) async throws {
        try await Self.twoInstances(engine) { a, _, receiver in
            let account = try await a.store.accounts.createAccount()
            for _ in 0..<4 {
                _ = try await a.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                  idempotencyKey: UUID().uuidString), accountId: account.accountId)
            }
            let written = try await a.store.database.read { db in
                try await db.select().column("sequence").column("id").from("notification").orderBy("sequence").all()
            }
            let sequences = try written.map { try $0.decode(column: "sequence", as: Int64.self) }
            let ids = try written.map { try $0.decode(column: "id", as: String.self) }
            #expect(sequences.count == 4)
            // A purchase decided just after the pass read its clock and committed just before its
            // claim: its delivery is due a moment after the pass's "now". Here the third and fourth.
            @Sendable func dueLater(_ sequence: Int64) async throws {
                try await a.store.database.write { db in
                    try await db.raw(#"UPDATE "delivery" SET "nextAttemptAt" = \#(bind: a.store.clock.wallNow().addingTimeInterval(60)) WHERE "notificationSequence" = \#(bind: sequence)"#).run()
                }
            }
            try await dueLater(sequences[2])
            try await dueLater(sequences[3])
            #expect(try await a.store.notifications.deliverDue(NotificationDeliveryConfiguration()) == 2)
            #expect(receiver.accepted.map(\.notificationUUID) == Array(ids.prefix(2)))

            // The third due again, the fourth not yet: the third goes; then the fourth alone is left.
            // Due at the store's own clock's "now" (rounded to the millisecond as the pass's is): a
            // bare Date() could be up to half a millisecond after the pass's rounded now, and the
            // pass found nothing due (1 run in a few on a quick SQLite).
            try await a.store.database.write { db in
                try await db.raw(#"UPDATE "delivery" SET "nextAttemptAt" = \#(bind: a.store.clock.wallNow()) WHERE "notificationSequence" = \#(bind: sequences[2])"#).run()
            }
            #expect(try await a.store.notifications.deliverDue(NotificationDeliveryConfiguration()) == 1)
            #expect(receiver.accepted.map(\.notificationUUID) == Array(ids.prefix(3)))

            // An earlier one not due holds back every later one of its account, due or not.
            let more = try await a.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                     idempotencyKey: UUID().uuidString), accountId: account.accountId)
            #expect(more.transaction.status == .purchased)
            #expect(try await a.store.notifications.deliverDue(NotificationDeliveryConfiguration()) == 0)
            #expect(receiver.accepted.count == 3)
        }
    }

    @Test("accounts take turns: 20 accounts' one notification each go out among the first passes, not after another account's backlog of 300", arguments: TestEngine.all)
    func accountsTakeTurns(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent("data"))
        configuration.database = try await engine.freshDatabase()
        configuration.notificationDelivery = nil
        let receiver = WebhookReceiver()
        receiver.failing.store(false, ordering: .relaxed)
        let server = configuration
        try await receiver.run { hook in
            try await LiveServer.run(server) { live, _ in
                _ = try await live.store.notifications.addWebhook(hook)
                let busy = try await live.store.accounts.createAccount()
                for _ in 0..<300 {
                    _ = try await live.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                         idempotencyKey: UUID().uuidString), accountId: busy.accountId)
                }
                var others: Set<String> = []
                for _ in 0..<20 {
                    let account = try await live.store.accounts.createAccount()
                    others.insert(account.accountId)
                    _ = try await live.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                                         idempotencyKey: UUID().uuidString), accountId: account.accountId)
                }
                var pass = NotificationDeliveryConfiguration()
                pass.batch = 16
                pass.connections = 4
                #expect(try await live.store.notifications.deliverDue(pass) == 320)
                let arrived = receiver.accepted.map { $0.accountId ?? "" }
                #expect(arrived.count == 320)
                let lastOther = arrived.lastIndex { others.contains($0) } ?? arrived.count
                #expect(lastOther < 40, "the other accounts' last notification arrived \(lastOther + 1)th of \(arrived.count)")
            }
        }
    }

    @Test("one account's backlog longer than a pass's window, stuck behind a retry an hour away, does not hold up another account's delivery", arguments: TestEngine.all)
    func stuckBacklogDoesNotStarveOthers(engine: TestEngine) async throws {
        try await Self.twoInstances(engine) { a, _, receiver in
            let stuck = try await a.store.accounts.createAccount()
            let now = a.store.clock.wallNow()
            let count = Notifications.turnWindow(NotificationDeliveryConfiguration()) + 50
            // The stuck account's notifications, written at once: the first waits for a retry an
            // hour away, every later one is due and queued behind it.
            try await a.store.database.write { db in
                try await db.raw(#"""
                    WITH RECURSIVE "n"("i") AS (SELECT 1 UNION ALL SELECT "i" + 1 FROM "n" WHERE "i" < \#(bind: count))
                    INSERT INTO "notification" ("id", "accountId", "type", "createdAt")
                    SELECT 'stuck-' || CAST("i" AS TEXT), \#(bind: stuck.accountId), 'ONE_TIME_CHARGE', \#(bind: now) FROM "n"
                    """#).run()
                try await db.raw(#"""
                    INSERT INTO "delivery" ("notificationSequence", "webhookId", "accountId", "state", "attempts", "nextAttemptAt")
                    SELECT n."sequence", w."id", n."accountId", 'pending', 0, \#(bind: now) FROM "notification" n, "webhook" w
                    WHERE n."accountId" = \#(bind: stuck.accountId)
                    """#).run()
                try await db.raw(#"""
                    UPDATE "delivery" SET "attempts" = 1, "nextAttemptAt" = \#(bind: now.addingTimeInterval(3_600))
                    WHERE "notificationSequence" = (SELECT MIN("sequence") FROM "notification" WHERE "accountId" = \#(bind: stuck.accountId))
                    """#).run()
            }
            let other = try await a.store.accounts.createAccount()
            _ = try await a.store.payments.pay(PaymentRequest(productId: Self.pack, quantity: 1, paymentMethod: .approve,
                                                              idempotencyKey: UUID().uuidString), accountId: other.accountId)
            #expect(try await a.store.notifications.deliverDue(NotificationDeliveryConfiguration()) == 1)
            #expect(receiver.accepted.map { $0.accountId ?? "" } == [other.accountId], "\(receiver.accepted.count) delivered")
        }
    }
}
