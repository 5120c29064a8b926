import Foundation
import KioskCore
import PostgresNIO
import SQLKit

/// The store's reads and writes of single rows, in SQLKit's builders: one spelling for both engines.
extension SQLDatabase {
    func account(_ id: String) async throws -> AccountRecord? {
        try await select().column("*").from("account").where("id", .equal, id).first(decoding: AccountRecord.self)
    }

    func storeTransaction(_ id: String) async throws -> TransactionRecord? {
        try await transactions { $0.where("id", .equal, id) }.first
    }

    /// The transactions `filter` selects, oldest first.
    func transactions(limit: Int? = nil, _ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [TransactionRecord] {
        try await filter(select().column("*").from("storeTransaction")).orderBy("sequence").limit(limit).all(decoding: TransactionRecord.self)
    }

    /// The account's transactions written after change number `after`, in the order of their changes.
    func changedTransactions(accountId: String, after: Int64, limit: Int) async throws -> [TransactionRecord] {
        try await select().column("*").from("storeTransaction").where("accountId", .equal, accountId).where("changeSequence", .greaterThan, after)
            .orderBy("changeSequence").limit(limit).all(decoding: TransactionRecord.self)
    }

    /// Gives the transaction the account's next change number, so its devices learn of what was
    /// just written. Takes the account row first (on PostgreSQL, its lock until the commit), as
    /// every writer of an account does, so the account's change numbers follow its commits. The
    /// caller tells ``ChangeNotifier/committed(_:)`` once the write has committed.
    /// - Returns: the change number.
    @discardableResult
    func recordChange(of transactionId: String, accountId: String) async throws -> Int64 {
        let change = try await nextChange(of: accountId)
        try await raw(#"UPDATE "storeTransaction" SET "changeSequence" = \#(bind: change) WHERE "id" = \#(bind: transactionId)"#).run()
        return change
    }

    /// Takes the account's next change number (and its row's lock; see ``recordChange(of:accountId:)``).
    func nextChange(of accountId: String) async throws -> Int64 {
        try await raw(#"""
            UPDATE "account" SET "lastChange" = "lastChange" + 1 WHERE "id" = \#(bind: accountId) RETURNING "lastChange"
            """#).first(decodingColumn: "lastChange", as: Int64.self) ?? 0
    }

    /// Inserts a transaction and returns it with the sequence the database gave it (the row as
    /// ``PlannedRows/transaction(_:change:after:when:)`` writes it, as every writer of one does).
    /// (`StoreTablesTests` checks that every field is written.)
    func insert(_ record: TransactionRecord) async throws -> TransactionRecord {
        let step = PlannedRows.transaction(record, change: [.bind(.integer(record.changeSequence ?? 0))])
        let rows = try await run(WritePlan(steps: [step], result: [("recorded", "sequence")]))
        var inserted = record
        inserted.sequence = try rows?.integer("recorded", "sequence")
        return inserted
    }

    /// The compare-and-set a payment commits under (``PlannedRows/advance(account:from:adding:)``);
    /// it also takes the account's next change number.
    /// - Returns: the account's new balance and the change number, or nil when it did not move.
    func advance(account id: String, from revision: Int64?, adding delta: Int) async throws -> (credits: Int, change: Int64)? {
        let plan = WritePlan(steps: [PlannedRows.advance(account: id, from: revision, adding: delta)], result: [("advanced", "credits")])
        guard let rows = try await run(plan) else { return nil }
        return (Int(try rows.integer("advanced", "credits")), try rows.integer("advanced", "lastChange"))
    }

    /// PostgreSQL only: a new purchase's whole write (``RecordPurchase``) as one statement.
    /// - Returns: the transaction with its sequence and the account's new balance, or nil when the
    ///   account did not move.
    func insert(_ record: TransactionRecord, ifAccountAt revision: Int64?, addingCredits delta: Int, charge: LedgerEntry?) async throws -> (TransactionRecord, credits: Int)? {
        try await self.record(RecordPurchase(record: record, revision: revision, delta: delta, charge: charge))
    }

    /// `purchase` alone, as its own prepared statement (``AccountCommits`` runs several as one:
    /// ``StatementBatch``).
    func record(_ purchase: RecordPurchase) async throws -> (TransactionRecord, credits: Int)? {
        guard let row = try await rows(purchase).first else { return nil }
        return purchase.recorded(try StatementBatch.recordPurchases.result.map { try row.decode(column: $0.column, as: Int64.self) })
    }

    /// The transaction, locked until the write transaction that reads it ends: `FOR UPDATE` on
    /// PostgreSQL, where read committed would otherwise let another writer change it between this
    /// read and the caller's write; on SQLite the writer is alone already, and SQLKit writes nothing.
    func lockedTransaction(_ id: String) async throws -> TransactionRecord? {
        try await select().column("*").from("storeTransaction").where("id", .equal, id).for(.update).all(decoding: TransactionRecord.self).first
    }

    /// Writes only the columns `set` names, and only while the transaction is still `status`: a
    /// compare-and-set behind the row lock, so no write is ever made from a stale read.
    /// - Returns: whether the row changed.
    func changeTransaction(_ id: String, from status: TransactionStatus, _ set: (SQLUpdateBuilder) -> SQLUpdateBuilder) async throws -> Bool {
        try await set(update("storeTransaction")).where("id", .equal, id).where("status", .equal, status.rawValue)
            .returning("id").all().count == 1
    }

    /// Inserts a ledger entry; the day's sales row (`salesDaySlot`, the entry's account's slot)
    /// moves with it, in the same transaction (``PlannedRows/ledger(_:productId:slot:after:when:)``).
    func insert(_ entry: LedgerEntry) async throws {
        let product: [PlanSQL] = [.text(#"(SELECT "productId" FROM "storeTransaction" WHERE "id" = "#), .bind(.text(entry.transactionId)), .text(")")]
        try await run(WritePlan(steps: PlannedRows.ledger(entry, productId: product, slot: SalesSlot.of(entry.accountId, in: self)), result: []))
    }

    func ledger(_ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [LedgerEntry] {
        try await filter(select().column("*").from("ledgerEntry")).orderBy("id").all(decoding: LedgerEntry.self)
    }
}

/// A new purchase's write, one plan: the account's compare-and-set (``PlannedRows/advance(account:from:adding:)``),
/// the transaction with the change number it took, its charge's ledger entry and day's sales row,
/// and its notification with a delivery per endpoint. On PostgreSQL it is one statement of
/// data-modifying CTEs, prepared once per connection: an account that moved on makes it write
/// nothing, and a unique index refusing an insert undoes it all. SQLite (and a purchase that
/// also starts a subscription) runs the same plan a step at a time in its write transaction.
struct RecordPurchase: PlannedStatement {
    typealias Row = any SQLRow
    static let sql = rendered.sql
    static let parameterTypes = rendered.parameterTypes
    static var template: WritePlan { plan(nil, revision: nil, delta: 0, charge: nil, slot: 0, announcedAt: Date(timeIntervalSince1970: 0)) }

    let record: TransactionRecord
    let revision: Int64?
    let delta: Int
    let charge: LedgerEntry?

    var plan: WritePlan {
        Self.plan(record, revision: revision, delta: delta, charge: charge, slot: SalesSlot.of(record.accountId), announcedAt: record.createdAt)
    }

    /// The transaction as recorded and the account's new balance, from the plan's result columns
    /// (in their order: the sequence, the change number, the balance).
    func recorded(_ values: [Int64]) -> (TransactionRecord, credits: Int) {
        var inserted = record
        inserted.sequence = values[0]
        inserted.changeSequence = values[1]
        return (inserted, Int(values[2]))
    }

    /// The plan of a purchase of `record` (nil: the template), decided at the account's `revision`.
    /// - Parameter slot: the account's ``SalesSlot`` on the engine that runs it.
    static func plan(_ record: TransactionRecord?, revision: Int64?, delta: Int, charge: LedgerEntry?, slot: Int64, announcedAt: Date) -> WritePlan {
        var steps = [PlannedRows.advance(account: record?.accountId ?? "", from: revision, adding: delta)]
        steps.append(PlannedRows.transaction(record, change: [.earlier("advanced", "lastChange")]))
        steps += PlannedRows.ledger(charge, productId: [.bind(.text(record?.productId))], slot: slot, after: ["recorded"], when: [[.bind(.flag(charge != nil))]])
        steps += PlannedRows.notification(record?.chargeNotification, transactionId: [.bind(.text(record?.id))], renewalInfo: nil, at: announcedAt,
                                          after: ["recorded"], when: [[.bind(.flag(record?.announcesCharge ?? false))]])
        return WritePlan(steps: steps, result: [("recorded", "sequence"), ("recorded", "changeSequence"), ("advanced", "credits")])
    }
}

/// Which of a day's sales rows (`salesDaySlot`) a ledger entry adds to. One row per day, product
/// and currency was updated by every charge, and on PostgreSQL each charge waited on that row's
/// lock for the commit of the one before it (purchases fell from ~1,775 to ~800 a second). Each
/// account adds to one of ``count`` rows, chosen by a stable hash of its ID, so charges of
/// different accounts seldom meet; one account's charges take turns on its own row already. SQLite
/// has one writer, so there every entry adds to slot 0 and the overview reads a row per day and product.
enum SalesSlot {
    static let count: UInt64 = 16

    /// The account's slot on PostgreSQL (FNV-1a of its ID: the same in every process).
    static func of(_ accountId: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in accountId.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int64(hash % count)
    }

    /// The account's slot on `db`'s engine.
    static func of(_ accountId: String, in db: any SQLDatabase) -> Int64 {
        db.dialect.name == "postgresql" ? of(accountId) : 0
    }

    /// What an insert into a slot that has its row already does instead: adds to it.
    static let addOnConflict = #"""
        ON CONFLICT ("day", "productId", "currency", "slot") DO UPDATE SET "sales" = "salesDaySlot"."sales" + excluded."sales",
            "refunds" = "salesDaySlot"."refunds" + excluded."refunds", "netCents" = "salesDaySlot"."netCents" + excluded."netCents"
        """#
}
