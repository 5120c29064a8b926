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
    func insert(_ record: TransactionRecord) async throws -> TransactionRecord {
        let row = try await insert(into: "storeTransaction").model(record).returning("sequence").first()
        var inserted = record
        inserted.sequence = try row?.decode(column: "sequence", as: Int64.self)
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

    func insert(_ entry: LedgerEntry) async throws {
        try await insert(into: "ledgerEntry").model(entry).run()
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
