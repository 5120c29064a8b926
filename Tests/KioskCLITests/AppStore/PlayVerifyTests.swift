import Foundation
import KioskTestSupport
import Testing

/// `kiosk play verify`: Google Play purchases signed by `openssl dgst -sha1 -sign` with a key
/// openssl made, as Play signs them, so the check is not only against Kiosk's own signer.
@Suite("kiosk play verify")
struct PlayVerifyTests {
    static let purchase = #"{"orderId":"GPA.3344-5566-7788-99001","packageName":"com.example.reader","productId":"play.book.river","purchaseTime":1795760000000,"purchaseState":0,"purchaseToken":"opaque-token-abc.AO-J1Oz","quantity":1,"acknowledged":false}"#


    /// A key pair of `bits`, its public half as the Play Console shows it (base64 DER), and a signature of `body` (base64).
    static func signed(_ body: String, bits: Int = 2048, name: String, in directory: TemporaryDirectory) throws -> (key: URL, signature: URL) {
        try Data(body.utf8).write(to: directory.path("\(name).json"))
        try OpenSSL.run(["genrsa", "-out", "\(name).pem", String(bits)], in: directory)
        try OpenSSL.run(["rsa", "-in", "\(name).pem", "-pubout", "-outform", "DER", "-out", "\(name).der"], in: directory)
        try OpenSSL.run(["dgst", "-sha1", "-sign", "\(name).pem", "-out", "\(name).sig", "\(name).json"], in: directory)
        let key = directory.path("\(name).key.txt")
        let signature = directory.path("\(name).sig.txt")
        try Data(try Data(contentsOf: directory.path("\(name).der")).base64EncodedString().utf8).write(to: key)
        try Data(try Data(contentsOf: directory.path("\(name).sig")).base64EncodedString().utf8).write(to: signature)
        return (key, signature)
    }

    @Test("a purchase openssl signed verifies; tampered, signed by another key, for another app, or under a short key it is refused with its reason")
    func verify() async throws {
        let directory = try TemporaryDirectory()
        let (key, signature) = try Self.signed(Self.purchase, name: "play", in: directory)
        func verify(_ file: String, signature: URL, key: URL, package: String = "com.example.reader", json: Bool = false) async throws -> KioskCommand.Result {
            try await KioskCommand.run(["play", "verify", directory.path(file).path, "--signature", signature.path, "--public-key", key.path, "--package", package]
                                       + (json ? ["--json"] : []))
        }
        let good = try await verify("play.json", signature: signature, key: key)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.hasPrefix("verified: Google Play signed this purchase of play.book.river (purchased) for com.example.reader\n"), "\(good.stdout)")
        #expect(good.stdout.contains("\"purchaseToken\" : \"opaque-token-abc.AO-J1Oz\""))

        // One byte changed: the token.
        try Data(Self.purchase.replacingOccurrences(of: "abc", with: "abd").utf8).write(to: directory.path("tampered.json"))
        let tampered = try await verify("tampered.json", signature: signature, key: key)
        #expect(tampered.status == 1)
        #expect(tampered.stderr == "kiosk: refused (signature): the signature does not match this purchase under the app's Play public key\n", "\(tampered.stderr)")
        // Re-serialized JSON with the same fields is other bytes: refused too.
        try Data(Self.purchase.replacingOccurrences(of: ",", with: ", ").utf8).write(to: directory.path("spaced.json"))
        #expect(try await verify("spaced.json", signature: signature, key: key).status == 1)

        let (otherKey, _) = try Self.signed(Self.purchase, name: "other", in: directory)
        #expect(try await verify("play.json", signature: signature, key: otherKey).stderr.contains("refused (signature)"))
        let package = try await verify("play.json", signature: signature, key: key, package: "com.example.other")
        #expect(package.stderr == "kiosk: refused (package): the purchase is for the app com.example.reader, not com.example.other\n", "\(package.stderr)")

        let (shortKey, shortSignature) = try Self.signed(Self.purchase, bits: 1024, name: "short", in: directory)
        let short = try await verify("short.json", signature: shortSignature, key: shortKey)
        #expect(short.status == 1 && short.stderr.contains("refused (bad_key)"), "\(short.stderr)")

        let refusal = try await verify("tampered.json", signature: signature, key: key, json: true)
        let document = try JSONSerialization.jsonObject(with: Data(refusal.stdout.utf8)) as? [String: Any]
        #expect(document?["verified"] as? Bool == false && document?["reason"] as? String == "signature", "\(refusal.stdout)")
    }
}
