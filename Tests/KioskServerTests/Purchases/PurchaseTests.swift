import Crypto
import Foundation
import JWTKit
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// A purchase over real sockets: approved, declined or cancelled, charged once, its receipt
/// verifying; a product the account owns is not charged again.
@Suite("Purchases: approve, decline, cancel and owned products")
struct PurchaseTests: StoreSuite {
    @Test("approve charges once and answers with a receipt that verifies against the JWKS", arguments: TestEngine.all)
    func approve(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let reply = try await http.pay(Self.book, token: account.token)
            #expect(reply.status == 200)
            let claims = try await Self.verified(reply, by: server)
            #expect(claims.productId == Self.book)
            #expect(claims.accountId == account.accountId)
            #expect(claims.kind == .nonConsumable)
            #expect(claims.environment == .sandbox)
            #expect(claims.originalTransactionId == claims.transactionId)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])

            // The published key set verifies it too, as any third party would check it.
            let jwks = try await http.send("GET", "/.well-known/jwks.json")
            let receipt = try #require(try reply.decode(PaymentResponse.self).transaction.signedTransaction)
            #expect(try await KioskReceiptPolicy(keySetJSON: jwks.body).check(receipt) == claims)
        }
    }

    @Test("decline is a 402 with a code and a message; nothing is charged", arguments: TestEngine.all)
    func decline(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let reply = try await http.pay(Self.book, token: account.token, method: .decline)
            #expect(reply.status == 402)
            let error = try reply.decode(APIError.self)
            #expect(error.code == "payment_declined")
            #expect(error.message.contains("declined"))
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)
        }
    }

    @Test("cancel is an outcome, not an error: no charge, no receipt", arguments: TestEngine.all)
    func cancel(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let reply = try await http.pay(Self.book, token: account.token, method: .cancel)
            #expect(reply.status == 200)
            let payment = try reply.decode(PaymentResponse.self)
            #expect(payment.transaction.status == .cancelled)
            #expect(payment.transaction.signedTransaction == nil)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)
        }
    }

    @Test("buying a book the account owns is free and points at the first transaction", arguments: TestEngine.all)
    func rebuyOwned(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let first = try await Self.verified(try await http.pay(Self.book, token: account.token), by: server)
            let second = try await Self.verified(try await http.pay(Self.book, token: account.token), by: server)
            #expect(second.transactionId != first.transactionId)
            #expect(second.originalTransactionId == first.transactionId)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])
        }
    }

    @Test("re-buying an owned book is answered owned: true with the original transaction", arguments: TestEngine.all)
    func ownedAnswer(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let first = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(first.owned == false)
            let again = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(again.owned == true)
            let receipt = try #require(again.transaction.signedTransaction)
            #expect(try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt).originalTransactionId == first.transaction.transactionId)
        }
    }

    @Test("16 buys of one book at once with different keys: one charge, the others free re-buys of the first", arguments: TestEngine.all)
    func concurrentBuys(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let replies = try await Self.concurrently(16) { _ in try await http.pay(Self.book, token: account.token) }
            #expect(replies.allSatisfy { $0.status == 200 })
            let payments = try replies.map { try $0.decode(PaymentResponse.self) }
            #expect(payments.filter { $0.owned != true }.count == 1)
            #expect(Set(payments.map { $0.transaction.transactionId }).count == 16)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])
            let originals = try await payments.asyncMap { payment -> String in
                let receipt = try #require(payment.transaction.signedTransaction)
                return try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt).originalTransactionId
            }
            #expect(Set(originals).count == 1)
        }
    }

    @Test("the largest catalog price bought in the largest quantity is charged exactly; a larger price is refused at load", arguments: TestEngine.all)
    func largestPrice(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, prepare: { store in
            try store.editCatalog("credits.json") { products in
                products[0]["price"] = "10000.00"
                products[0]["credits"] = 1_000_000
            }
        }) { server, http, account in
            let reply = try await http.pay(Self.pack5, token: account.token, quantity: 100)
            #expect(reply.status == 200)
            #expect(try reply.decode(PaymentResponse.self).credits == 100_000_000)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [100_000_000])
        }
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("credits.json") { $0[0]["price"] = "99999999999999999.99" }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = #expect(throws: CatalogError.self) { try loader.load() }
        #expect(error?.description.contains("more than the largest price") == true)
        try store.editCatalog("credits.json") { $0[0]["price"] = "4.99"; $0[0]["credits"] = 9_223_372_036_854_775_807 }
        #expect(throws: CatalogError.self) { try loader.load() }
    }
}
