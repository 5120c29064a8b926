import Foundation
import GRDB
import KioskCore

/// Verifies receipts against the store's public keys, cached so checks also work offline.
///
/// The client never grants itself anything on the word of its own database: every receipt is
/// verified before it is stored, and again whenever it is shown.
struct ReceiptCheck {
    let database: ClientDatabase

    /// The verified claims of `receipt`, which must be for `accountId`.
    /// - Parameter fetchKeys: fetches the JWKS from the server when the cached one does not know the key.
    func verify(_ receipt: String, accountId: String?, fetchKeys: (() async throws -> Data)?) async throws -> ReceiptClaims {
        let cached = try database.setting(Setting.Key.jwks)
        var claims: ReceiptClaims?
        var lastError: any Error = ReceiptError.notAuthentic
        if let cached {
            do {
                claims = try await ReceiptVerifier(jwksJSON: Data(cached.utf8)).verify(receipt)
            } catch {
                lastError = error
            }
        }
        if claims == nil, let fetchKeys {
            // The server may have a key this device has not seen yet: fetch the set once and retry.
            let fresh = try await fetchKeys()
            try database.setSetting(Setting.Key.jwks, to: String(decoding: fresh, as: UTF8.self))
            do {
                claims = try await ReceiptVerifier(jwksJSON: fresh).verify(receipt)
            } catch {
                lastError = error
            }
        }
        guard let claims else {
            // Not forged: signed by a key the store has since retired (the purchase stands).
            if case ReceiptError.notAuthentic = lastError, let kid = ReceiptVerifier.keyID(of: receipt),
               let known = try database.setting(Setting.Key.jwks), !known.contains("\"\(kid)\"") {
                throw ReceiptError.keyRetired(kid)
            }
            throw lastError
        }
        if let accountId, claims.accountId != accountId {
            throw ClientError.receiptRejected(transactionId: claims.transactionId, reason: "it belongs to another account")
        }
        return claims
    }
}
