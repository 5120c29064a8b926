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

    /// Inserts a transaction and returns it with the sequence the database gave it.
    ///
    /// Spelled out rather than `insert(into:).model(record)`: SQLKit's model encoder and its quoting
    /// of 21 identifiers came to a tenth of a purchase's CPU, spent inside SQLite's serial writer.
    /// (`StoreTablesTests` checks that every field is written.)
    func insert(_ record: TransactionRecord) async throws -> TransactionRecord {
        let row = try await raw(#"""
            INSERT INTO "storeTransaction" (\#(unsafeRaw: TransactionRecord.insertedColumns))
            VALUES (\#(bind: record.id), \#(bind: record.accountId), \#(bind: record.productId), \#(bind: record.kind.rawValue),
                \#(bind: record.quantity), \#(bind: record.originalTransactionId), \#(bind: record.purchaseDate), \#(bind: record.expiresDate),
                \#(bind: record.status.rawValue), \#(bind: record.paymentMethod), \#(bind: record.idempotencyKey), \#(bind: record.amountCents),
                \#(bind: record.currency), \#(bind: record.creditsGranted), \#(bind: record.creditsSpent), \#(bind: record.signedTransaction),
                \#(bind: record.message), \#(bind: record.finishedAt), \#(bind: record.createdAt), \#(bind: record.revokedAt),
                \#(bind: record.revocationReason), \#(bind: record.requestedMethod), \#(bind: record.changeSequence ?? 0), \#(bind: record.appAccountToken))
            RETURNING "sequence"
            """#).first()
        var inserted = record
        inserted.sequence = try row?.decode(column: "sequence", as: Int64.self)
        return inserted
    }

    /// The compare-and-set a payment commits under (``AdvanceAccount``); it also takes the account's next change number.
    /// - Returns: the account's new balance and the change number, or nil when it did not move.
    func advance(account id: String, from revision: Int64?, adding delta: Int) async throws -> (credits: Int, change: Int64)? {
        guard let row = try await rows(AdvanceAccount(accountId: id, revision: revision, delta: delta)).first else { return nil }
        return (try row.decode(column: "credits", as: Int.self), try row.decode(column: "lastChange", as: Int64.self))
    }

    /// PostgreSQL only: ``advance(account:from:adding:)``, ``insert(_:)-(TransactionRecord)`` and,
    /// when given, the charge's ledger entry, as one statement (``RecordPurchase``).
    /// - Returns: the transaction with its sequence and the account's new balance, or nil when the
    ///   account did not move.
    func insert(_ record: TransactionRecord, ifAccountAt revision: Int64?, addingCredits delta: Int, charge: LedgerEntry?) async throws -> (TransactionRecord, credits: Int)? {
        let statement = RecordPurchase(record: record, revision: revision, delta: delta, charge: charge)
        guard let row = try await rows(statement).first else { return nil }
        var inserted = record
        inserted.sequence = try row.decode(column: "sequence", as: Int64.self)
        inserted.changeSequence = try row.decode(column: "changeSequence", as: Int64.self)
        return (inserted, try row.decode(column: "credits", as: Int.self))
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

    /// Spelled out for the reason `insert(_: TransactionRecord)` is. The day's sales row
    /// (`salesDaySlot`, the entry's account's slot) moves with it, in the same transaction.
    func insert(_ entry: LedgerEntry) async throws {
        try await raw(#"""
            INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
            VALUES (\#(bind: entry.transactionId), \#(bind: entry.kind.rawValue), \#(bind: entry.accountId), \#(bind: entry.amountCents),
                \#(bind: entry.currency), \#(bind: entry.reason), \#(bind: entry.createdAt))
            """#).run()
        let charge = entry.kind == .charge ? 1 : 0
        try await raw(#"""
            INSERT INTO "salesDaySlot" ("day", "productId", "currency", "slot", "sales", "refunds", "netCents")
            SELECT \#(bind: Store.day(entry.createdAt)), "productId", \#(bind: entry.currency), \#(bind: SalesSlot.of(entry.accountId, in: self)),
                \#(bind: charge), \#(bind: 1 - charge), \#(bind: entry.amountCents)
            FROM "storeTransaction" WHERE "id" = \#(bind: entry.transactionId)
            \#(unsafeRaw: SalesSlot.addOnConflict)
            """#).run()
    }

    func ledger(_ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [LedgerEntry] {
        try await filter(select().column("*").from("ledgerEntry")).orderBy("id").all(decoding: LedgerEntry.self)
    }
}

extension TransactionRecord {
    /// The columns every insert of a transaction row names, in the order it gives their values
    /// (``SQLDatabase/insert(_:)-(TransactionRecord)``, ``RecordPurchase``, ``RecordRenewalStep``).
    static let insertedColumns = #"""
        "id", "accountId", "productId", "kind", "quantity", "originalTransactionId", "purchaseDate", "expiresDate", "status",
        "paymentMethod", "idempotencyKey", "amountCents", "currency", "creditsGranted", "creditsSpent", "signedTransaction", "message",
        "finishedAt", "createdAt", "revokedAt", "revocationReason", "requestedMethod", "changeSequence", "appAccountToken"
        """#
}

/// The compare-and-set a payment commits under: the account moves to its next revision, its
/// balance by `$3`, only while it is still at revision `$2`, the snapshot the payment was decided
/// on. A decision that depends on nothing the account holds (a consumable's charge, `$2` null)
/// moves it from whatever revision it is at, as long as the balance stays between 0 and the
/// largest integer: the one thing such a decision needs of the account, checked here, where no
/// other payment can come between the check and the write (the row is locked, or on SQLite the
/// writer is this connection). The CASE keeps the bound's arithmetic from overflowing on either engine.
struct AdvanceAccount: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        UPDATE "account" SET "revision" = "revision" + 1, "credits" = "credits" + $3, "lastChange" = "lastChange" + 1
        WHERE "id" = $1 AND CASE WHEN $2 IS NOT NULL THEN "revision" = $2
            WHEN $3 >= 0 THEN "credits" <= 9223372036854775807 - $3 ELSE "credits" >= -$3 END
        RETURNING "id", "credits", "lastChange"
        """#
    static let parameterTypes: [PostgresDataType] = [.text, .int8, .int8]

    let accountId: String
    /// The revision the decision was taken at; nil when it depends on nothing the account holds.
    let revision: Int64?
    let delta: Int

    var parameters: [StatementParameter] { [.text(accountId), .integer(revision), .integer(Int64(delta))] }
}

/// A new purchase's write on PostgreSQL, one statement of data-modifying CTEs (which SQLite lacks):
/// ``AdvanceAccount`` (its `$1`–`$3`), and the inserts select from its row, so an account that
/// moved on makes the statement write nothing; the ledger entry (and its day's sales row, `$34`
/// the day and `$35` the slot) is written only when `$25` (a charge) is true. A unique index refusing either insert undoes it all.
struct RecordPurchase: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        WITH "advanced" AS (
            \#(AdvanceAccount.sql)
        ), "recorded" AS (
            INSERT INTO "storeTransaction" (\#(TransactionRecord.insertedColumns))
            SELECT $4, $1, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, "advanced"."lastChange", $31
            FROM "advanced"
            RETURNING "sequence", "changeSequence"
        ), "charged" AS (
            INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
            SELECT $4, $26, $1, $27, $28, $29, $30
            FROM "recorded" WHERE $25
        ), "counted" AS (
            INSERT INTO "salesDaySlot" ("day", "productId", "currency", "slot", "sales", "refunds", "netCents")
            SELECT $34, $5, $28, $35, CASE WHEN $26 = 'charge' THEN 1 ELSE 0 END, CASE WHEN $26 = 'charge' THEN 0 ELSE 1 END, $27
            FROM "recorded" WHERE $25
            \#(SalesSlot.addOnConflict)
        ), "announced" AS (
            INSERT INTO "notification" ("id", "accountId", "type", "subtype", "transactionId", "originalTransactionId", "renewalInfo", "createdAt")
            SELECT $32, $1, 'ONE_TIME_CHARGE', NULL, $4, $8, NULL, $21
            FROM "recorded" WHERE $33
            RETURNING "sequence"
        ), "fanned" AS (
            INSERT INTO "delivery" ("notificationSequence", "webhookId", "accountId", "state", "attempts", "nextAttemptAt")
            SELECT "announced"."sequence", "webhook"."id", $1, 'pending', 0, $21 FROM "announced", "webhook"
        )
        SELECT "recorded"."sequence", "recorded"."changeSequence", "advanced"."credits"
        FROM "recorded", "advanced"
        """#
    static let parameterTypes: [PostgresDataType] = AdvanceAccount.parameterTypes + [
        .text, .text, .text, .int8, .text, .timestamptz, .timestamptz, .text, .text, .text, .int8, .text,
        .int8, .int8, .text, .text, .timestamptz, .timestamptz, .timestamptz, .text, .text, .bool, .text, .int8, .text, .text, .timestamptz,
        .text, .text, .bool, .text, .int8,
    ]

    let record: TransactionRecord
    let revision: Int64?
    let delta: Int
    let charge: LedgerEntry?

    var parameters: [StatementParameter] {
        AdvanceAccount(accountId: record.accountId, revision: revision, delta: delta).parameters + [
            .text(record.id), .text(record.productId), .text(record.kind.rawValue), .integer(Int64(record.quantity)),
            .text(record.originalTransactionId), .date(record.purchaseDate), .date(record.expiresDate), .text(record.status.rawValue),
            .text(record.paymentMethod), .text(record.idempotencyKey), .integer(Int64(record.amountCents)), .text(record.currency),
            .integer(Int64(record.creditsGranted)), .integer(Int64(record.creditsSpent)), .text(record.signedTransaction),
            .text(record.message), .date(record.finishedAt), .date(record.createdAt), .date(record.revokedAt), .text(record.revocationReason),
            .text(record.requestedMethod), .flag(charge != nil), .text(charge?.kind.rawValue), .integer(Int64(charge?.amountCents ?? 0)), .text(charge?.currency),
            .text(charge?.reason), .date(charge?.createdAt), .text(record.appAccountToken),
            .text(UUID().uuidString.lowercased()), .flag(record.announcesCharge),
            .text(charge.map { Store.day($0.createdAt) }), .integer(SalesSlot.of(record.accountId)),
        ]
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
