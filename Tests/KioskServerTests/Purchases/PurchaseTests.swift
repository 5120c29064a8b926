import Crypto
import Foundation
import JWTKit
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

@Suite("The sandbox store over real sockets")
struct StoreTests {
    static let book = "com.kiosk.books.small-engines"
    static let issue = "com.kiosk.magazines.harbor-monthly.issue-02"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// A live server over a private copy of the sample store, and a fresh account on it.
    @discardableResult
    static func withStore<T: Sendable>(
        engine: TestEngine = .sqlite, database: DatabaseLocation? = nil, environment: StoreEnvironment = .sandbox, data: URL? = nil,
        _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> T
    ) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(
            catalogDirectory: store.catalog, contentDirectory: store.content,
            dataDirectory: data ?? store.data, environment: environment)
        if let database {
            configuration.database = database
        } else {
            configuration.database = try await engine.freshDatabase()
        }
        return try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            return try await body(server, http, try await http.createAccount())
        }
    }

    static func verified(_ reply: StoreHTTP.Reply, by server: KioskServer) async throws -> ReceiptClaims {
        let payment = try reply.decode(PaymentResponse.self)
        let receipt = try #require(payment.transaction.signedTransaction)
        return try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt)
    }

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

    @Test("defer waits without a charge; approved, it is charged once and signed", arguments: TestEngine.all)
    func deferThenApprove(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let deferred = try await http.pay(Self.book, token: account.token, method: .defer).decode(PaymentResponse.self)
            #expect(deferred.transaction.status == .deferred)
            #expect(deferred.transaction.signedTransaction == nil)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)

            let id = deferred.transaction.transactionId
            #expect(try await http.send("POST", "/v1/admin/transactions/\(id)/approve").status == 401)
            let approved = try await http.send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken)
            let transaction = try approved.decode(StoreTransaction.self)
            #expect(transaction.status == .purchased)
            #expect(transaction.signedTransaction != nil)
            #expect(try await http.send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken).status == 409)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])
        }
    }

    @Test("defer then decline: declined, never charged", arguments: TestEngine.all)
    func deferThenDecline(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let deferred = try await http.pay(Self.book, token: account.token, method: .defer).decode(PaymentResponse.self)
            let id = deferred.transaction.transactionId
            let declined = try await http.send("POST", "/v1/admin/transactions/\(id)/decline", token: server.adminToken)
            #expect(try declined.decode(StoreTransaction.self).status == .declined)
            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.map(\.status) == [.declined])
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)
        }
    }

    @Test("the same idempotency key gives the same transaction and one charge, even when racing", arguments: TestEngine.all)
    func idempotency(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let key = UUID().uuidString
            let replies = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, quantity: 2, key: key).decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 1)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [998])
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.credits == 10)

            // The same key for another product is another request: refused, naming what differs.
            let reused = try await http.pay(Self.book, token: account.token, key: key)
            #expect(reused.status == 422)
        }
    }

    @Test("each of 12 concurrent purchases answers the balance it left; a replay answers the balance now", arguments: TestEngine.all)
    func balanceInAnswers(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let keys = (0..<12).map { "balance-\($0)" }
            let balances = try await withThrowingTaskGroup(of: Int.self) { group in
                for key in keys {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, key: key).decode(PaymentResponse.self).credits }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // Every purchase committed one after another: each saw a different balance, 5 to 60.
            #expect(balances.sorted() == Array(stride(from: 5, through: 60, by: 5)))
            // The same key again is the same transaction and no charge; its answer has today's balance.
            let replay = try await http.pay(Self.pack5, token: account.token, key: keys[0]).decode(PaymentResponse.self)
            #expect(replay.credits == 60)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).count == 12)
            // A second account's token is its own (the token look-up is remembered per token).
            let other = try await http.createAccount()
            #expect(try await http.pay(Self.pack5, token: other.token).decode(PaymentResponse.self).credits == 5)
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 60)
        }
    }

    @Test("credits are exact: 3 × a 5-credit pack is 15 credits and one charge of 3 × 4.99", arguments: TestEngine.all)
    func consumableQuantity(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let payment = try await http.pay(Self.pack5, token: account.token, quantity: 3).decode(PaymentResponse.self)
            #expect(payment.credits == 15)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1497])
            let claims = try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(payment.transaction.signedTransaction ?? "")
            #expect(claims.quantity == 3)
            #expect(try await http.pay(Self.book, token: account.token, quantity: 2).status == 400)
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

    @Test("credits buy an issue with a credit price; too few credits is a 402 and spends nothing", arguments: TestEngine.all)
    func redemption(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let redeem = "{\"productId\": \"\(Self.issue)\", \"idempotencyKey\": \"\(UUID().uuidString)\"}"
            let tooPoor = try await http.send("POST", "/v1/redemptions", token: account.token, json: redeem)
            #expect(tooPoor.status == 402)
            #expect(try tooPoor.decode(APIError.self).code == "insufficient_credits")

            _ = try await http.pay(Self.pack5, token: account.token)
            let reply = try await http.send("POST", "/v1/redemptions", token: account.token, json: redeem)
            let payment = try reply.decode(PaymentResponse.self)
            #expect(payment.credits == 3)
            let claims = try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(payment.transaction.signedTransaction ?? "")
            #expect(claims.productId == Self.issue)
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.owned == [Self.issue])
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499])
        }
    }

    @Test("a subscription expires one period after purchase and shows as active", arguments: TestEngine.all)
    func subscription(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let claims = try await Self.verified(try await http.pay(Self.subscription, token: account.token), by: server)
            let expires = try #require(claims.expires)
            let days = expires.timeIntervalSince(claims.purchased) / 86_400
            #expect((28...31).contains(days))
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.subscriptions.map(\.productId) == [Self.subscription])
            #expect(summary.subscriptions.first?.active == true)
        }
    }

    @Test("a missing or unknown token gets 401 with a JSON error; the scheme's case and spaces around the token do not matter", arguments: TestEngine.all)
    func unauthorized(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            #expect(try await http.send("GET", "/v1/account").status == 401)
            #expect(try await http.send("GET", "/v1/account", authorization: "bEARER \t\(account.token) ").status == 200)
            #expect(try await http.send("GET", "/v1/account", authorization: "Basic \(account.token)").status == 401)
            #expect(try await http.send("GET", "/v1/account", authorization: "Bearer").status == 401)
            let unknown = try await http.send("GET", "/v1/account", token: "not-a-token")
            #expect(unknown.status == 401)
            #expect(try unknown.decode(APIError.self).code == "unauthorized")
            #expect(try await http.pay(Self.book, token: "not-a-token").status == 401)
        }
    }

    @Test("the transaction list pages with a cursor and finish is recorded", arguments: TestEngine.all)
    func transactionsAndFinish(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            for _ in 0..<3 { _ = try await http.pay(Self.pack5, token: account.token) }
            let all = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(all.transactions.count == 3)
            #expect(all.transactions.allSatisfy { !$0.finished })
            let after = try await http.send("GET", "/v1/transactions?after=\(all.cursor ?? "")", token: account.token).decode(TransactionPage.self)
            #expect(after.transactions.isEmpty)

            let id = all.transactions[0].transactionId
            let finished = try await http.send("POST", "/v1/transactions/\(id)/finish", token: account.token).decode(StoreTransaction.self)
            #expect(finished.finished)
            let other = try await http.createAccount()
            #expect(try await http.send("POST", "/v1/transactions/\(id)/finish", token: other.token).status == 404)
        }
    }
}

@Suite("Forged and foreign receipts")
struct ForgedReceiptTests {
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
        try await StoreTests.withStore(engine: engine) { _, http, account in
            let receipt = try await http.pay(StoreTests.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let response = try await http.verifyReceipt(receipt)
            #expect(response.status == 0)
            #expect(response.receipt?.productId == StoreTests.book)
        }
    }

    @Test("forgeries are refused with the App Store's codes and grant nothing", arguments: TestEngine.all)
    func forgeries(engine: TestEngine) async throws {
        try await StoreTests.withStore(engine: engine) { server, http, account in
            let receipt = try await http.pay(StoreTests.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let header = try Self.decodePart(receipt, 0)
            var claims = try Self.decodePart(receipt, 1)

            // A bad signature: the last characters of the signature changed.
            let signature = String(receipt.split(separator: ".")[2])
            let flipped = String(signature.dropLast(4)) + (signature.hasSuffix("AAAA") ? "BBBB" : "AAAA")
            #expect(try await http.verifyReceipt(Self.replacing(receipt, part: 2, with: flipped)).status == 21003)

            // Tampered claims: another product, the original signature.
            claims["productId"] = StoreTests.issue
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
            #expect(summary.owned == [StoreTests.book])
        }
    }

    @Test("account A's receipt presented by account B is unknown to B (21010)", arguments: TestEngine.all)
    func foreignAccount(engine: TestEngine) async throws {
        try await StoreTests.withStore(engine: engine) { _, http, alice in
            let receipt = try await http.pay(StoreTests.book, token: alice.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
            let bob = try await http.createAccount()
            #expect(try await http.verifyReceipt(receipt, token: bob.token).status == 21010)
            #expect(try await http.verifyReceipt(receipt, token: alice.token).status == 0)
            let summary = try await http.send("GET", "/v1/account", token: bob.token).decode(AccountSummary.self)
            #expect(summary.owned.isEmpty)
        }
    }

    @Test("a revoked transaction's receipt answers 21010", arguments: TestEngine.all)
    func revoked(engine: TestEngine) async throws {
        try await StoreTests.withStore(engine: engine) { server, http, account in
            let transaction = try await http.pay(StoreTests.book, token: account.token).decode(PaymentResponse.self).transaction
            _ = try await http.send("POST", "/v1/admin/transactions/\(transaction.transactionId)/revoke", token: server.adminToken)
            #expect(try await http.verifyReceipt(transaction.signedTransaction ?? "").status == 21010)
        }
    }

    @Test("a sandbox receipt sent to a production server answers 21007; the key survives a restart", arguments: TestEngine.all)
    func sandboxToProduction(engine: TestEngine) async throws {
        let data = try TemporaryDirectory()
        let database = try await engine.freshDatabase()
        let receipt = try await StoreTests.withStore(database: database, data: data.url) { _, http, account in
            try await http.pay(StoreTests.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction ?? ""
        }
        try await StoreTests.withStore(database: database, environment: .production, data: data.url) { _, http, _ in
            let response = try await http.verifyReceipt(receipt)
            #expect(response.status == 21007)
        }
        try await StoreTests.withStore(database: database, environment: .sandbox, data: data.url) { _, http, _ in
            let status = try await http.verifyReceipt(receipt).status
            #expect(status == 0)
        }
    }
}

@Suite("Server metrics")
struct ServerMetricsTests {
    @Test("/metrics counts requests by route and status, payments by outcome and bytes served", arguments: TestEngine.all)
    func metrics(engine: TestEngine) async throws {
        try await StoreTests.withStore(engine: engine) { server, http, account in
            let payment = try await http.pay(StoreTests.book, token: account.token).decode(PaymentResponse.self)
            _ = try await http.pay(StoreTests.book, token: account.token, method: .decline)
            let receipt = payment.transaction.signedTransaction ?? ""
            let content = try await HTTPClient().send(KioskTransfer.HTTPRequest(
                url: http.baseURL + "/v1/content/\(StoreTests.book)", headers: [("Authorization", "Receipt \(receipt)")]))
            #expect(content.status == 200)

            let text = String(decoding: try await http.send("GET", "/metrics").body, as: UTF8.self)
            #expect(text.contains(#"kiosk_payments_total{outcome="purchased"} 1"#))
            #expect(text.contains(#"kiosk_payments_total{outcome="declined"} 1"#))
            #expect(text.contains("kiosk_content_bytes_served_total \(content.body.count)"))
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/payments",method="POST",status="402"} 1"#))
            #expect(text.contains(#"kiosk_downloads_in_flight 0"#))
        }
    }
}
