import Crypto
import Foundation
import JWTKit
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import Testing

/// /verifyReceipt: a genuine receipt verifies; forged, foreign, revoked and wrong-environment ones
/// are refused with the App Store's codes.
@Suite("Receipt verification: genuine, forged and foreign receipts")
struct ReceiptVerificationTests: StoreSuite {
    /// Changes one part of a compact JWS.
    static func replacing(_ jws: String, part: Int, with text: String) -> String {
        var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[part] = text
        return parts.joined(separator: ".")
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decodePart(_ jws: String, _ index: Int) throws -> [String: Any] {
        var text = String(jws.split(separator: ".")[index]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: text))) as? [String: Any] ?? [:]
    }

    static func encodePart(_ object: [String: Any]) throws -> String {
        base64URL(try JSONSerialization.data(withJSONObject: object, options: .sortedKeys))
    }

    @Test("a genuine receipt verifies with status 0", arguments: TestEngine.all)
    func genuine(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            let receipt = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let response = try await http.verifyReceipt(receipt)
            #expect(response.status == 0)
            #expect(response.receipt?.productId == Self.book)
        }
    }

    @Test("forgeries are refused with the App Store's codes and grant nothing", arguments: TestEngine.all)
    func forgeries(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let receipt = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let header = try Self.decodePart(receipt, 0)
            var claims = try Self.decodePart(receipt, 1)

            // A bad signature: the last characters of the signature changed.
            let signature = String(receipt.split(separator: ".")[2])
            let flipped = String(signature.dropLast(4)) + (signature.hasSuffix("AAAA") ? "BBBB" : "AAAA")
            #expect(try await http.verifyReceipt(Self.replacing(receipt, part: 2, with: flipped)).status == 21003)

            // Tampered claims: another product, the original signature.
            claims["productId"] = Self.issue
            #expect(try await http.verifyReceipt(Self.replacing(receipt, part: 1, with: Self.encodePart(claims))).status == 21003)

            // Signed by another key that claims the server's kid.
            let keys = JWTKeyCollection()
            await keys.add(eddsa: try EdDSA.PrivateKey(), kid: JWKIdentifier(string: header["kid"] as? String ?? ""))
            let real = try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt)
            let foreign = try await keys.sign(real, kid: JWKIdentifier(string: header["kid"] as? String ?? ""))
            #expect(try await http.verifyReceipt(foreign).status == 21003)

            // alg: none, no signature.
            var none = header
            none["alg"] = "none"
            let unsigned = try Self.encodePart(none) + "." + String(receipt.split(separator: ".")[1]) + "."
            #expect(try await http.verifyReceipt(unsigned).status != 0)
            #expect(try await http.verifyReceipt(Self.replacing(receipt, part: 0, with: Self.encodePart(none))).status == 21003)

            // Not a receipt at all, and no receipt.
            #expect(try await http.verifyReceipt("hello").status == 21002)
            #expect(try await http.send("POST", "/verifyReceipt", json: "{}").decode(VerifyReceiptResponse.self).status == 21000)

            // Nothing was charged by any of it.
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.owned == [Self.book])
        }
    }

    @Test("account A's receipt presented by account B is unknown to B (21010)", arguments: TestEngine.all)
    func foreignAccount(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, alice in
            let receipt = try await http.pay(Self.book, token: alice.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let bob = try await http.createAccount()
            #expect(try await http.verifyReceipt(receipt, token: bob.token).status == 21010)
            #expect(try await http.verifyReceipt(receipt, token: alice.token).status == 0)
            let summary = try await http.send("GET", "/v1/account", token: bob.token).decode(AccountSummary.self)
            #expect(summary.owned.isEmpty)
        }
    }

    @Test("a revoked transaction's receipt answers 21010", arguments: TestEngine.all)
    func revoked(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let transaction = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction
            _ = try await http.send("POST", "/v1/admin/transactions/\(transaction.transactionId)/revoke", token: server.adminToken)
            #expect(try await http.verifyReceipt(transaction.signedTransaction ?? "").status == 21010)
        }
    }

    @Test("a sandbox receipt sent to a production server answers 21007; the key survives a restart", arguments: TestEngine.all)
    func sandboxToProduction(engine: TestEngine) async throws {
        // One signing key for both stores (an operator's key file, imported by each): a production
        // store keeps a database of its own (StoreEnvironmentMark), so only a shared key lets it
        // recognise the sandbox's receipt as genuine and answer 21007 rather than 21003.
        let privateKey = Curve25519.Signing.PrivateKey()
        let d = privateKey.rawRepresentation.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let keyFile = Data("{\"kid\": \"shared-1\", \"d\": \"\(d)\"}".utf8)
        let data = try TemporaryDirectory()
        let productionData = try TemporaryDirectory()
        for folder in [data, productionData] { try keyFile.write(to: folder.path("signing-key.json")) }
        let database = try await engine.freshDatabase()
        let receipt = try await Self.withStore(database: database, data: data.url) { _, http, account in
            try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
        }
        // The sandbox's database is refused to a production store.
        await #expect(throws: ServerSetupError.self) {
            try await Self.withStore(database: database, environment: .production, data: data.url) { _, _, _ in }
        }
        try await Self.withStore(database: try await engine.freshDatabase(), environment: .production, data: productionData.url) { _, http, _ in
            let response = try await http.verifyReceipt(receipt)
            #expect(response.status == 21007)
        }
        try await Self.withStore(database: database, environment: .sandbox, data: data.url) { _, http, _ in
            let status = try await http.verifyReceipt(receipt).status
            #expect(status == 0)
        }
    }
}
