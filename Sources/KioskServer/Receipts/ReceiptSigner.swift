import Crypto
import Foundation
import JWTKit
import KioskCore

/// Signs receipts with the server's Ed25519 key and publishes the public half as a JWKS.
///
/// The key is created on first start in the data folder (`signing-key.json`, mode 0600) and kept
/// across restarts, so receipts signed yesterday still verify today.
public struct ReceiptSigner: Sendable {
    public let keyID: String
    private let keys: JWTKeyCollection
    /// The body of `/.well-known/jwks.json`.
    public let jwks: JWKS

    /// Loads the signing key from `dataDirectory`, creating it (mode 0600 from the start) the first time.
    /// - Throws: ``ServerSetupError`` when the key file exists but cannot be read or parsed: it is
    ///   never replaced silently, because every receipt signed with it would stop verifying.
    public init(dataDirectory: URL) async throws {
        let file = dataDirectory.appendingPathComponent("signing-key.json")
        let data: Data
        if let existing = try SecretFile.read(file, what: "signing key (receipts signed with it would stop verifying)") {
            data = existing
        } else {
            let key = Curve25519.Signing.PrivateKey()
            let publicKey = key.publicKey.rawRepresentation
            let fresh = StoredKey(kid: "ed25519-" + FileDigest.sha256(of: publicKey).prefix(16), d: Self.base64URL(key.rawRepresentation))
            data = try SecretFile.create(file, data: JSONEncoder.kiosk.encode(fresh), what: "signing key")
        }
        let stored: StoredKey
        let privateKey: EdDSA.PrivateKey
        do {
            stored = try JSONDecoder().decode(StoredKey.self, from: data)
            privateKey = try EdDSA.PrivateKey(d: stored.d, curve: .ed25519)
        } catch {
            throw ServerSetupError(path: file.path, problem: "is not a signing key Kiosk can read",
                action: "restore it from a backup; only if it is lost for good, move it aside to make a new key (receipts signed with the old one will stop verifying)")
        }
        let keys = JWTKeyCollection()
        await keys.add(eddsa: privateKey, kid: JWKIdentifier(string: stored.kid))
        self.keys = keys
        self.keyID = stored.kid
        self.jwks = JWKS(keys: [
            .octetKeyPair(
                .eddsa, identifier: JWKIdentifier(string: stored.kid),
                x: Self.base64URL(privateKey.publicKey.rawRepresentation), y: nil, curve: .ed25519),
        ])
    }

    /// The compact JWS of `claims`, with this key's `kid` in its header.
    public func sign(_ claims: ReceiptClaims) async throws -> String {
        try await keys.sign(claims, kid: JWKIdentifier(string: keyID))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private struct StoredKey: Codable {
        var kid: String
        /// The raw private key, base64url, as a JWK's `d`.
        var d: String
    }
}
