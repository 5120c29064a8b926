/// Where a side keeps the store's receipt keys: the server reads its database, the client its
/// cached copy of `/.well-known/jwks.json`.
public protocol ReceiptKeySource {
    /// The policy for the keys held now; nil when none are held yet.
    /// - Throws: ``ReceiptRefusal/untrustedKeys(_:)`` when the held keys cannot be used; any other
    ///   error when they cannot be read.
    func currentPolicy() async throws -> KioskReceiptPolicy?

    /// The policy for keys read afresh after `refusal` (which may be due to stale keys), or nil
    /// when no fresher keys can be had (offline, or read again too recently).
    func freshPolicy(after refusal: ReceiptRefusal, receipt: String) async throws -> KioskReceiptPolicy?
}

/// Kiosk's own receipts: ``KioskReceiptPolicy`` over the keys a ``ReceiptKeySource`` holds, read
/// afresh at most once per check when the refusal is one that fresher keys could change.
public struct KioskReceiptVerifier<Keys: ReceiptKeySource>: PurchaseProofVerifier {
    public let keys: Keys

    public init(keys: Keys) {
        self.keys = keys
    }

    public var kind: PurchaseProofKind { .kioskReceipt }

    public func verify(_ proof: String, presentedBy accountId: String?) async throws -> VerifiedPurchase {
        VerifiedPurchase(kind: kind, claims: try await claims(of: proof, presentedBy: accountId), receipt: proof)
    }

    /// The verified claims of `receipt`.
    /// - Throws: ``ReceiptRefusal``; other errors when the keys could not be read or fetched.
    public func claims(of receipt: String, presentedBy accountId: String?) async throws -> ReceiptClaims {
        // A receipt that is not one at all is refused without reading or fetching any key.
        guard KioskReceiptPolicy.isCompactJWS(receipt) else { throw ReceiptRefusal.malformed }
        var refusal = ReceiptRefusal.untrustedKeys("this device holds none of the store's keys yet; connect to the store and run kiosk restore")
        do {
            if let policy = try await keys.currentPolicy() {
                return try await policy.check(receipt, presentedBy: accountId)
            }
        } catch let first as ReceiptRefusal {
            refusal = first
        }
        guard refusal.mayBeStaleKeys, let fresh = try await keys.freshPolicy(after: refusal, receipt: receipt) else {
            throw refusal
        }
        return try await fresh.check(receipt, presentedBy: accountId)
    }
}

extension KioskReceiptVerifier: Sendable where Keys: Sendable {}
