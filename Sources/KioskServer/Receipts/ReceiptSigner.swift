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

    /// Loads the signing key from `dataDirectory`, creating it the first time.
    public init(dataDirectory: URL) async throws {
        let file = dataDirectory.appendingPathComponent("signing-key.json")
        let stored: StoredKey
        if let data = try? Data(contentsOf: file) {
            stored = try JSONDecoder().decode(StoredKey.self, from: data)
        } else {
            let key = Curve25519.Signing.PrivateKey()
            let publicKey = key.publicKey.rawRepresentation
            stored = StoredKey(
                kid: "ed25519-" + FileDigest.sha256(of: publicKey).prefix(16),
                d: Self.base64URL(key.rawRepresentation))
            try JSONEncoder.kiosk.encode(stored).write(to: file, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
        let privateKey = try EdDSA.PrivateKey(d: stored.d, curve: .ed25519)
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
