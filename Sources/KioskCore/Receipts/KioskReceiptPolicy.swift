import Foundation
import JWTKit

/// The one rule for Kiosk's own receipts, applied alike by the client and the server: format,
/// algorithm, key (listed, retired or unknown), signature, environment, issuer and account, in
/// that order, each refusal a ``ReceiptRefusal``.
///
/// It checks against one ``ReceiptKeySet`` and reads nothing itself; fetching fresher keys when a
/// refusal may be due to stale ones is ``KioskReceiptVerifier``'s part.
public struct KioskReceiptPolicy: Sendable {
    /// The algorithms Kiosk signs with (Ed25519); anything else in a header is a forgery.
    public static let algorithms: Set<String> = ["EdDSA"]

    private let collection: JWTKeyCollection
    private let listed: Set<String>
    private let retired: Set<String>
    /// The store the receipts must come from.
    public let identity: StoreIdentity

    /// Trusts exactly the keys of `keySet`, for the store it names.
    /// - Throws: ``ReceiptRefusal/untrustedKeys(_:)`` when a key cannot be read or the set names
    ///   no store (an older server's).
    public init(keySet: ReceiptKeySet) async throws(ReceiptRefusal) {
        guard let identity = keySet.identity else {
            throw .untrustedKeys("the key set does not name its store (issuer and environment), so it comes from an older Kiosk; run kiosk restore to fetch it again, and if this persists, update kiosk serve")
        }
        let collection = JWTKeyCollection()
        do {
            try await collection.add(jwks: JWKS(keys: keySet.keys))
        } catch {
            throw .untrustedKeys("\(error)")
        }
        self.collection = collection
        self.listed = Set(keySet.keys.compactMap { $0.keyIdentifier?.string })
        self.retired = Set(keySet.retired)
        self.identity = identity
    }

    /// Trusts exactly the keys of a key set document (the body of `/.well-known/jwks.json`).
    public init(keySetJSON: Data) async throws(ReceiptRefusal) {
        let keySet: ReceiptKeySet
        do {
            keySet = try JSONDecoder().decode(ReceiptKeySet.self, from: keySetJSON)
        } catch {
            throw .untrustedKeys("the key set is not a JWKS document")
        }
        try await self.init(keySet: keySet)
    }

    /// The verified claims of `receipt`.
    /// - Parameter accountId: the account presenting it, when known; a receipt of another is refused.
    /// - Throws: ``ReceiptRefusal``, the first check that fails.
    public func check(_ receipt: String, presentedBy accountId: String? = nil) async throws(ReceiptRefusal) -> ReceiptClaims {
        let header = try Self.header(of: receipt)
        guard let alg = header.alg, Self.algorithms.contains(alg) else {
            throw .algorithmNotAllowed(header.alg ?? "")
        }
        guard let kid = header.kid, listed.contains(kid) else {
            if let kid = header.kid, retired.contains(kid) { throw .keyRetired(kid) }
            throw .unknownKey(header.kid)
        }
        let claims: ReceiptClaims
        do {
            claims = try await collection.verify(receipt, as: ReceiptClaims.self)
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw .malformed
        } catch is DecodingError {
            throw .malformed
        } catch {
            throw .notAuthentic
        }
        // Environment before issuer: a Kiosk store's issuer names its environment, and "a sandbox
        // receipt sent to production" says more than "another issuer".
        guard claims.environment == identity.environment else {
            throw .wrongEnvironment(receipt: claims.environment, store: identity.environment)
        }
        guard claims.issuer == identity.issuer else {
            throw .wrongIssuer(receipt: claims.issuer.isEmpty ? nil : claims.issuer, store: identity.issuer)
        }
        if let accountId, claims.accountId != accountId {
            throw .otherAccount(transactionId: claims.transactionId, receiptAccount: claims.accountId, presentedBy: accountId)
        }
        return claims
    }

    /// The `kid` a compact JWS names in its header, unverified (to say which key signed it).
    public static func keyID(of receipt: String) -> String? {
        (try? header(of: receipt))?.kid
    }

    /// True for three dot-separated parts with a header and claims (the signature may be empty,
    /// for the policy to refuse `alg: none` by name).
    public static func isCompactJWS(_ receipt: String) -> Bool {
        let parts = receipt.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && !parts[0].isEmpty && !parts[1].isEmpty
    }

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    /// The header of a compact JWS: three dot-separated parts, the first base64url JSON.
    private static func header(of receipt: String) throws(ReceiptRefusal) -> Header {
        guard isCompactJWS(receipt), let first = receipt.split(separator: ".").first else { throw .malformed }
        var base64 = first.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let header = try? JSONDecoder().decode(Header.self, from: data) else {
            throw .malformed
        }
        return header
    }
}
