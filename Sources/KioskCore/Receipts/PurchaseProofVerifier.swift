import Foundation

/// A kind of proof of purchase, named as the `Authorization` scheme that carries it
/// (`Authorization: Receipt <JWS>`).
public struct PurchaseProofKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// A receipt Kiosk signed itself (``KioskReceiptVerifier``).
    public static let kioskReceipt = PurchaseProofKind(rawValue: "Receipt")

    /// A StoreKit 2 signed transaction (`Authorization: AppStore <JWS>`), checked by
    /// ``AppStoreSignedDataVerifier``.
    public static let appStore = PurchaseProofKind(rawValue: "AppStore")

    public var description: String { rawValue }
}

/// A proof that passed its verifier's checks: what it proves, in Kiosk's terms.
public struct VerifiedPurchase: Sendable, Equatable {
    /// Which verifier accepted it.
    public var kind: PurchaseProofKind
    /// The purchase it proves. A verifier of another store's proofs maps that store's
    /// transaction onto these (its product onto the catalog's, its issuer and environment).
    public var claims: ReceiptClaims
    /// When the proof itself says its transaction was revoked (an App Store transaction re-signed
    /// after a refund carries its revocationDate); such a proof entitles nothing.
    public var revoked: Date?
    /// The store's own receipt as presented (Kiosk receipts only): what a transaction a restore
    /// lost is written again from.
    public var receipt: String?

    public init(kind: PurchaseProofKind, claims: ReceiptClaims, revoked: Date? = nil, receipt: String? = nil) {
        self.kind = kind
        self.claims = claims
        self.revoked = revoked
        self.receipt = receipt
    }
}

/// Checks one kind of proof of purchase completely, so that no caller re-checks a field.
///
/// Kiosk's own receipts are ``KioskReceiptVerifier``; an App Store signed transaction (issue 33)
/// is a second conformance beside it, registered in ``PurchaseProofVerifiers`` under its own
/// scheme, and the routes that take proofs do not change.
public protocol PurchaseProofVerifier {
    /// The scheme its proofs come under.
    var kind: PurchaseProofKind { get }

    /// What `proof` proves.
    /// - Parameter accountId: the account presenting it, when known; another account's proof is refused.
    /// - Throws: ``ReceiptRefusal`` when the proof is refused. Any other error means it could not be
    ///   checked now (the keys could not be read or fetched) and says nothing about the proof.
    func verify(_ proof: String, presentedBy accountId: String?) async throws -> VerifiedPurchase
}

/// The verifiers a store accepts, one per kind of proof, chosen by the proof's scheme.
public struct PurchaseProofVerifiers: Sendable {
    private let verifiers: [PurchaseProofKind: any PurchaseProofVerifier & Sendable]

    public init(_ verifiers: [any PurchaseProofVerifier & Sendable]) {
        self.verifiers = Dictionary(verifiers.map { ($0.kind, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The schemes accepted, sorted (for messages naming them).
    public var kinds: [PurchaseProofKind] { verifiers.keys.sorted { $0.rawValue < $1.rawValue } }

    /// The verifier for `kind`, if the store accepts that kind.
    public func verifier(for kind: PurchaseProofKind) -> (any PurchaseProofVerifier & Sendable)? {
        verifiers[kind]
    }

    /// The verifier and the proof an `Authorization` header carries (`<scheme> <proof>`), or nil
    /// when it names no scheme the store accepts.
    public func verifier(forAuthorization header: String) -> (verifier: any PurchaseProofVerifier & Sendable, proof: String)? {
        guard let space = header.firstIndex(of: " ") else { return nil }
        let scheme = PurchaseProofKind(rawValue: String(header[..<space]))
        guard let verifier = verifiers[scheme] else { return nil }
        return (verifier, header[header.index(after: space)...].trimmingCharacters(in: .whitespaces))
    }
}
