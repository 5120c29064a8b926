/// Why a proof of purchase is refused: one case per reason, the same on the client and the server.
///
/// An enum rather than a struct around a private one (the usual shape for errors that can grow),
/// on purpose: every place that turns a refusal into an answer (`/verifyReceipt`'s
/// status, the content route's HTTP error) switches over it exhaustively, so a new kind of
/// refusal cannot be added without saying how it answers; the App Store's reasons (format, chain,
/// OID, expired, signature, bundle, environment) come as one case, ``appStore(_:)``.
public enum ReceiptRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a compact JWS whose header and claims Kiosk can read.
    case malformed
    /// The header names an algorithm Kiosk never signs with (`none`, or one it does not use).
    case algorithmNotAllowed(String)
    /// The signature does not verify with the key the header names: forged or altered.
    case notAuthentic
    /// Signed with a key the store never listed (nil: the header names no key).
    case unknownKey(String?)
    /// Signed by a key the store has retired; the store re-signs the same purchase with a
    /// current key on the next restore.
    case keyRetired(String)
    /// Signed by this store's key but from the other environment (a sandbox receipt shown to a
    /// production store, or the reverse).
    case wrongEnvironment(receipt: StoreEnvironment, store: StoreEnvironment)
    /// Its `iss` is not this store's (nil: it carries none).
    case wrongIssuer(receipt: String?, store: String)
    /// For another account than the one presenting it.
    case otherAccount(transactionId: String, receiptAccount: String, presentedBy: String)
    /// The store's key set cannot be used to check anything.
    case untrustedKeys(String)
    /// An App Store signed transaction refused by ``AppStoreSignedDataVerifier``, for the reason it names.
    case appStore(AppStoreRefusal)

    public var description: String {
        switch self {
        case .malformed:
            return "the receipt is not a signed transaction (JWS); present the signedTransaction the store returned, or run kiosk restore"
        case .algorithmNotAllowed(let alg):
            return "the receipt's header asks for algorithm \"\(alg)\", which the store never signs with; it was forged, and nothing was granted"
        case .notAuthentic:
            return "the receipt's signature does not verify against the store's keys; it was forged or altered"
        case .unknownKey(let kid?):
            return "the receipt was signed by key \(kid), which the store never listed; it was not issued by this store (forged, or another store's)"
        case .unknownKey(nil):
            return "the receipt names no signing key (kid); it was not issued by this store"
        case .keyRetired(let kid):
            return "the receipt was signed by key \(kid), which the store has retired; run kiosk restore to get it re-signed"
        case .wrongEnvironment(let receipt, let store):
            return "the receipt was signed by the \(receipt.rawValue) store, not this \(store.rawValue) one; present it to the \(receipt.rawValue) store, or buy it here"
        case .wrongIssuer(let receipt?, let store):
            return "the receipt was issued by \"\(receipt)\", not by this store (\"\(store)\"); present it to the store that issued it"
        case .wrongIssuer(nil, let store):
            return "the receipt names no issuer (iss), so it was not issued by this store (\"\(store)\"); run kiosk restore to fetch the store's own"
        case .otherAccount(let transactionId, let receiptAccount, let presentedBy):
            return "the receipt of transaction \(transactionId) belongs to account \(receiptAccount), not \(presentedBy); sign in as that account, or restore this account's purchases"
        case .untrustedKeys(let detail):
            return "the store's public keys cannot be used: \(detail)"
        case .appStore(let refusal):
            return refusal.description
        }
    }

    /// True when keys read afresh could give another answer: a key or identity this side has not
    /// seen yet. A bad signature under a known key never changes (a `kid` names one key for good).
    public var mayBeStaleKeys: Bool {
        switch self {
        case .unknownKey, .wrongEnvironment, .wrongIssuer, .untrustedKeys: return true
        case .malformed, .algorithmNotAllowed, .notAuthentic, .keyRetired, .otherAccount, .appStore: return false
        }
    }
}
