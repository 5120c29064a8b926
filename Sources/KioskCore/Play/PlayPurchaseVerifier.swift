import Crypto
import Foundation
import _CryptoExtras

/// A Google Play purchase as the app got it from Play Billing (`Purchase.getOriginalJson()`),
/// once its signature was checked: the fields Kiosk reads.
public struct PlayPurchase: Decodable, Sendable, Equatable {
    public var orderId: String?
    public var packageName: String
    public var productId: String
    /// Milliseconds since 1970.
    public var purchaseTime: Int64
    /// 0 purchased, 1 cancelled, 2 pending.
    public var purchaseState: Int
    /// The purchase's identity at Play: one grant per token.
    public var purchaseToken: String
    public var quantity: Int?
    public var acknowledged: Bool?
    /// What the app passed as `setObfuscatedAccountId`, when it did (Kiosk's account ID).
    public var obfuscatedAccountId: String?
}

/// Checks a Google Play purchase's signature, as Play signs it, before a byte of the purchase is
/// read: RSASSA-PKCS1-v1_5 with SHA-1 over the purchase JSON's exact bytes, under the app's
/// licensing key (the base64 RSA public key in the Play Console, Monetization setup), with
/// swift-crypto (`_CryptoExtras`). Then the purchase must be the configured app's.
public struct PlayPurchaseVerifier: Sendable {
    /// Why a purchase is refused, in a sentence; `code` is the wire's.
    public struct Refusal: Error, Equatable, CustomStringConvertible, Sendable {
        public let code: String
        public let reason: String
        public var description: String { reason }
    }

    let key: _RSA.Signing.PublicKey
    public let packageName: String

    /// - Parameter publicKey: the Play Console's base64 key (DER SubjectPublicKeyInfo), or the same in PEM.
    /// - Throws: ``Refusal`` `bad_key` for a text that is no RSA public key of 2048 bits or more.
    public init(publicKey text: String, packageName: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            if trimmed.hasPrefix("-----BEGIN") {
                key = try _RSA.Signing.PublicKey(pemRepresentation: trimmed)
            } else if let der = Data(base64Encoded: trimmed.filter { !$0.isWhitespace }) {
                key = try _RSA.Signing.PublicKey(derRepresentation: der)
            } else {
                throw Refusal(code: "bad_key", reason: "the Play public key is neither base64 nor PEM")
            }
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal(code: "bad_key", reason: "the Play public key is not an RSA public key of 2048 bits or more (the Play Console's base64 licensing key)")
        }
        self.packageName = packageName
    }

    /// The purchase, once its signature is the key's and it is the configured app's.
    /// - Parameters:
    ///   - json: the purchase JSON exactly as Play returned it (its bytes are what was signed).
    ///   - signature: the base64 signature Play returned with it.
    public func verify(json: Data, signature: String) throws -> PlayPurchase {
        guard let bytes = Data(base64Encoded: signature.trimmingCharacters(in: .whitespacesAndNewlines)), !bytes.isEmpty else {
            throw Refusal(code: "signature", reason: "the signature is not base64")
        }
        let digest = Insecure.SHA1.hash(data: json)
        guard key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: bytes), for: digest, padding: .insecurePKCS1v1_5) else {
            throw Refusal(code: "signature", reason: "the signature does not match this purchase under the app's Play public key")
        }
        let purchase: PlayPurchase
        do {
            purchase = try JSONDecoder().decode(PlayPurchase.self, from: json)
        } catch {
            throw Refusal(code: "format", reason: "the signed purchase is not a Play purchase (packageName, productId, purchaseTime, purchaseState, purchaseToken)")
        }
        guard purchase.packageName == packageName else {
            throw Refusal(code: "package", reason: "the purchase is for the app \(purchase.packageName.prefix(100)), not \(packageName)")
        }
        return purchase
    }
}
