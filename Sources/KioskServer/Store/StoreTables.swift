import Foundation
import KioskCore
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
    /// when given, the charge's ledger entry, as one statement (data-modifying CTEs, which SQLite
    /// lacks). The inserts select from the compare-and-set's row, so an account that moved on
    /// makes the statement write nothing; a unique index refusing either insert undoes it all.
    /// A null is sent without a type, and in a SELECT list nothing gives it one: hence the casts.
    /// - Returns: the transaction with its sequence, or nil when the account had moved on.
    func insert(_ record: TransactionRecord, ifAccountAt revision: Int64, settingCredits credits: Int, charge: LedgerEntry?) async throws -> TransactionRecord? {
        let ledger: SQLQueryString = if let charge {
            #"""
            , "charged" AS (
                INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
                SELECT \#(bind: charge.transactionId), \#(bind: charge.kind.rawValue), \#(bind: charge.accountId), \#(bind: charge.amountCents),
                    \#(bind: charge.currency), \#(bind: charge.reason)::text, \#(bind: charge.createdAt)
                FROM "recorded"
            )
            """#
        } else {
            ""
        }
        let row = try await raw(#"""
            WITH "advanced" AS (
                UPDATE "account" SET "revision" = \#(bind: revision + 1), "credits" = \#(bind: credits)
                WHERE "id" = \#(bind: record.accountId) AND "revision" = \#(bind: revision) RETURNING "id"
            ), "recorded" AS (
                INSERT INTO "storeTransaction" ("id", "accountId", "productId", "kind", "quantity", "originalTransactionId",
                    "purchaseDate", "expiresDate", "status", "paymentMethod", "idempotencyKey", "amountCents", "currency",
                    "creditsGranted", "creditsSpent", "signedTransaction", "message", "finishedAt", "createdAt", "revokedAt", "revocationReason")
                SELECT \#(bind: record.id), \#(bind: record.accountId), \#(bind: record.productId), \#(bind: record.kind.rawValue),
                    \#(bind: record.quantity), \#(bind: record.originalTransactionId), \#(bind: record.purchaseDate)::timestamptz, \#(bind: record.expiresDate)::timestamptz,
                    \#(bind: record.status.rawValue), \#(bind: record.paymentMethod), \#(bind: record.idempotencyKey), \#(bind: record.amountCents),
                    \#(bind: record.currency), \#(bind: record.creditsGranted), \#(bind: record.creditsSpent), \#(bind: record.signedTransaction)::text,
                    \#(bind: record.message)::text, \#(bind: record.finishedAt)::timestamptz, \#(bind: record.createdAt), \#(bind: record.revokedAt)::timestamptz,
                    \#(bind: record.revocationReason)::text
                FROM "advanced"
                RETURNING "sequence"
            )\#(ledger)
            SELECT "sequence" FROM "recorded"
            """#).first()
        guard let row else { return nil }
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
