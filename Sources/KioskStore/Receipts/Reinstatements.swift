import Foundation
import KioskCore
import SQLKit

/// After a restore: a receipt the store signed is a record it cannot lose. A device that bought in
/// the time a backup did not hold keeps the receipt, signed with a key the backup kept; presented
/// again (a download, an update, a repair), it would have been taken for revoked, and the book
/// removed from the device. Instead the store writes the transaction again from the receipt's own
/// claims, as bought, with its charge on the day it was paid, and remembers what it did for the
/// operator (`kiosk admin lost`). The one writer of `reinstatement`.
///
/// What a receipt cannot restore is listed, not guessed: a credit pack (what was spent of it since
/// is not in any receipt), and an account the backup does not hold (whose token it never knew).
public struct Reinstatements: StoreOwner {
    let base: StoreBase

    /// What became of a receipt presented for a transaction the database did not hold.
    public enum Outcome: String, Codable, Sendable {
        /// Written again as bought, with its charge.
        case reinstated
        /// Written again as a free re-buy: the account bought the same book again since the
        /// restore, so it was likely charged twice; the operator refunds one.
        case chargedTwice
        /// A credit pack: its credits are not restored (what was spent of them is unknown).
        case creditsNotRecovered
        /// The account is not in this database (made after the backup): nothing is written.
        case accountUnknown
        /// Written again, but its receipt names no price: it was paid with credits, a code, a
        /// grant or a free re-buy, which the receipt does not say. Credits spent on it since the
        /// backup are not taken back: check the account.
        case reinstatedWithoutPrice
    }

    /// Writes the transaction of an authentic receipt (`claims`, already verified under a key the
    /// store keeps) that the database does not hold, when a receipt can restore it.
    /// - Returns: whether the transaction stands now (written here, or by a concurrent request).
    public func reinstate(_ claims: ReceiptClaims, receipt: String) async throws -> Bool {
        let now = clock.wallNow()
        let cents = Int((claims.price ?? 0) / 10)
        let traceParent = TraceParent.current()
        let outcome: Outcome = try await database.write { db in
            if try await TransactionRows(db).find(claims.transactionId) != nil { return .reinstated }
            func remember(_ outcome: Outcome) async throws -> Outcome {
                try await db.raw(#"""
                    INSERT INTO "reinstatement" ("transactionId", "accountId", "productId", "outcome", "amountCents", "currency", "purchaseDate", "presentedAt")
                    VALUES (\#(bind: claims.transactionId), \#(bind: claims.accountId), \#(bind: claims.productId), \#(bind: outcome.rawValue),
                            \#(bind: cents), \#(bind: claims.currency), \#(bind: claims.purchased), \#(bind: now))
                    ON CONFLICT ("transactionId") DO NOTHING
                    """#).run()
                return outcome
            }
            guard try await AccountRows(db).find(claims.accountId) != nil else { return try await remember(.accountUnknown) }
            guard claims.kind != .consumable else { return try await remember(.creditsNotRecovered) }
            // One first purchase per account and book: bought again since the restore, this one
            // stands as a free re-buy beside it.
            let again = claims.kind == .nonConsumable ? try await db.raw(#"""
                SELECT 1 AS "found" FROM "storeTransaction" WHERE "accountId" = \#(bind: claims.accountId) AND "productId" = \#(bind: claims.productId)
                AND "kind" = 'nonConsumable' AND "status" = 'purchased' AND "paymentMethod" <> 'owned'
                """#).first() != nil : false
            let record = TransactionRecord(
                sequence: nil, id: claims.transactionId, accountId: claims.accountId, productId: claims.productId, kind: claims.kind,
                quantity: claims.quantity, originalTransactionId: claims.originalTransactionId, purchaseDate: claims.purchased,
                expiresDate: claims.expires, status: .purchased, paymentMethod: again ? PaidBy.owned.rawValue : PaidBy.receipt.rawValue,
                idempotencyKey: "receipt:" + claims.transactionId, amountCents: again ? 0 : cents, currency: claims.currency ?? "USD",
                creditsGranted: 0, creditsSpent: 0, signedTransaction: receipt, message: nil, finishedAt: now, createdAt: now,
                revokedAt: nil, revocationReason: nil, requestedMethod: PaidBy.receipt.rawValue,
                appAccountToken: claims.appAccountToken, offerType: claims.offerType, offerPeriod: claims.offerPeriod, storefront: claims.storefront)
            // The charge on the day it was paid, so each day's sales are what they were.
            let charge = again || cents == 0 ? nil : LedgerEntry(
                id: nil, transactionId: record.id, kind: .charge, accountId: record.accountId, amountCents: cents, currency: record.currency,
                reason: "written again from its receipt after a restore", createdAt: claims.purchased, country: claims.storefront,
                taxBasisPoints: nil, taxCents: 0)
            let plan = RecordPurchase.plan(record, revision: nil, delta: 0, charge: charge,
                                           slot: SalesSlot.of(record.accountId, in: db), announcedAt: now, traceParent: traceParent)
            guard try await db.run(plan) != nil else { return try await remember(.accountUnknown) }
            // A free re-buy beside the book bought again charges nothing twice.
            return try await remember(cents == 0 ? .reinstatedWithoutPrice : (again ? .chargedTwice : .reinstated))
        }
        let stands = [.reinstated, .chargedTwice, .reinstatedWithoutPrice].contains(outcome)
        if stands { changes.committed(claims.accountId) }
        logger.notice("a receipt presented for a transaction the database did not hold (after a restore)",
                      metadata: ["transaction": "\(claims.transactionId)", "account": "\(claims.accountId)", "outcome": "\(outcome.rawValue)"])
        return stands
    }

    /// Every receipt presented for a transaction the database did not hold, newest first.
    public func list() async throws -> [AdminReinstatementRow] {
        try await database.read { db in
            try await db.raw(#"""
                SELECT "transactionId", "accountId", "productId", "outcome", "amountCents", "currency", "purchaseDate", "presentedAt"
                FROM "reinstatement" ORDER BY "presentedAt" DESC, "transactionId"
                """#).all(decoding: AdminReinstatementRow.self)
        }
    }
}
