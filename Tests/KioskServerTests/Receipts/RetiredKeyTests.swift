import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// A retired signing key does not take the purchases it signed with it.
@Suite("Receipts signed with a retired key")
struct RetiredKeyTests: StoreSuite {
    static let book = "com.kiosk.books.small-engines"
    static let other = "com.kiosk.books.river-of-maps"

    @Test("after a key is retired, the transaction list and a replayed payment hand out its purchases signed with the current key; the old receipt is refused for content with a 401 naming the key", arguments: TestEngine.all)
    func retiredKeyReissues(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let key = UUID().uuidString
            let first = try await http.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            let oldReceipt = try #require(first.transaction.signedTransaction)
            let oldKID = await server.keys.signingKID

            let newKID = try await SigningKeys.rotate(server.store.database)
            try await server.keys.reload()
            _ = try await http.pay(Self.other, token: account.token).decode(PaymentResponse.self)
            #expect(try await SigningKeys.retire(oldKID, in: server.store.database) == 1)
            try await server.keys.reload()

            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            let verifier = try await KioskReceiptPolicy(keySet: try await server.keys.jwks())
            #expect(page.transactions.count == 2)
            for transaction in page.transactions {
                let receipt = try #require(transaction.signedTransaction)
                #expect(SigningKeysKID.of(receipt) == newKID)
                let claims = try await verifier.check(receipt)
                #expect(claims.transactionId == transaction.transactionId)
                #expect(claims.accountId == account.accountId)
            }
            let reissued = try #require(page.transactions.first { $0.transactionId == first.transaction.transactionId }?.signedTransaction)
            #expect(try await verifier.check(reissued).productId == Self.book)
            // Saved: the next listing, and the payment replayed by its key, give the same receipt.
            let again = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(again.transactions.first { $0.transactionId == first.transaction.transactionId }?.signedTransaction == reissued)
            let replayed = try await http.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            #expect(replayed.transaction.signedTransaction == reissued)
            #expect(try await SigningKeys.livePurchases(signedBy: oldKID, in: server.store.database) == 0)

            // Content: the old receipt is refused, naming its key and what to do; the new one is served.
            let refused = try await http.send("GET", "/v1/content/\(Self.book)", authorization: "Receipt \(oldReceipt)")
            #expect(refused.status == 401)
            let error = try refused.decode(APIError.self)
            #expect(error.code == "receipt_key_untrusted")
            #expect(error.message.contains(oldKID) && error.message.contains("kiosk restore"))
            let served = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: http.baseURL + "/v1/content/\(Self.book)", headers: [("Authorization", "Receipt \(reissued)")]))
            #expect(served.status == 200)
        }
    }
}

/// The `kid` in a compact JWS's header.
enum SigningKeysKID {
    static func of(_ jws: String) -> String? {
        var header = String(jws.split(separator: ".").first ?? "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while header.count % 4 != 0 { header += "=" }
        guard let data = Data(base64Encoded: header), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["kid"] as? String
    }
}
