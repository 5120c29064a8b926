import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// The store keeps its word under concurrency, reloads and restarts.
@Suite("The store under concurrency, reloads and refunds")
struct StoreRulesTests {
    static let book = "com.kiosk.books.small-engines"
    static let issue = "com.kiosk.magazines.harbor-monthly.issue-02"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let pack10 = "com.kiosk.credits.pack-10"

    static func withStore<T: Sendable>(engine: TestEngine = .sqlite, prepare: @Sendable (SampleStore) throws -> Void = { _ in }, _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated, SampleStore) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try prepare(store)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = try await engine.freshDatabase()
        return try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            return try await body(server, http, try await http.createAccount(), store)
        }
    }

    static func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> StoreHTTP.Reply) async throws -> [StoreHTTP.Reply] {
        try await withThrowingTaskGroup(of: StoreHTTP.Reply.self) { group in
            for index in 0..<count { group.addTask { try await body(index) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("16 buys of one book at once with different keys: one charge, the others free re-buys of the first", arguments: TestEngine.all)
    func concurrentBuys(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
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

    @Test("16 redemptions of one issue at once: credits spent once, exactly", arguments: TestEngine.all)
    func concurrentRedemptions(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account, _ in
            #expect(try await http.pay(Self.pack10, token: account.token).status == 200)
            let replies = try await Self.concurrently(16) { _ in
                try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "\#(UUID().uuidString)"}"#)
            }
            #expect(replies.allSatisfy { $0.status == 200 })
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.credits == 8)
        }
    }

    @Test("several Ask to Buy requests for one product: one stays pending, the others answer with it", arguments: TestEngine.all)
    func onePendingRequest(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let replies = try await Self.concurrently(8) { _ in try await http.pay(Self.book, token: account.token, method: .defer) }
            #expect(replies.allSatisfy { $0.status == 200 })
            let ids = Set(try replies.map { try $0.decode(PaymentResponse.self).transaction.transactionId })
            #expect(ids.count == 1)
            let pending = try await http.send("GET", "/v1/admin/pending", token: server.adminToken)
            #expect(try JSONSerialization.jsonObject(with: pending.body) as? [[String: Any]] != nil)
            #expect((try JSONSerialization.jsonObject(with: pending.body) as? [[String: Any]])?.count == 1)
        }
    }

    @Test("re-buying an owned book is answered owned: true with the original transaction", arguments: TestEngine.all)
    func ownedAnswer(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let first = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(first.owned == false)
            let again = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(again.owned == true)
            let receipt = try #require(again.transaction.signedTransaction)
            #expect(try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt).originalTransactionId == first.transaction.transactionId)
        }
    }

    @Test("a refund revokes, records a negative charge with its reason, and the ledger sums to what was paid; a second is a 409", arguments: TestEngine.all)
    func refundLedger(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let book = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            _ = try await http.pay(Self.pack5, token: account.token)
            let refund = try await http.send("POST", "/v1/admin/transactions/\(book.transaction.transactionId)/refund", token: server.adminToken, json: #"{"reason": "damaged file"}"#)
            #expect(refund.status == 200)
            // A second refund pays nothing back, and says so rather than answering as if it had.
            let again = try await http.send("POST", "/v1/admin/transactions/\(book.transaction.transactionId)/refund", token: server.adminToken, json: #"{"reason": "twice"}"#)
            #expect(again.status == 409)
            #expect(try again.decode(APIError.self).code == "already_refunded")
            let view = try await http.send("GET", "/v1/admin/accounts/\(account.accountId)", token: server.adminToken)
            let object = try #require(try JSONSerialization.jsonObject(with: view.body) as? [String: Any])
            let ledger = try #require(object["charges"] as? [[String: Any]])
            #expect(ledger.compactMap { $0["amountCents"] as? Int } == [499, 499, -499])
            #expect(ledger.last?["reason"] as? String == "damaged file")
            #expect(ledger.compactMap { $0["amountCents"] as? Int }.reduce(0, +) == 499)
            let transactions = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            let revoked = try #require(transactions.transactions.first { $0.transactionId == book.transaction.transactionId })
            #expect(revoked.status == .revoked && revoked.revocationReason == "damaged file" && revoked.revocationDate != nil)
        }
    }

    @Test("refunding a book revokes the free re-buys that stood on it: their receipts stop entitling, and the next buy is charged again", arguments: TestEngine.all)
    func refundTakesFreeRebuys(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let paid = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            let free = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(free.owned == true)
            let refund = try await http.send("POST", "/v1/admin/transactions/\(paid.transaction.transactionId)/refund", token: server.adminToken)
            #expect(refund.status == 200)

            let transactions = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(transactions.transactions.first { $0.transactionId == free.transaction.transactionId }?.status == .revoked)
            let receipt = try #require(free.transaction.signedTransaction)
            let download = try await HTTPClient().send(HTTPRequest(url: http.baseURL + "/v1/content/\(Self.book)", headers: [("Authorization", "Receipt \(receipt)")]))
            #expect(download.status == 403)

            let again = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            #expect(again.owned == false)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499, -499, 499])
        }
    }

    @Test("a refund racing 16 buys of the same book: no free re-buy is left standing on the refunded purchase", arguments: TestEngine.all)
    func refundRacingBuys(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let paid = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            let refundId = paid.transaction.transactionId
            let replies = try await Self.concurrently(17) { index in
                if index == 8 {
                    return try await http.send("POST", "/v1/admin/transactions/\(refundId)/refund", token: server.adminToken)
                }
                return try await http.pay(Self.book, token: account.token)
            }
            #expect(replies.allSatisfy { $0.status == 200 })
            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            let verifier = try await KioskReceiptPolicy(keySet: try await server.keys.jwks())
            let status = Dictionary(uniqueKeysWithValues: page.transactions.map { ($0.transactionId, $0.status) })
            for transaction in page.transactions where transaction.status == .purchased {
                let receipt = try #require(transaction.signedTransaction)
                let original = try await verifier.check(receipt).originalTransactionId
                #expect(status[original] == .purchased, "\(transaction.transactionId) stands on \(original), which is \(String(describing: status[original]))")
            }
        }
    }

    @Test("every admin list answers: accounts, one account, pending, sales by product and day, downloads", arguments: TestEngine.all)
    func adminLists(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account, _ in
            let bought = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            let receipt = try #require(bought.transaction.signedTransaction)
            let download = try await HTTPClient().send(HTTPRequest(url: http.baseURL + "/v1/content/\(Self.book)", headers: [("Authorization", "Receipt \(receipt)")], maxResponseBytes: 64 << 20))
            #expect(download.status == 200)
            _ = try await http.pay(Self.issue, token: account.token, method: .defer)
            func list(_ path: String) async throws -> [[String: Any]] {
                let reply = try await http.send("GET", path, token: server.adminToken)
                #expect(reply.status == 200, "\(path)")
                return try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]] ?? []
            }
            let accounts = try await list("/v1/admin/accounts")
            #expect(accounts.first { $0["accountId"] as? String == account.accountId }?["paidCents"] as? Int == 499)
            #expect(try await list("/v1/admin/pending").first?["productId"] as? String == Self.issue)
            let sales = try await list("/v1/admin/sales")
            #expect(sales.count == 1 && sales.first?["productId"] as? String == Self.book && sales.first?["netCents"] as? Int == 499)
            #expect((sales.first?["day"] as? String)?.count == 10)
            let downloads = try await list("/v1/admin/downloads")
            #expect(downloads.first?["productId"] as? String == Self.book && downloads.first?["requests"] as? Int == 1)
            #expect(try await http.send("GET", "/v1/admin/accounts", token: "wrong").status == 401)
            #expect(try await http.send("GET", "/v1/admin/accounts").status == 401)
        }
    }

    @Test("the largest catalog price bought in the largest quantity is charged exactly; a larger price is refused at load", arguments: TestEngine.all)
    func largestPrice(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, prepare: { store in
            try store.editCatalog("credits.json") { products in
                products[0]["price"] = "10000.00"
                products[0]["credits"] = 1_000_000
            }
        }) { server, http, account, _ in
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

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
