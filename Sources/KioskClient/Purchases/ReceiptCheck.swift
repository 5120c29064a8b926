import Foundation
internal import GRDB
import KioskCore

/// Verifies receipts with the store's receipt policy (``KioskReceiptPolicy``, the same the server
/// applies), against the store's keys cached so checks also work offline.
///
/// The client never grants itself anything on the word of its own database: every receipt is
/// verified before it is stored, and again whenever it is shown. This is the one check: what it
/// returns, no caller checks again.
struct ReceiptCheck {
    let database: ClientDatabase

    /// The verified claims of `receipt`: signed by a key the store lists, for the store's
    /// environment and issuer (learnt with its keys), for this device's account, for the
    /// transaction and product `subject` names (when it names them), and for a product ID that
    /// keeps ``ProductID``'s rule (it becomes a folder name).
    /// - Parameter store: the store to fetch the key set from when the cached one does not know
    ///   the key or the store (once per call); nil to check offline, against the cached keys alone.
    /// - Throws: ``ReceiptRefusal``; ``ClientError/receiptRejected(transactionId:reason:)`` for a
    ///   receipt of another transaction or product; ``ClientError/unsafeProductID(_:source:)``; or
    ///   what fetching the keys throws.
    func verifiedReceipt(_ receipt: String, of subject: ReceiptSubject = .any, keysFrom store: StoreAPI?) async throws -> ReceiptClaims {
        let claims = try await checked(receipt, presentedBy: try database.account.current()?.id, keysFrom: store)
        if let transactionId = subject.transactionId, claims.transactionId != transactionId {
            throw ClientError.receiptRejected(transactionId: transactionId, reason: "it is the receipt of transaction \(claims.transactionId)")
        }
        if let productId = subject.productId, claims.productId != productId {
            throw ClientError.receiptRejected(transactionId: claims.transactionId, reason: "it is for \(claims.productId), not \(productId)")
        }
        guard ProductID.isValid(claims.productId) else {
            throw ClientError.unsafeProductID(claims.productId, source: "transaction \(claims.transactionId)")
        }
        return claims
    }

    /// The receipt policy's verdict over the cached key set and, once, over a set fetched afresh
    /// from `store` when the refusal is one that fresher keys could change (the store may have a
    /// key, or an identity, this device has not seen yet, or the cached set was tampered with). Driven from here: each step hands
    /// forward (settings, policy, store), none calls back.
    private func checked(_ receipt: String, presentedBy account: String?, keysFrom store: StoreAPI?) async throws -> ReceiptClaims {
        // A receipt that is not one at all is refused without reading or fetching any key.
        guard KioskReceiptPolicy.isCompactJWS(receipt) else { throw ReceiptRefusal.malformed }
        var refusal = ReceiptRefusal.untrustedKeys("this device holds none of the store's keys yet; connect to the store and run kiosk restore")
        do {
            // A set cached by an older Kiosk names no store: refused here, so it is fetched afresh.
            if let cached = try database.settings.value(Setting.Key.jwks) {
                return try await KioskReceiptPolicy(keySetJSON: Data(cached.utf8)).check(receipt, presentedBy: account)
            }
        } catch let first as ReceiptRefusal {
            refusal = first
        }
        // A signature that fails against the cached set is also checked once against the
        // store's own: the cached set may have been damaged or replaced on this device (the
        // store's key ID over another key), and would otherwise refuse every receipt for good.
        // A forged receipt stays refused against the store's keys.
        guard refusal.mayBeStaleKeys || refusal == .notAuthentic, let store else { throw refusal }
        let fresh = try await store.jwks()
        try database.settings.set(Setting.Key.jwks, to: String(decoding: fresh, as: UTF8.self))
        return try await KioskReceiptPolicy(keySetJSON: fresh).check(receipt, presentedBy: account)
    }
}

/// What a receipt must be the proof of, besides this device's account: the transaction it is
/// held or received for and its product, when the caller knows them.
struct ReceiptSubject: Sendable {
    var transactionId: String?
    var productId: String?

    /// A receipt of any transaction of this device's account.
    static let any = ReceiptSubject()
}
