import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// A renewal step is written by two spellings: one statement on PostgreSQL (``RecordRenewalStep``)
/// and its writes one by one on SQLite. The same life, lived on both engines, must leave the same
/// rows in every table a step writes.
@Suite("Renewal steps write the same rows on both engines")
struct RenewalRowsTests: SubscriptionSuite {
    @Test("renew, fail into grace, fail again, recover, fail into grace, grace expires, retry gives up, a period refunded: the same rows on SQLite and PostgreSQL")
    func sameRowsOnBothEngines() async throws {
        let sqlite = try await Self.rowsOfALife(on: .sqlite)
        let postgres = try await Self.rowsOfALife(on: .postgres)
        // The life's outline, so that two engines cannot agree on something wrong.
        #expect(sqlite.filter { $0.hasPrefix("notification ") } == [
            "notification SUBSCRIBED INITIAL_BUY period 0", "notification DID_RENEW - period 1",
            "notification DID_FAIL_TO_RENEW GRACE_PERIOD period 1", "notification DID_RENEW BILLING_RECOVERY period 2",
            "notification DID_FAIL_TO_RENEW GRACE_PERIOD period 2", "notification GRACE_PERIOD_EXPIRED - period 2",
            "notification EXPIRED BILLING_RETRY period 2", "notification REFUND - period 1",
        ])
        #expect(sqlite.last { $0.hasPrefix("  about") }?.contains("renewal ORIGINAL 1 2 false") == true, "\(sqlite)")
        #expect(sqlite.filter { $0.hasPrefix("ledger ") }.count == 4)
        #expect(sqlite.filter { $0.hasPrefix("grace ") }.count == 2)
        #expect(sqlite.contains("deliveries 16 pending 16"))
        for (line, (one, other)) in zip(sqlite, postgres).enumerated() where one != other {
            Issue.record("row \(line) differs:\n  sqlite   \(one)\n  postgres \(other)")
        }
        #expect(sqlite.count == postgres.count)
    }

    /// Lives the scripted life on a fresh store of `engine` (no workers: each step happens when
    /// the script runs a pass) and returns every row the steps wrote, in words, with dates as
    /// seconds from the first purchase and ids as the period they name.
    static func rowsOfALife(on engine: TestEngine) async throws -> [String] {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editHarborMonthly(graceDays: 6, issues: [])
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = try await engine.freshDatabase()
        configuration.renewalInterval = nil
        configuration.notificationDelivery = nil
        let location = configuration.databaseLocation
        let token = UUID().uuidString.lowercased()
        let accountId = try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            let fixture = Fixture(server: server, http: http, account: try await http.createAccount())
            for hook in ["http://127.0.0.1:9/one", "http://127.0.0.1:9/two"] {
                let reply = try await http.send("POST", "/v1/admin/webhooks", token: fixture.admin, json: #"{"url": "\#(hook)"}"#)
                #expect(reply.status == 200 || reply.status == 201, "\(String(decoding: reply.body, as: UTF8.self))")
            }
            let bought = try await http.send("POST", "/v1/payments", token: fixture.account.token, json: """
                {"productId": "\(Self.monthly)", "quantity": 1, "paymentMethod": "approve", "idempotencyKey": "\(UUID().uuidString)", "appAccountToken": "\(token)"}
                """)
            #expect(bought.status == 200)
            let receipt = try #require(try bought.decode(PaymentResponse.self).transaction.signedTransaction)
            let first = try #require(try Self.claims(receipt).expires)
            #expect(try await fixture.advance(to: first) == 1)                                   // renewed
            let second = first.addingTimeInterval(31 * day)
            try await fixture.sandbox(renewals: .fail)
            #expect(try await fixture.advance(to: second) == 1)                                  // into grace
            #expect(try await fixture.advance(to: second.addingTimeInterval(day)) == 1)          // a retry fails, quietly
            try await fixture.sandbox(renewals: .succeed)
            #expect(try await fixture.advance(to: second.addingTimeInterval(3 * day)) == 1)      // recovers, grace closes
            try await fixture.sandbox(renewals: .fail)
            let third = try #require(try await fixture.periods().last?.expires)
            #expect(try await fixture.advance(to: third.addingTimeInterval(20 * day)) == 6)      // grace, its end, retries, expiry
            // A refund of a period after it all: its notification carries the renewal info as it stands.
            let renewed = try #require(try await fixture.periods().dropFirst().first)
            let refund = try await http.send("POST", "/v1/admin/transactions/\(renewed.transactionId)/refund", token: fixture.admin, json: "{}")
            #expect(refund.status == 200)
            return fixture.account.accountId
        }
        let database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        return try await database.read { db in try await Self.describe(accountId, token: token, in: db) }
    }

    static func describe(_ accountId: String, token: String, in db: any SQLDatabase) async throws -> [String] {
        let transactions = try await TransactionRows(db).list { $0.where("accountId", .equal, accountId) }
        let origin = try #require(transactions.first?.purchaseDate)
        func at(_ date: Date?) -> String { date.map { String(format: "%.3f", $0.timeIntervalSince(origin)) } ?? "-" }
        func period(_ id: String?) -> String { id.flatMap { id in transactions.firstIndex { $0.id == id } }.map { "period \($0)" } ?? "-" }
        let original = transactions[0].originalTransactionId
        var lines: [String] = []
        let account = try #require(try await AccountRows(db).find(accountId))
        let lastChange = try await db.select().column("lastChange").from("account").where("id", .equal, accountId)
            .first(decodingColumn: "lastChange", as: Int64.self)
        lines.append("account revision \(account.revision) lastChange \(lastChange ?? -1) credits \(account.credits)")
        for t in transactions {
            let key = t.idempotencyKey.replacingOccurrences(of: original, with: "ORIGINAL")
            lines.append("transaction \(period(t.id)) \(t.kind.rawValue) \(t.productId) ×\(t.quantity) \(t.status.rawValue) \(t.paymentMethod)/\(t.requestedMethod ?? "-")"
                + " \(t.amountCents) \(t.currency) credits \(t.creditsGranted)/\(t.creditsSpent) from \(at(t.purchaseDate)) to \(at(t.expiresDate))"
                + " original \(t.originalTransactionId == original) change \(t.changeSequence ?? -1) token \(t.appAccountToken == token)"
                + " signed \(t.signedTransaction != nil) message \(t.message ?? "-") finished \(at(t.finishedAt)) revoked \(t.revokedAt != nil) \(t.revocationReason ?? "-")"
                + (t.id == transactions[0].id ? "" : " key \(key.hasPrefix("renewal:ORIGINAL:"))"))
        }
        for entry in try await TransactionRows(db).ledger({ $0.where("accountId", .equal, accountId) }) {
            lines.append("ledger \(period(entry.transactionId)) \(entry.kind.rawValue) \(entry.amountCents) \(entry.currency) \(entry.reason ?? "-")")
        }
        let sales = try await db.raw(#"SELECT CAST(SUM("sales") AS BIGINT) AS "sales", CAST(SUM("refunds") AS BIGINT) AS "refunds", CAST(SUM("netCents") AS BIGINT) AS "net" FROM "salesDaySlot""#).first()
        lines.append("sales \(try sales?.decode(column: "sales", as: Int.self) ?? -1) refunds \(try sales?.decode(column: "refunds", as: Int.self) ?? -1)"
            + " net \(try sales?.decode(column: "net", as: Int.self) ?? -1)")
        let subscription = try #require(try await db.select().column("*").from("subscription").where("accountId", .equal, accountId)
            .first(decoding: SubscriptionRecord.self))
        lines.append("subscription \(subscription.state.rawValue) autoRenew \(subscription.autoRenew) expires \(at(subscription.expiresDate))"
            + " due \(at(subscription.dueAt)) retry \(at(subscription.retryAt)) graceEnds \(at(subscription.graceEndsAt))"
            + " failed \(subscription.failedAttempts) reason \(subscription.expirationReason?.rawValue ?? "-") version \(subscription.version)"
            + " claimed \(subscription.claimedBy ?? "-") \(at(subscription.claimedUntil)) token \(subscription.appAccountToken == token)")
        let graces = try await db.raw(#"SELECT "originalTransactionId", "accountId", "startsAt", "endsAt" FROM "subscriptionGrace" ORDER BY "id""#).all()
        for grace in graces {
            lines.append("grace \(try grace.decode(column: "originalTransactionId", as: String.self) == original)"
                + " \(try grace.decode(column: "accountId", as: String.self) == accountId)"
                + " \(at(try grace.decode(column: "startsAt", as: Date.self))) to \(at(try grace.decode(column: "endsAt", as: Date.self)))")
        }
        let notifications = try await db.raw(#"""
            SELECT "type", "subtype", "transactionId", "originalTransactionId", "renewalInfo", "accountId" FROM "notification" ORDER BY "sequence"
            """#).all()
        for notification in notifications {
            let type = try notification.decode(column: "type", as: String.self)
            let subtype = try notification.decode(column: "subtype", as: String?.self) ?? "-"
            lines.append("notification \(type) \(subtype) \(period(try notification.decode(column: "transactionId", as: String?.self)))")
            var info = try notification.decode(column: "renewalInfo", as: String?.self)
                .map { try JSONDecoder().decode(RenewalInfo.self, from: Data($0.utf8)) }
            let about = info?.originalTransactionId == original ? "ORIGINAL" : "other"
            info?.originalTransactionId = about
            lines.append("  about \(try notification.decode(column: "originalTransactionId", as: String?.self) == original)"
                + " account \(try notification.decode(column: "accountId", as: String.self) == accountId)"
                + " renewal \(info.map { "\($0.originalTransactionId) \($0.autoRenewStatus) \($0.expirationIntent ?? -1) \($0.isInBillingRetryPeriod)" } ?? "-")"
                + " graceEnds \(info?.gracePeriodExpiresDate.map { at(Date(timeIntervalSince1970: Double($0) / 1000)) } ?? "-")"
                + " renews \(info?.renewalDate.map { at(Date(timeIntervalSince1970: Double($0) / 1000)) } ?? "-")"
                + " token \(info.map { $0.appAccountToken == token } ?? false)")
        }
        let deliveries = try await db.raw(#"""
            SELECT COUNT(*) AS "all", CAST(SUM(CASE WHEN "state" = 'pending' AND "attempts" = 0 AND "accountId" = \#(bind: accountId) THEN 1 ELSE 0 END) AS BIGINT) AS "pending"
            FROM "delivery"
            """#).first()
        lines.append("deliveries \(try deliveries?.decode(column: "all", as: Int.self) ?? -1) pending \(try deliveries?.decode(column: "pending", as: Int.self) ?? -1)")
        return lines
    }
}
