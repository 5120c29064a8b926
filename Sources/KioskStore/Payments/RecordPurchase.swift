import Foundation
import KioskCore
import PostgresNIO
import SQLKit

/// A new purchase's write, one plan: the account's compare-and-set (``AccountRows/advanceStep(account:from:adding:)``),
/// the transaction with the change number it took, its charge's ledger entry and day's sales row,
/// and its notification with a delivery per endpoint. On PostgreSQL it is one statement of
/// data-modifying CTEs, prepared once per connection: an account that moved on makes it write
/// nothing, and a unique index refusing an insert undoes it all. SQLite (and a purchase that
/// also starts a subscription) runs the same plan a step at a time in its write transaction.
struct RecordPurchase: PlannedStatement {
    typealias Row = any SQLRow
    static let sql = rendered.sql
    static let parameterTypes = rendered.parameterTypes
    static var template: WritePlan { plan(nil, revision: nil, delta: 0, charge: nil, slot: 0, announcedAt: Date(timeIntervalSince1970: 0), traceParent: nil) }

    let record: TransactionRecord
    let revision: Int64?
    let delta: Int
    let charge: LedgerEntry?
    /// The trace of the request that made the purchase, taken where it is made: the plan may run in
    /// another purchase's task (``AccountCommits`` batches an account's purchases).
    var traceParent: String? = TraceParent.current()

    var plan: WritePlan {
        Self.plan(record, revision: revision, delta: delta, charge: charge, slot: SalesSlot.of(record.accountId), announcedAt: record.createdAt,
                  traceParent: traceParent)
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
    static func plan(_ record: TransactionRecord?, revision: Int64?, delta: Int, charge: LedgerEntry?, slot: Int64, announcedAt: Date, traceParent: String?) -> WritePlan {
        var steps = [AccountRows.advanceStep(account: record?.accountId ?? "", from: revision, adding: delta)]
        steps.append(TransactionRows.insertStep(record, change: [.earlier("advanced", "lastChange")]))
        steps += TransactionRows.ledgerSteps(charge, productId: [.bind(.text(record?.productId))], slot: slot, after: ["recorded"], when: [[.bind(.flag(charge != nil))]])
        steps += PlannedRows.notification(record?.chargeNotification, transactionId: [.bind(.text(record?.id))], renewalInfo: nil, traceParent: traceParent, at: announcedAt,
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
