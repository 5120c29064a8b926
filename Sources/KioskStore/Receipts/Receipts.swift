import Foundation
import SQLKit

/// Receipts: what a proof of purchase entitles (Kiosk's own or the App Store's), the legacy
/// `verifyReceipt` answer, and receipts signed again under a current key.
public struct Receipts: StoreOwner {
    let base: StoreBase

    /// `records` with every receipt signed by a retired key signed again with a current one, and
    /// the new receipt saved in place of the old (so each is re-signed once, not on every listing).
    ///
    /// Called on what the account's devices restore from (the transaction list) and on a replayed
    /// payment's answer: after `kiosk keys retire` those must still hand out receipts that verify,
    /// or one retired key makes every purchase it signed unrestorable.
    func withCurrentReceipts(_ records: [TransactionRecord]) async throws -> [TransactionRecord] {
        var current = records
        for index in current.indices {
            guard let old = current[index].signedTransaction else { continue }
            let id = current[index].id
            let fresh: String
            do {
                guard let reissued = try await keys.reissue(old) else { continue }
                fresh = reissued
            } catch {
                // A stored receipt that is not a JWS at all: hand it out as it is (the client
                // refuses that one alone) rather than fail the whole list.
                logger.error("a stored receipt cannot be re-signed", metadata: ["transaction": "\(id)", "error": "\(error)"])
                continue
            }
            // Only over the receipt it replaces: a concurrent listing that got there first wins,
            // and either receipt verifies.
            let accountId = current[index].accountId
            // A receipt signed again is a change the account's other devices learn of through the feed.
            let changed = try await database.write { db in
                // The account row first, as every writer of an account; a gap in its change numbers is harmless.
                let change = try await AccountRows(db).nextChange(of: accountId)
                return try await TransactionRows(db).resign(id, from: old, to: fresh, change: change)
            }
            if changed { changes.committed(accountId) }
            current[index].signedTransaction = fresh
            logger.info("re-signed a receipt whose key was retired", metadata: ["transaction": "\(id)"])
        }
        return current
    }
}
