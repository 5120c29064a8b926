import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// The store's hand-spelled inserts write every field, on either engine.
@Suite("Store tables")
struct TransactionRowsTests {
    /// Half seconds: exact in binary, so a date compares equal after any engine's round trip.
    static let now = Date(timeIntervalSince1970: 1_790_000_000.5)

    /// A transaction with every field set, each to a value of its own.
    static func everyField(id: String, account: String, status: TransactionStatus) -> TransactionRecord {
        TransactionRecord(
            sequence: nil, id: id, accountId: account, productId: "com.kiosk.books.tables", kind: .subscription,
            quantity: 3, originalTransactionId: "txn_original", purchaseDate: now.addingTimeInterval(1), expiresDate: now.addingTimeInterval(2),
            status: status, paymentMethod: "approve", idempotencyKey: "key-\(id)", amountCents: 1234, currency: "EUR",
            creditsGranted: 5, creditsSpent: 6, signedTransaction: "signed.jws.value", message: "a message", finishedAt: now.addingTimeInterval(3),
            createdAt: now.addingTimeInterval(4), revokedAt: now.addingTimeInterval(5), revocationReason: "refunded",
            requestedMethod: "defer", changeSequence: 7)
    }

    /// A fresh store database on `engine`: a new PostgreSQL database, or an SQLite file in `directory`.
    static func openStore(_ engine: TestEngine, in directory: TemporaryDirectory) async throws -> ServerDatabase {
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        return try await ServerDatabase.open(location, logger: Logger(label: "test"))
    }

    @Test("a transaction and a ledger entry with every field set read back field for field", arguments: TestEngine.all)
    func everyFieldWritten(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let database = try await Self.openStore(engine, in: directory)
        let account = AccountRecord(id: "acct_tables", tokenHash: "hash", credits: 0, createdAt: StoreClock.wallClock.wallNow(), revision: 0)
        let now = Self.now
        let record = Self.everyField(id: "txn_tables", account: account.id, status: .revoked)
        let entry = LedgerEntry(id: nil, transactionId: record.id, kind: .refund, accountId: account.id, amountCents: -1234,
                                currency: "EUR", reason: "asked for", createdAt: now.addingTimeInterval(6))
        let inserted = try await database.write { db in
            try await db.insert(into: "account").model(account).run()
            let inserted = try await TransactionRows(db).insert(record)
            try await TransactionRows(db).insertLedger(entry)
            return inserted
        }
        let (read, ledger) = try await database.read { db in
            (try await TransactionRows(db).find(record.id), try await TransactionRows(db).ledger { $0.where("transactionId", .equal, record.id) })
        }
        var expected = record
        expected.sequence = inserted.sequence
        #expect(inserted.sequence != nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let readText = String(decoding: try encoder.encode(read), as: UTF8.self)
        let expectedText = String(decoding: try encoder.encode(expected), as: UTF8.self)
        #expect(readText == expectedText)
        var expectedEntry = entry
        expectedEntry.id = ledger.first?.id
        #expect(ledger.count == 1)
        let ledgerText = String(decoding: try encoder.encode(ledger.first), as: UTF8.self)
        let expectedEntryText = String(decoding: try encoder.encode(expectedEntry), as: UTF8.self)
        #expect(ledgerText == expectedEntryText)
        await database.close()
    }

    @Test("PostgreSQL's one-statement purchase writes every field, its charge only when given, nothing for an account that moved on")
    func oneStatementPurchase() async throws {
        let location = try #require(try await TestEngine.postgres.freshDatabase())
        let database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        let account = AccountRecord(id: "acct_one", tokenHash: "hash", credits: 7, createdAt: StoreClock.wallClock.wallNow(), revision: 3)
        try await database.write { try await $0.insert(into: "account").model(account).run() }
        let now = Self.now
        let record = Self.everyField(id: "txn_one", account: account.id, status: .purchased)
        let charge = LedgerEntry(id: nil, transactionId: record.id, kind: .charge, accountId: account.id, amountCents: 1234,
                                 currency: "EUR", reason: "a charge", createdAt: now.addingTimeInterval(6))

        // At a revision the account has left: nothing is written.
        let refused = try await database.statement { try await TransactionRows($0).insert(record, ifAccountAt: 2, addingCredits: 92, charge: charge) }
        #expect(refused == nil)
        #expect(try await database.read { try await TransactionRows($0).find(record.id) } == nil)

        let (inserted, credits) = try #require(try await database.statement { try await TransactionRows($0).insert(record, ifAccountAt: 3, addingCredits: -1, charge: charge) })
        #expect(credits == 6)
        var unset = record
        unset.id = "txn_bare"
        unset.idempotencyKey = "key-bare"
        unset.signedTransaction = nil
        unset.message = nil
        unset.purchaseDate = nil
        unset.expiresDate = nil
        unset.finishedAt = nil
        unset.revokedAt = nil
        unset.revocationReason = nil
        let bare = unset
        // At no revision (a consumable's charge): whatever revision the account is at.
        let (insertedBare, creditsAfter) = try #require(try await database.statement { try await TransactionRows($0).insert(bare, ifAccountAt: nil, addingCredits: 2, charge: nil) })
        #expect(creditsAfter == 8)

        let (read, readBare, ledger, stored) = try await database.read { db in
            (try await TransactionRows(db).find(record.id), try await TransactionRows(db).find(bare.id),
             try await TransactionRows(db).ledger { $0.where("accountId", .equal, account.id) }, try await AccountRows(db).find(account.id))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        func text(_ value: some Encodable) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        // The change number is the account's next, taken by the same statement.
        #expect(inserted.changeSequence == 1 && insertedBare.changeSequence == 2)
        var expected = record
        expected.sequence = inserted.sequence
        expected.changeSequence = inserted.changeSequence
        #expect(try text(read) == text(expected))
        var expectedBare = bare
        expectedBare.sequence = insertedBare.sequence
        expectedBare.changeSequence = insertedBare.changeSequence
        #expect(try text(readBare) == text(expectedBare))
        var expectedCharge = charge
        expectedCharge.id = ledger.first?.id
        #expect(ledger.count == 1)
        #expect(try text(ledger.first) == text(expectedCharge))
        #expect(stored?.revision == 5)
        #expect(stored?.credits == 8)
        await database.close()
    }

    @Test("PostgreSQL's batch of purchases (StatementBatch) writes field for field what each would alone, dates to the microsecond; one at a revision the batch moved past writes nothing; a replayed key undoes the whole batch")
    func batchOfPurchases() async throws {
        let location = try #require(try await TestEngine.postgres.freshDatabase())
        let database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        let account = AccountRecord(id: "acct_batch", tokenHash: "hash", credits: 7, createdAt: StoreClock.wallClock.wallNow(), revision: 3)
        try await database.write { try await $0.insert(into: "account").model(account).run() }
        // Dates with more than microseconds: each engine path keeps the same microsecond.
        func record(_ id: String, bare: Bool = false) -> TransactionRecord {
            var record = Self.everyField(id: id, account: account.id, status: .purchased)
            record.purchaseDate = Self.now.addingTimeInterval(0.123_456_789)
            record.createdAt = Self.now.addingTimeInterval(-0.987_654_321)
            if bare {
                record.signedTransaction = nil
                record.message = nil
                record.expiresDate = nil
                record.finishedAt = nil
                record.revokedAt = nil
                record.revocationReason = nil
            }
            return record
        }
        @Sendable func charge(_ record: TransactionRecord) -> LedgerEntry {
            LedgerEntry(id: nil, transactionId: record.id, kind: .charge, accountId: account.id, amountCents: 1234,
                        currency: "EUR", reason: "a charge", createdAt: Self.now.addingTimeInterval(6.000_000_9))
        }
        let alone = record("txn_alone")
        let aloneBare = record("txn_alone_bare", bare: true)
        let first = record("txn_first"), second = record("txn_second"), stale = record("txn_stale"), bare = record("txn_bare", bare: true)
        let batch = StatementBatch.recordPurchases
        let answers = try await database.statement { db in
            try await batch.run([
                RecordPurchase(record: first, revision: 3, delta: -1, charge: charge(first)).plan,
                RecordPurchase(record: second, revision: 4, delta: 2, charge: nil).plan,
                RecordPurchase(record: stale, revision: 4, delta: 5, charge: charge(stale)).plan,
                RecordPurchase(record: bare, revision: nil, delta: 1, charge: charge(bare)).plan,
            ], on: db)
        }
        #expect(answers.map { $0?[1] } == [1, 2, nil, 3])
        #expect(answers.map { $0?[2] } == [6, 8, nil, 9])
        _ = try #require(try await database.statement { try await TransactionRows($0).insert(alone, ifAccountAt: 6, addingCredits: 0, charge: charge(alone)) })
        _ = try #require(try await database.statement { try await TransactionRows($0).insert(aloneBare, ifAccountAt: nil, addingCredits: 0, charge: nil) })

        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        func text(_ id: String, as other: TransactionRecord) async throws -> String {
            var read = try #require(try await database.read { try await TransactionRows($0).find(id) })
            read.id = other.id
            read.idempotencyKey = other.idempotencyKey
            read.sequence = nil
            read.changeSequence = nil
            return String(decoding: try encoder.encode(read), as: UTF8.self)
        }
        #expect(try await text(first.id, as: alone) == text(alone.id, as: alone))
        #expect(try await text(second.id, as: alone) == text(alone.id, as: alone))
        #expect(try await text(bare.id, as: aloneBare) == text(aloneBare.id, as: aloneBare))
        #expect(try await database.read { try await TransactionRows($0).find(stale.id) } == nil)
        let ledger = try await database.read { try await TransactionRows($0).ledger { $0.where("accountId", .equal, account.id) } }
        #expect(ledger.map(\.transactionId) == [first.id, bare.id, alone.id])
        #expect(Set(ledger.map(\.createdAt)).count == 1)

        // A key the account used already: the unique index refuses, and nothing of the batch stays.
        var replaying = record("txn_replay")
        replaying.idempotencyKey = first.idempotencyKey
        let replay = replaying
        let fresh = record("txn_fresh")
        await #expect(throws: (any Error).self) {
            try await database.statement { db in
                try await batch.run([RecordPurchase(record: fresh, revision: nil, delta: 1, charge: nil).plan,
                                     RecordPurchase(record: replay, revision: nil, delta: 1, charge: nil).plan], on: db)
            }
        }
        #expect(try await database.read { try await TransactionRows($0).find(fresh.id) } == nil)
        #expect(try await database.read { try await AccountRows($0).find(account.id) }?.credits == 9)
        await database.close()
    }

    @Test("the compare-and-set moves an account only from its revision; at no revision, only while the balance stays in 0...Int64.max", arguments: TestEngine.all)
    func advanceAccount(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let database = try await Self.openStore(engine, in: directory)
        let account = AccountRecord(id: "acct_cas", tokenHash: "hash", credits: 10, createdAt: StoreClock.wallClock.wallNow(), revision: 4)
        try await database.write { try await $0.insert(into: "account").model(account).run() }
        @Sendable func advance(from revision: Int64?, adding delta: Int) async throws -> Int? {
            try await database.write { try await AccountRows($0).advance(account.id, from: revision, adding: delta)?.credits }
        }
        func stored() async throws -> (revision: Int64?, credits: Int?) {
            let row = try await database.read { try await AccountRows($0).find(account.id) }
            return (row?.revision, row?.credits)
        }
        #expect(try await advance(from: 3, adding: 5) == nil)
        #expect(try await advance(from: 4, adding: -3) == 7)
        #expect(try await advance(from: nil, adding: 5) == 12)
        #expect(try await stored() == (6, 12))
        // At no revision the bound is the write's own: never below 0, never past the largest integer.
        #expect(try await advance(from: nil, adding: -13) == nil)
        #expect(try await advance(from: nil, adding: Int.max - 11) == nil)
        #expect(try await stored() == (6, 12))
        #expect(try await advance(from: nil, adding: Int.max - 12) == Int.max)
        #expect(try await advance(from: nil, adding: -Int.max) == 0)
        #expect(try await advance(from: nil, adding: 1) == 1)
        // 24 writes at no revision at once, from as many connections: each adds, none is lost.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<24 {
                group.addTask {
                    let moved = try await advance(from: nil, adding: 2)
                    #expect(moved != nil)
                }
            }
            try await group.waitForAll()
        }
        #expect(try await stored() == (33, 49))
        await database.close()
    }

    @Test("the holdings look-up finds the same transactions on either engine, and only what the product's kind asks for", arguments: TestEngine.all)
    func holdingsLookup(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let database = try await Self.openStore(engine, in: directory)
        let account = AccountRecord(id: "acct_look", tokenHash: "hash", credits: 4, createdAt: StoreClock.wallClock.wallNow(), revision: 9)
        // Subscription periods: two purchased rows of one product are allowed (not of a book).
        @Sendable func record(_ id: String, status: TransactionStatus, expires: Date? = nil) -> TransactionRecord {
            var record = TransactionRecord.pending(
                account: account.id, product: Product(id: "com.kiosk.books.look", kind: .subscription, title: "Look", summary: "", price: Price(amount: "1.00", currency: "USD")),
                quantity: 1, method: "approve", key: "key-\(id)", at: account.createdAt)
            record.id = id
            record.status = status
            record.expiresDate = expires
            return record
        }
        try await database.write { db in
            try await db.insert(into: "account").model(account).run()
            _ = try await TransactionRows(db).insert(record("txn_first", status: .purchased, expires: Date(timeIntervalSince1970: 2_000_000_000)))
            _ = try await TransactionRows(db).insert(record("txn_later", status: .purchased, expires: Date(timeIntervalSince1970: 2_100_000_000)))
            _ = try await TransactionRows(db).insert(record("txn_asked", status: .deferred))
        }
        func lookUp(key: String, first: Bool, latest: Bool) async throws -> [String?] {
            try await database.read { db in
                let row = try #require(try await db.rows(Holdings.Lookup(
                    accountId: account.id, key: key, productId: "com.kiosk.books.look", firstPurchase: first, latestPeriod: latest)).first)
                #expect(try row.decode(column: "revision", as: Int64.self) == 9)
                #expect(try row.decode(column: "credits", as: Int.self) == 4)
                return try ["sameKey", "firstPurchase", "latestPeriod", "pending"].map { try row.decode(column: $0, as: String?.self) }
            }
        }
        #expect(try await lookUp(key: "key-txn_later", first: true, latest: false) == ["txn_later", "txn_first", nil, "txn_asked"])
        #expect(try await lookUp(key: "key-none", first: false, latest: true) == [nil, nil, "txn_later", "txn_asked"])
        #expect(try await lookUp(key: "key-none", first: false, latest: false) == [nil, nil, nil, "txn_asked"])
        if engine == .sqlite {
            // The latest period's look-up walks its own index, which holds only rows with an
            // expiry (migration 11): not the account's whole history.
            let plan = try await database.read { db in
                try await db.raw("EXPLAIN QUERY PLAN \(unsafeRaw: Holdings.Lookup.sql)").all().map { try $0.decode(column: "detail", as: String.self) }
            }
            #expect(plan.contains { $0.contains("storeTransaction_latest_period") }, "\(plan)")
            let index = try await database.read { db in
                try await db.raw(#"SELECT "sql" FROM "sqlite_master" WHERE "name" = 'storeTransaction_latest_period'"#).all().map { try $0.decode(column: "sql", as: String.self) }
            }
            #expect(index.first?.contains(#"WHERE "expiresDate" IS NOT NULL"#) == true, "\(index)")
        }
        if engine == .postgres {
            // Kept on the connection: prepared once, then only executed, with the one generic
            // plan from the first execution on (without plan_cache_mode, the first five are
            // planned again each).
            let executions = try await database.read { db in
                for _ in 0..<3 {
                    _ = try await db.rows(Holdings.Lookup(accountId: account.id, key: "k", productId: "p", firstPurchase: false, latestPeriod: false))
                }
                return try await db.raw(#"SELECT "generic_plans" AS "runs" FROM "pg_prepared_statements" WHERE "name" = \#(bind: Holdings.Lookup.name)"#)
                    .all().map { try $0.decode(column: "runs", as: Int64.self) }
            }
            #expect(executions.count == 1)
            #expect(executions.first ?? 0 >= 3)
        }
        await database.close()
    }

    @Test("a refund of a subscription's current period ends it whatever millisecond its period ends at (the expiry compared to the millisecond both engines keep, not for exact equality after a round trip)", arguments: TestEngine.all)
    func refundEndsSubscriptionAtAnyMillisecond(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let database = try await Self.openStore(engine, in: directory)
        let account = AccountRecord(id: "acct_ms", tokenHash: "hash", credits: 0, createdAt: StoreClock.wallClock.wallNow(), revision: 0)
        try await database.write { try await AccountRows($0).insert(account) }
        var stillActive: [Int] = []
        for millisecond in stride(from: 0, to: 1000, by: 7) {
            let expires = Date(timeIntervalSince1970: 1_798_531_179 + Double(millisecond) / 1000)
            var record = Self.everyField(id: "txn_ms_\(millisecond)", account: account.id, status: .purchased)
            record.originalTransactionId = record.id
            record.idempotencyKey = "ms-\(millisecond)"
            record.purchaseDate = expires.addingTimeInterval(-30 * 86_400)
            record.expiresDate = expires
            record.revokedAt = nil
            record.revocationReason = nil
            let inserted = record
            let ended = try await database.write { db -> String? in
                _ = try await TransactionRows(db).insert(inserted)
                _ = try await SubscriptionRows(db).start(inserted, expires: expires, renews: true, clockOffset: 0, at: Self.now)
                // The period as the refund reads it: from the database.
                let period = try #require(try await TransactionRows(db).find(inserted.id))
                try await SubscriptionRows(db).end(refunded: period, at: Self.now)
                return try await db.select().column("state").from("subscription").where("originalTransactionId", .equal, inserted.id)
                    .first(decodingColumn: "state", as: String.self)
            }
            if ended != SubscriptionState.expired.rawValue { stillActive.append(millisecond) }
        }
        await database.close()
        #expect(stillActive.isEmpty, "periods ending at these milliseconds were refunded and their subscription kept renewing: \(stillActive)")
    }

    @Test("the console overview's subscription counts read subscriptions' periods through their partial index, never every transaction (SQLite's plans)")
    func overviewCountsUseTheSubscriptionsIndex() async throws {
        let directory = try TemporaryDirectory()
        let database = try await Self.openStore(.sqlite, in: directory)
        let now = StoreClock.wallClock.wallNow()
        for (name, query) in OverviewCounts.all(since: now.addingTimeInterval(-30 * 86_400), now: now) {
            let plan = try await database.read { db in
                try await db.raw("EXPLAIN QUERY PLAN " + query).all().map { try $0.decode(column: "detail", as: String.self) }
            }
            // "SCAN storeTransaction" or "SCAN t" with no index reads every row of the table.
            let scans = plan.filter { $0.hasPrefix("SCAN ") && !$0.hasPrefix("SCAN subscription") && !$0.contains("INDEX") }
            #expect(scans.isEmpty, "\(name) scans every transaction: \(plan)")
        }
        await database.close()
    }
}
