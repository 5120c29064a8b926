import Foundation
import GRDB
import KioskCore

/// Verifies receipts with the store's receipt policy (``KioskReceiptPolicy``, the same the server
/// applies), against the store's keys cached so checks also work offline.
///
/// The client never grants itself anything on the word of its own database: every receipt is
/// verified before it is stored, and again whenever it is shown.
struct ReceiptCheck {
    let database: ClientDatabase

    /// The verified claims of `receipt`, which must be for `accountId`, signed by a key the store
    /// lists, for the store's environment and issuer (learnt with its keys).
    /// - Parameter fetchKeys: fetches the key set from the server when the cached one does not
    ///   know the key or the store (once per call); nil to check offline.
    /// - Throws: ``ReceiptRefusal``, or what `fetchKeys` throws.
    func verify(_ receipt: String, accountId: String?, fetchKeys: (() async throws -> Data)?) async throws -> ReceiptClaims {
        try await KioskReceiptVerifier(keys: CachedKeys(database: database, fetchKeys: fetchKeys))
            .claims(of: receipt, presentedBy: accountId)
    }
}

/// The key set this device last fetched from `/.well-known/jwks.json`, fetched again on demand.
private struct CachedKeys: ReceiptKeySource {
    let database: ClientDatabase
    let fetchKeys: (() async throws -> Data)?

    func currentPolicy() async throws -> KioskReceiptPolicy? {
        guard let cached = try database.setting(Setting.Key.jwks) else { return nil }
        // A set cached by an older Kiosk names no store: refused here, so it is fetched afresh.
        return try await KioskReceiptPolicy(keySetJSON: Data(cached.utf8))
    }

    func freshPolicy(after refusal: ReceiptRefusal, receipt: String) async throws -> KioskReceiptPolicy? {
        // The server may have a key, or an identity, this device has not seen yet.
        guard let fetchKeys else { return nil }
        let fresh = try await fetchKeys()
        try database.setSetting(Setting.Key.jwks, to: String(decoding: fresh, as: UTF8.self))
        return try await KioskReceiptPolicy(keySetJSON: fresh)
    }
}
