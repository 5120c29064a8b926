import Foundation
import JWTKit

/// Checks a receipt's signature against a set of public keys (a JWKS), offline.
public struct ReceiptVerifier: Sendable {
    private let keys: JWTKeyCollection

    /// Trusts exactly the keys of `jwks`.
    /// - Throws: ``ReceiptError/untrustedKeys(_:)`` when a key cannot be read.
    public init(jwks: JWKS) async throws {
        let keys = JWTKeyCollection()
        do {
            try await keys.add(jwks: jwks)
        } catch {
            throw ReceiptError.untrustedKeys("\(error)")
        }
        self.keys = keys
    }

    /// Trusts exactly the keys of a JWKS document (the body of `/.well-known/jwks.json`).
    public init(jwksJSON: Data) async throws {
        let jwks: JWKS
        do {
            jwks = try JSONDecoder().decode(JWKS.self, from: jwksJSON)
        } catch {
            throw ReceiptError.untrustedKeys("the key set is not a JWKS document")
        }
        try await self.init(jwks: jwks)
    }

    /// The verified claims of `receipt`.
    /// - Throws: ``ReceiptError/malformed`` when it is not a JWS at all,
    ///   ``ReceiptError/notAuthentic`` when no trusted key signed it (forged, tampered, `alg: none`).
    public func verify(_ receipt: String) async throws -> ReceiptClaims {
        let parts = receipt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else {
            throw ReceiptError.malformed
        }
        do {
            return try await keys.verify(receipt, as: ReceiptClaims.self)
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw ReceiptError.malformed
        } catch {
            throw ReceiptError.notAuthentic
        }
    }
}

extension ReceiptVerifier {
    /// The `kid` a compact JWS names in its header, unverified (to say which key signed it).
    public static func keyID(of receipt: String) -> String? {
        guard let header = receipt.split(separator: ".").first else { return nil }
        var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["kid"] as? String
    }
}

/// Why a receipt cannot be used.
public enum ReceiptError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed
    case notAuthentic
    /// Signed by a key the store no longer lists: retired after the receipt was issued. The store
    /// hands out the same purchase re-signed with a current key.
    case keyRetired(String)
    case untrustedKeys(String)

    public var description: String {
        switch self {
        case .malformed: return "the receipt is not a signed transaction (JWS)"
        case .notAuthentic: return "the receipt's signature does not verify against the store's keys; it was forged or altered"
        case .keyRetired(let kid): return "the receipt was signed by key \(kid), which the store has retired; run kiosk restore to get it re-signed"
        case .untrustedKeys(let detail): return "the store's public keys cannot be used: \(detail)"
        }
    }
}
