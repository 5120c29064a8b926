import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// The sales rows kept as the store writes (`salesDaySlot`, what the console's overview reads) are
/// the sums of the ledger itself, under purchases made at once from many accounts and refunds.
@Suite("Sales by day kept as the store writes")
struct SalesByDayTests: StoreSuite {
    static let products = [Self.book, Self.pack5, Self.issue, "com.kiosk.books.night-sky-atlas"]

    static func sales(_ http: StoreHTTP, _ server: KioskServer, _ query: String) async throws -> [AdminSalesRow] {
        let reply = try await http.send("GET", "/v1/admin/sales" + query, authorization: "Bearer \(server.adminToken)")
        #expect(reply.status == 200)
        return try reply.decode([AdminSalesRow].self)
    }

    @Test("whole-day rows (salesDaySlot, summed over their slots) equal the ledger's sums after concurrent purchases from many accounts, a refund and a credits refund", arguments: TestEngine.all)
    func rowsAgree(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, first in
            var accounts = [first]
            for _ in 0..<7 { accounts.append(try await http.createAccount()) }
            let bought = try await withThrowingTaskGroup(of: [PaymentResponse].self) { group in
                for (index, account) in accounts.enumerated() {
                    group.addTask {
                        var responses: [PaymentResponse] = []
                        for product in Self.products.shuffled() where !(index % 2 == 1 && product == Self.issue) {
                            let reply = try await http.pay(product, token: account.token, quantity: product == Self.pack5 ? 2 : 1)
                            #expect(reply.status == 200, "\(reply.status)")
                            responses.append(try reply.decode(PaymentResponse.self))
                        }
                        return responses
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let book = try #require(bought.first { $0.transaction.productId == Self.book })
            let pack = try #require(bought.first { $0.transaction.productId == Self.pack5 })
            for refunded in [book, pack] {
                let reply = try await http.send("POST", "/v1/admin/transactions/\(refunded.transaction.transactionId)/refund",
                                                authorization: "Bearer \(server.adminToken)", json: "{}")
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            }

            // On PostgreSQL the accounts add to rows of their own (``SalesSlot``), summed when read.
            #expect(engine == .sqlite || Set(accounts.map { SalesSlot.of($0.accountId) }).count > 1)
            let kept = try await Self.sales(http, server, "")
            // A `since` that is not a UTC midnight is summed from the ledger entries themselves.
            let summed = try await Self.sales(http, server, "?since=2000-01-01T00:00:01Z")
            #expect(kept == summed)
            #expect(kept.reduce(0) { $0 + $1.sales } == bought.count)
            #expect(kept.reduce(0) { $0 + $1.refunds } == 2)
            #expect(kept.first { $0.productId == Self.book }?.sales == accounts.count)
            let oneProduct = try await Self.sales(http, server, "?product=\(Self.pack5)")
            #expect(oneProduct == summed.filter { $0.productId == Self.pack5 } && !oneProduct.isEmpty)
            let today = try await Self.sales(http, server, "?since=\(ISO8601DateFormatter.string(from: Date(), timeZone: .gmt, formatOptions: [.withFullDate]))")
            #expect(today == kept)
        }
    }

    @Test("a refund of what charged nothing (a redemption, an operator's grant) is kept in the ledger and is no refund in the sales figures; one counted by an earlier Kiosk is taken back", arguments: TestEngine.all)
    func freeRefundsAreNoRefundsOfSales(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, reader in
            #expect(try await http.pay(Self.pack5, token: reader.token).status == 200)
            let body = String(decoding: try JSONEncoder().encode(RedemptionRequest(productId: Self.issue, idempotencyKey: "redeem-1")), as: UTF8.self)
            let redeemed = try await http.send("POST", "/v1/redemptions", token: reader.token, json: body).decode(PaymentResponse.self)
            let grant = String(decoding: try JSONEncoder().encode(AdminGrantRequest(productId: Self.pack5, quantity: 2, reason: "goodwill", idempotencyKey: "g-1")), as: UTF8.self)
            let granted = try await http.send("POST", "/v1/admin/accounts/\(reader.accountId)/grant", token: server.adminToken, json: grant).decode(StoreTransaction.self)
            for id in [redeemed.transaction.transactionId, granted.transactionId] {
                let reply = try await http.send("POST", "/v1/admin/transactions/\(id)/refund", authorization: "Bearer \(server.adminToken)", json: "{}")
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            }
            let kept = try await Self.sales(http, server, "")
            let summed = try await Self.sales(http, server, "?since=2000-01-01T00:00:01Z")
            #expect(kept == summed)
            #expect(kept.reduce(0) { $0 + $1.sales } == 1 && kept.reduce(0) { $0 + $1.refunds } == 0, "\(kept)")
            #expect(kept.first { $0.productId == Self.pack5 }?.netCents == 499)

            // What an earlier Kiosk wrote: the two free refunds counted. The migration takes them back.
            try await server.store.database.write { db in
                try await db.raw(#"UPDATE "salesDaySlot" SET "refunds" = "refunds" + 1 WHERE "productId" = \#(bind: Self.pack5)"#).run()
                try await db.raw(#"""
                    INSERT INTO "salesDaySlot" ("day", "productId", "currency", "slot", "sales", "refunds", "netCents")
                    VALUES (\#(bind: Store.day(Date())), \#(bind: Self.issue), 'USD', 3, 0, 1, 0)
                    """#).run()
                try await db.raw(#"DELETE FROM "kioskMigration" WHERE "name" = '21-sales-without-free-refunds'"#).run()
            }
            #expect(try await Self.sales(http, server, "").reduce(0) { $0 + $1.refunds } == 2)
            try await Migrations.run(on: server.store.database, logger: Logger(label: "test"))
            #expect(try await Self.sales(http, server, "") == kept)
        }
    }

    @Test("a database kept one row a day and product (salesDay) before the slots: its rows carry over as slot 0", arguments: TestEngine.all)
    func rowsCarryOverToSlots(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        let logger = Logger(label: "test")
        // The state an earlier Kiosk left: every migration up to 9, one row a day and product.
        let before = try await ServerDatabase.open(location, logger: logger)
        try await before.write { db in
            try await db.raw(#"DROP TABLE "salesDaySlot""#).run()
            try await db.raw(#"DELETE FROM "kioskMigration" WHERE "name" = '10-sales-day-slots'"#).run()
            try await db.raw(#"""
                CREATE TABLE "salesDay" ("day" TEXT NOT NULL, "productId" TEXT NOT NULL, "currency" TEXT NOT NULL,
                    "sales" BIGINT NOT NULL, "refunds" BIGINT NOT NULL, "netCents" BIGINT NOT NULL, PRIMARY KEY ("day", "productId", "currency"))
                """#).run()
            try await db.raw(#"""
                INSERT INTO "salesDay" VALUES ('2026-11-01', 'com.kiosk.books.a', 'USD', 3, 1, 598), ('2026-11-02', 'com.kiosk.books.a', 'EUR', 1, 0, 199)
                """#).run()
        }
        await before.close()
        let after = try await ServerDatabase.open(location, logger: logger)
        let rows = try await after.read { db in
            try await db.raw(#"SELECT "day", "currency", "slot", "sales", "refunds", "netCents" FROM "salesDaySlot" ORDER BY "day""#).all()
                .map { row in
                    "\(try row.decode(column: "day", as: String.self)) \(try row.decode(column: "currency", as: String.self)) "
                        + "\(try row.decode(column: "slot", as: Int.self)) \(try row.decode(column: "sales", as: Int.self)) "
                        + "\(try row.decode(column: "refunds", as: Int.self)) \(try row.decode(column: "netCents", as: Int.self))"
                }
        }
        let oldTableGone = try await after.read { db in
            (try? await db.raw(#"SELECT COUNT(*) AS "n" FROM "salesDay""#).first()) == nil
        }
        await after.close()
        #expect(rows == ["2026-11-01 USD 0 3 1 598", "2026-11-02 EUR 0 1 0 199"])
        #expect(oldTableGone)
    }
}
