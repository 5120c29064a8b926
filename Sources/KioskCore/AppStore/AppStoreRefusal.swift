import Foundation

/// Why App Store signed data (a transaction, renewal info or a notification) is refused: one case
/// per check of ``AppStoreSignedDataVerifier``, in the order it makes them.
public enum AppStoreRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a compact JWS with a readable header and payload (or the payload lacks `signedDate`).
    case format(String)
    /// The header's `alg` is not ES256, the only one the App Store signs with.
    case algorithm(String)
    /// The `x5c` chain is missing, not three certificates, or does not lead to a pinned root.
    case chain(String)
    /// A certificate of the chain lacks the extension that marks Apple's App Store signing certificates.
    case oid(String)
    /// A certificate of the chain was not valid at the payload's `signedDate`.
    case expired(String)
    /// The signature does not verify with the leaf certificate's key: forged or altered.
    case signature
    /// Signed for another app (`bundleId`, or `appAppleId` in production).
    case bundle(expected: String, found: String)
    /// Signed in another environment than the one configured (sandbox against production, or the reverse).
    case environment(expected: String, found: String)

    /// A short name of the reason (for logs, JSON output and error codes).
    public var reason: String {
        switch self {
        case .format: return "format"
        case .algorithm: return "algorithm"
        case .chain: return "chain"
        case .oid: return "oid"
        case .expired: return "expired"
        case .signature: return "signature"
        case .bundle: return "bundle"
        case .environment: return "environment"
        }
    }

    public var description: String {
        switch self {
        case .format(let detail):
            return "the App Store proof is not signed data Kiosk can read (\(detail)); present the JWS StoreKit returned (Transaction.jwsRepresentation)"
        case .algorithm(let alg):
            return "the App Store proof's header asks for algorithm \"\(alg)\"; the App Store signs with ES256 only, so it was not signed by the App Store"
        case .chain(let detail):
            return "the App Store proof's certificate chain is refused: \(detail); it was not signed by the App Store (or --app-store-root names another root)"
        case .oid(let detail):
            return "the App Store proof's certificate chain is refused: \(detail); it was not signed by the App Store"
        case .expired(let detail):
            return "the App Store proof's certificate chain was not valid when it was signed: \(detail)"
        case .signature:
            return "the App Store proof's signature does not verify with its certificate's key; it was forged or altered"
        case .bundle(let expected, let found):
            return "the App Store proof is for app \(found), not \(expected); present it to that app's store, or check --app-store-bundle-id and --app-store-app-id"
        case .environment(let expected, let found):
            return "the App Store proof comes from the \(found) environment, not \(expected); present it to the \(found) store, or check --app-store-environment"
        }
    }
}
