import Foundation
import KioskCore
import PostgresNIO
import SQLKit

/// The one writer of the `storeTransaction` table and of the ledger (`ledgerEntry`, with the day's
/// sales row each entry moves): every statement that writes a transaction's row is here, in
/// SQLKit's builders (one spelling for both engines) or as a step of a one-statement write. The
/// owners (``Payments``, ``Receipts``, ``Accounts``) call these inside their write transactions.
struct TransactionRows {
    let db: any SQLDatabase

    init(_ db: any SQLDatabase) { self.db = db }

    func find(_ id: String) async throws -> TransactionRecord? {
        try await list { $0.where("id", .equal, id) }.first
    }

    /// The transactions `filter` selects, oldest first.
    func list(limit: Int? = nil, _ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [TransactionRecord] {
        try await filter(db.select().column("*").from("storeTransaction")).orderBy("sequence").limit(limit).all(decoding: TransactionRecord.self)
    }

    /// The account's transactions written after change number `after`, in the order of their changes.
    func changed(accountId: String, after: Int64, limit: Int) async throws -> [TransactionRecord] {
        try await db.select().column("*").from("storeTransaction").where("accountId", .equal, accountId).where("changeSequence", .greaterThan, after)
            .orderBy("changeSequence").limit(limit).all(decoding: TransactionRecord.self)
    }

    /// Gives the transaction the account's next change number, so its devices learn of what was
    /// just written. Takes the account row first (on PostgreSQL, its lock until the commit), as
    /// every writer of an account does, so the account's change numbers follow its commits. The
    /// caller tells ``ChangeNotifier/committed(_:)`` once the write has committed.
    /// - Returns: the change number.
    @discardableResult
    func recordChange(of transactionId: String, accountId: String) async throws -> Int64 {
        let change = try await AccountRows(db).nextChange(of: accountId)
        try await db.raw(#"UPDATE "storeTransaction" SET "changeSequence" = \#(bind: change) WHERE "id" = \#(bind: transactionId)"#).run()
        return change
    }

    /// A subscription period left for another plan (an upgrade) ends at the change: its end and its
    /// receipt (signed again with that end) written only while the period still stands with the end
    /// it was read with; its devices learn of it by its new change number.
    /// - Returns: whether it was written.
    func endEarly(_ ended: TransactionRecord, from end: Date) async throws -> Bool {
        let written = try await db.raw(#"""
            UPDATE "storeTransaction" SET "expiresDate" = \#(bind: ended.expiresDate), "signedTransaction" = \#(bind: ended.signedTransaction)
            WHERE "id" = \#(bind: ended.id) AND "status" = 'purchased'
                AND "expiresDate" > \#(bind: end.addingTimeInterval(-0.001)) AND "expiresDate" < \#(bind: end.addingTimeInterval(0.001))
            RETURNING "id"
            """#).all()
        guard !written.isEmpty else { return false }
        try await recordChange(of: ended.id, accountId: ended.accountId)
        return true
    }

    /// Inserts a transaction and returns it with the sequence the database gave it (the row as
    /// ``insertStep(_:change:after:when:)`` writes it, as every writer of one does).
    /// (`TransactionRowsTests` checks that every field is written.)
    func insert(_ record: TransactionRecord) async throws -> TransactionRecord {
        let step = Self.insertStep(record, change: [.bind(.integer(record.changeSequence ?? 0))])
        let rows = try await db.run(WritePlan(steps: [step], result: [("recorded", "sequence")]))
        var inserted = record
        inserted.sequence = try rows?.integer("recorded", "sequence")
        return inserted
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
        guard let row = try await db.rows(purchase).first else { return nil }
        return purchase.recorded(try StatementBatch.recordPurchases.result.map { try row.decode(column: $0.column, as: Int64.self) })
    }

    /// The transaction, locked until the write transaction that reads it ends: `FOR UPDATE` on
    /// PostgreSQL, where read committed would otherwise let another writer change it between this
    /// read and the caller's write; on SQLite the writer is alone already, and SQLKit writes nothing.
    func locked(_ id: String) async throws -> TransactionRecord? {
        try await db.select().column("*").from("storeTransaction").where("id", .equal, id).for(.update).all(decoding: TransactionRecord.self).first
    }

    /// Writes only the columns `set` names, and only while the transaction is still `status`: a
    /// compare-and-set behind the row lock, so no write is ever made from a stale read.
    /// - Returns: whether the row changed.
    func change(_ id: String, from status: TransactionStatus, _ set: (SQLUpdateBuilder) -> SQLUpdateBuilder) async throws -> Bool {
        try await set(db.update("storeTransaction")).where("id", .equal, id).where("status", .equal, status.rawValue)
            .returning("id").all().count == 1
    }

    /// Inserts a ledger entry; the day's sales row (`salesDaySlot`, the entry's account's slot)
    /// moves with it, in the same transaction (``ledgerSteps(_:productId:slot:after:when:)``).
    func insertLedger(_ entry: LedgerEntry) async throws {
        let product: [PlanSQL] = [.text(#"(SELECT "productId" FROM "storeTransaction" WHERE "id" = "#), .bind(.text(entry.transactionId)), .text(")")]
        try await db.run(WritePlan(steps: Self.ledgerSteps(entry, productId: product, slot: SalesSlot.of(entry.accountId, in: db)), result: []))
    }

    func ledger(_ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [LedgerEntry] {
        try await filter(db.select().column("*").from("ledgerEntry")).orderBy("id").all(decoding: LedgerEntry.self)
    }

    /// Records that the client delivered the transaction (the one column a finish owns).
    func setFinished(_ id: String, at finishedAt: Date) async throws {
        try await db.update("storeTransaction").set("finishedAt", to: finishedAt).where("id", .equal, id).run()
    }

    /// A receipt signed again under the current key, with change number `change`: only over the
    /// receipt it replaces (a concurrent re-sign that got there first wins; either verifies).
    /// - Returns: whether this one was written.
    func resign(_ id: String, from old: String, to fresh: String, change: Int64) async throws -> Bool {
        try await db.raw(#"""
            UPDATE "storeTransaction" SET "signedTransaction" = \#(bind: fresh), "changeSequence" = \#(bind: change)
            WHERE "id" = \#(bind: id) AND "signedTransaction" = \#(bind: old) RETURNING "id"
            """#).all().count == 1
    }

    /// A deleted account's transactions forget its App Store `appAccountToken`.
    func forgetAppAccountTokens(of accountId: String) async throws {
        try await db.update("storeTransaction").set("appAccountToken", to: SQLLiteral.null).where("accountId", .equal, accountId).run()
    }

    // MARK: - Steps of the one-statement writes (``RecordPurchase``, ``RecordRenewalStep``)

    /// A transaction's row (every column the store writes), with the change number `change`.
    /// Returns `sequence` and `changeSequence`.
    static func insertStep(
        _ record: TransactionRecord?, change: [PlanSQL], after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> PlanStep {
        let r = record
        let columns: [(String, [PlanSQL])] = [
            ("id", [.bind(.text(r?.id))]),
            ("accountId", [.bind(.text(r?.accountId))]),
            ("productId", [.bind(.text(r?.productId))]),
            ("kind", [.bind(.text(r?.kind.rawValue))]),
            ("quantity", [.bind(.integer(r.map { Int64($0.quantity) }))]),
            ("originalTransactionId", [.bind(.text(r?.originalTransactionId))]),
            ("purchaseDate", [.bind(.date(r?.purchaseDate))]),
            ("expiresDate", [.bind(.date(r?.expiresDate))]),
            ("status", [.bind(.text(r?.status.rawValue))]),
            ("paymentMethod", [.bind(.text(r?.paymentMethod))]),
            ("idempotencyKey", [.bind(.text(r?.idempotencyKey))]),
            ("amountCents", [.bind(.integer(r.map { Int64($0.amountCents) }))]),
            ("currency", [.bind(.text(r?.currency))]),
            ("creditsGranted", [.bind(.integer(r.map { Int64($0.creditsGranted) }))]),
            ("creditsSpent", [.bind(.integer(r.map { Int64($0.creditsSpent) }))]),
            ("signedTransaction", [.bind(.text(r?.signedTransaction))]),
            ("message", [.bind(.text(r?.message))]),
            ("finishedAt", [.bind(.date(r?.finishedAt))]),
            ("createdAt", [.bind(.date(r?.createdAt))]),
            ("revokedAt", [.bind(.date(r?.revokedAt))]),
            ("revocationReason", [.bind(.text(r?.revocationReason))]),
            ("requestedMethod", [.bind(.text(r?.requestedMethod))]),
            ("changeSequence", change),
            ("appAccountToken", [.bind(.text(r?.appAccountToken))]),
            ("offerType", [.bind(.text(r?.offerType))]),
            ("offerPeriod", [.bind(.text(r?.offerPeriod))]),
            ("storefront", [.bind(.text(r?.storefront))]),
            ("taxBasisPoints", [.bind(.integer(r?.taxBasisPoints.map(Int64.init)))]),
            ("taxCents", [.bind(.integer(r.map { Int64($0.taxCents) }))]),
        ]
        return PlanStep(
            name: "recorded", write: .insert(into: "storeTransaction", columns: columns.map(\.0), values: columns.map(\.1), onConflict: nil),
            after: after, conditions: conditions, returning: ["sequence", "changeSequence"])
    }

    /// A ledger entry and the day's sales row it adds to (`productId`: the SQL of the product;
    /// `slot`: the account's ``SalesSlot`` on the engine that runs it), in the same change; an
    /// entry that is no sale and no refund of one (``LedgerEntry/countsInSales``) adds nothing.
    static func ledgerSteps(
        _ entry: LedgerEntry?, productId: [PlanSQL], slot: Int64, after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> [PlanStep] {
        let isCharge = entry?.kind == .charge
        let charged = PlanStep(
            name: "charged",
            write: .insert(into: "ledgerEntry", columns: ["transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt",
                                                          "country", "taxBasisPoints", "taxCents"], values: [
                [.bind(.text(entry?.transactionId))], [.bind(.text(entry?.kind.rawValue))], [.bind(.text(entry?.accountId))],
                [.bind(.integer(entry.map { Int64($0.amountCents) }))], [.bind(.text(entry?.currency))], [.bind(.text(entry?.reason))],
                [.bind(.date(entry?.createdAt))], [.bind(.text(entry?.country))], [.bind(.integer(entry?.taxBasisPoints.map(Int64.init)))],
                [.bind(.integer(entry.map { Int64($0.taxCents) }))],
            ], onConflict: nil),
            after: after, conditions: conditions)
        let counted = PlanStep(
            name: "counted",
            write: .insert(into: "salesDaySlot", columns: ["day", "productId", "currency", "slot", "sales", "refunds", "netCents"], values: [
                [.bind(.text(entry.map { Store.day($0.createdAt) }))], productId, [.bind(.text(entry?.currency))],
                [.bind(.integer(slot))], [.bind(.integer(isCharge ? 1 : 0))], [.bind(.integer(isCharge ? 0 : 1))],
                [.bind(.integer(entry.map { Int64($0.amountCents) }))],
            ], onConflict: SalesSlot.addOnConflict),
            after: after, conditions: conditions + [[.bind(.flag(entry?.countsInSales ?? false))]])
        return [charged, counted]
    }
}
