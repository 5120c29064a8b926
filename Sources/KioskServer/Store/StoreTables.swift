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

    /// Inserts a transaction and returns it with the sequence the database gave it.
    ///
    /// Spelled out rather than `insert(into:).model(record)`: SQLKit's model encoder and its quoting
    /// of 21 identifiers came to a tenth of a purchase's CPU, spent inside SQLite's serial writer.
    /// (`StoreTablesTests` checks that every field is written.)
    func insert(_ record: TransactionRecord) async throws -> TransactionRecord {
        let row = try await raw(#"""
            INSERT INTO "storeTransaction" ("id", "accountId", "productId", "kind", "quantity", "originalTransactionId",
                "purchaseDate", "expiresDate", "status", "paymentMethod", "idempotencyKey", "amountCents", "currency",
                "creditsGranted", "creditsSpent", "signedTransaction", "message", "finishedAt", "createdAt", "revokedAt", "revocationReason")
            VALUES (\#(bind: record.id), \#(bind: record.accountId), \#(bind: record.productId), \#(bind: record.kind.rawValue),
                \#(bind: record.quantity), \#(bind: record.originalTransactionId), \#(bind: record.purchaseDate), \#(bind: record.expiresDate),
                \#(bind: record.status.rawValue), \#(bind: record.paymentMethod), \#(bind: record.idempotencyKey), \#(bind: record.amountCents),
                \#(bind: record.currency), \#(bind: record.creditsGranted), \#(bind: record.creditsSpent), \#(bind: record.signedTransaction),
                \#(bind: record.message), \#(bind: record.finishedAt), \#(bind: record.createdAt), \#(bind: record.revokedAt),
                \#(bind: record.revocationReason))
            RETURNING "sequence"
            """#).first()
        var inserted = record
        inserted.sequence = try row?.decode(column: "sequence", as: Int64.self)
        return inserted
    }

    /// The compare-and-set a payment commits under: the account moves to its next revision with
    /// its new balance only while it is still at `revision`.
    /// - Returns: whether it moved.
    func advance(account id: String, from revision: Int64, credits: Int) async throws -> Bool {
        try await raw(#"""
            UPDATE "account" SET "revision" = \#(bind: revision + 1), "credits" = \#(bind: credits)
            WHERE "id" = \#(bind: id) AND "revision" = \#(bind: revision) RETURNING "id"
            """#).all().count == 1
    }

    /// PostgreSQL only: ``advance(account:from:credits:)``, ``insert(_:)-(TransactionRecord)`` and,
    /// when given, the charge's ledger entry, as one statement (``RecordPurchase``).
    /// - Returns: the transaction with its sequence, or nil when the account had moved on.
    func insert(_ record: TransactionRecord, ifAccountAt revision: Int64, settingCredits credits: Int, charge: LedgerEntry?) async throws -> TransactionRecord? {
        let statement = RecordPurchase(record: record, revision: revision, credits: credits, charge: charge)
        guard let row = try await rows(statement).first else { return nil }
        var inserted = record
        inserted.sequence = try row.decode(column: "sequence", as: Int64.self)
        return inserted
    }

    /// Writes every column of a transaction that can change after it is first recorded.
    func update(_ record: TransactionRecord) async throws {
        try await update("storeTransaction")
            .set("status", to: record.status.rawValue)
            .set("paymentMethod", to: record.paymentMethod)
            .set("originalTransactionId", to: record.originalTransactionId)
            .set("purchaseDate", to: record.purchaseDate)
            .set("expiresDate", to: record.expiresDate)
            .set("amountCents", to: record.amountCents)
            .set("creditsGranted", to: record.creditsGranted)
            .set("creditsSpent", to: record.creditsSpent)
            .set("signedTransaction", to: record.signedTransaction)
            .set("message", to: record.message)
            .set("finishedAt", to: record.finishedAt)
            .set("revokedAt", to: record.revokedAt)
            .set("revocationReason", to: record.revocationReason)
            .where("id", .equal, record.id)
            .run()
    }

    /// Spelled out for the reason `insert(_: TransactionRecord)` is.
    func insert(_ entry: LedgerEntry) async throws {
        try await raw(#"""
            INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
            VALUES (\#(bind: entry.transactionId), \#(bind: entry.kind.rawValue), \#(bind: entry.accountId), \#(bind: entry.amountCents),
                \#(bind: entry.currency), \#(bind: entry.reason), \#(bind: entry.createdAt))
            """#).run()
    }

    func ledger(_ filter: (SQLSelectBuilder) -> SQLSelectBuilder) async throws -> [LedgerEntry] {
        try await filter(select().column("*").from("ledgerEntry")).orderBy("id").all(decoding: LedgerEntry.self)
    }
}

extension Date {
    /// Now, to the millisecond: what both engines store exactly, so a date read back compares
    /// equal to the one written.
    static var storeNow: Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded() / 1000)
    }
}

/// A new purchase's write on PostgreSQL, one statement of data-modifying CTEs (which SQLite lacks):
/// the compare-and-set moves the account from `$2` to its next revision, and the inserts select
/// from its row, so an account that moved on makes the statement write nothing; the ledger entry
/// is written only when `$24` (a charge) is true. A unique index refusing either insert undoes it all.
struct RecordPurchase: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        WITH "advanced" AS (
            UPDATE "account" SET "revision" = $2 + 1, "credits" = $3 WHERE "id" = $1 AND "revision" = $2 RETURNING "id"
        ), "recorded" AS (
            INSERT INTO "storeTransaction" ("id", "accountId", "productId", "kind", "quantity", "originalTransactionId",
                "purchaseDate", "expiresDate", "status", "paymentMethod", "idempotencyKey", "amountCents", "currency",
                "creditsGranted", "creditsSpent", "signedTransaction", "message", "finishedAt", "createdAt", "revokedAt", "revocationReason")
            SELECT $4, $1, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23
            FROM "advanced"
            RETURNING "sequence"
        ), "charged" AS (
            INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
            SELECT $4, $25, $1, $26, $27, $28, $29
            FROM "recorded" WHERE $24
        )
        SELECT "sequence" FROM "recorded"
        """#
    static let parameterTypes: [PostgresDataType] = [
        .text, .int8, .int8, .text, .text, .text, .int8, .text, .timestamptz, .timestamptz, .text, .text, .text, .int8, .text,
        .int8, .int8, .text, .text, .timestamptz, .timestamptz, .timestamptz, .text, .bool, .text, .int8, .text, .text, .timestamptz,
    ]

    let record: TransactionRecord
    let revision: Int64
    let credits: Int
    let charge: LedgerEntry?

    var parameters: [StatementParameter] {
        [
            .text(record.accountId), .integer(revision), .integer(Int64(credits)),
            .text(record.id), .text(record.productId), .text(record.kind.rawValue), .integer(Int64(record.quantity)),
            .text(record.originalTransactionId), .date(record.purchaseDate), .date(record.expiresDate), .text(record.status.rawValue),
            .text(record.paymentMethod), .text(record.idempotencyKey), .integer(Int64(record.amountCents)), .text(record.currency),
            .integer(Int64(record.creditsGranted)), .integer(Int64(record.creditsSpent)), .text(record.signedTransaction),
            .text(record.message), .date(record.finishedAt), .date(record.createdAt), .date(record.revokedAt), .text(record.revocationReason),
            .flag(charge != nil), .text(charge?.kind.rawValue), .integer(Int64(charge?.amountCents ?? 0)), .text(charge?.currency),
            .text(charge?.reason), .date(charge?.createdAt),
        ]
    }
}
