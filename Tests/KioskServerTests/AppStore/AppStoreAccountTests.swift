import Foundation
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import Testing

/// App Store transactions bound to Kiosk accounts (issue 45): the account's `appAccountToken`,
/// a transaction presented by the account it names, refunds and their reversal.
@Suite("The iOS channel: App Store transactions bound to accounts")
struct AppStoreAccountTests: StoreSuite {
    static func summary(_ http: StoreHTTP, _ account: AccountCreated) async throws -> AccountSummary {
        try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
    }

    static func present(_ http: StoreHTTP, _ account: AccountCreated, _ jws: String) async throws -> StoreHTTP.Reply {
        let body = String(decoding: try JSONEncoder().encode(AppStoreTransactionProof(signedTransaction: jws)), as: UTF8.self)
        return try await http.send("POST", "/v1/appstore/transactions", token: account.token, json: body)
    }

    static func notify(_ http: StoreHTTP, _ chain: AppStoreTestChain, type: String, uuid: String, transaction: String) async throws -> AppStoreNotificationOutcome {
        let body = #"{"signedPayload": "\#(try chain.notification(type: type, uuid: uuid, signedTransaction: transaction))"}"#
        let reply = try await http.send("POST", "/v1/appstore/notifications", json: body)
        #expect(reply.status == 200, "\(Self.message(reply))")
        return try reply.decode(AppStoreNotificationOutcome.self)
    }

    @Test("each account has one appAccountToken, the same when asked for at once", arguments: TestEngine.all)
    func token(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { _, http in
            let account = try await http.createAccount()
            let replies = try await Self.concurrently(4) { _ in try await http.send("GET", "/v1/account", token: account.token) }
            let tokens = Set(try replies.map { try $0.decode(AccountSummary.self).appAccountToken })
            #expect(tokens.count == 1)
            let token = try #require(tokens.first ?? nil)
            #expect(UUID(uuidString: token) != nil)
            #expect(try await Self.summary(http, account).appAccountToken == token)
            #expect(try await Self.summary(http, try await http.createAccount()).appAccountToken != token)
        }
    }

    @Test("a transaction carrying the account's token is granted to it alone; another account's or nobody's is refused", arguments: TestEngine.all)
    func bound(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { server, http in
            let (reader, other) = (try await http.createAccount(), try await http.createAccount())
            let token = try #require(try await Self.summary(http, reader).appAccountToken)
            let jws = try chain.transaction(id: "7001", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: token)

            let stolen = try await Self.present(http, other, jws)
            #expect(stolen.status == 409, "\(Self.message(stolen))")
            #expect(try stolen.decode(APIError.self).code == "purchase_owned")
            #expect(try await Self.summary(http, other).owned.isEmpty)

            let granted = try await Self.present(http, reader, jws)
            #expect(granted.status == 200, "\(Self.message(granted))")
            let answer = try granted.decode(ChannelPurchaseAnswer.self)
            #expect(answer.state == "granted" && answer.productId == AppStoreBridgeTests.book)
            #expect(try await Self.summary(http, reader).owned == [AppStoreBridgeTests.book])
            let again = try await Self.present(http, reader, jws).decode(ChannelPurchaseAnswer.self)
            #expect(again.transaction?.transactionId == answer.transaction?.transactionId)
            #expect(try await http.charges(accountId: reader.accountId, adminToken: server.adminToken).count == 1)

            let nobodys = try chain.transaction(id: "7002", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: UUID().uuidString)
            #expect(try await Self.present(http, reader, nobodys).status == 409)
            let forged = try AppStoreTestChain().transaction(id: "7003", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: token)
            #expect(try await Self.present(http, reader, forged).status == 401)
            let revoked = try chain.transaction(id: "7004", productId: AppStoreBridgeTests.appStoreBook, revoked: Date(), appAccountToken: token)
            let refusedRevoked = try await Self.present(http, reader, revoked)
            #expect(refusedRevoked.status == 402)
        }
    }

    @Test("a transaction without a token belongs to the first account; two presenting it at once get one 200 and one 409", arguments: TestEngine.all)
    func unbound(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { _, http in
            for round in 0..<6 {
                let (first, second) = (try await http.createAccount(), try await http.createAccount())
                let jws = try chain.transaction(id: "71\(round)0", productId: AppStoreBridgeTests.appStoreBook)
                let race = try await Self.race({ try await Self.present(http, first, jws) }, { try await Self.present(http, second, jws) })
                #expect(race.statuses.sorted() == [200, 409], "round \(round): \(race.statuses)")
                let owners = try await [Self.summary(http, first).owned, Self.summary(http, second).owned]
                #expect(owners.filter { $0 == [AppStoreBridgeTests.book] }.count == 1 && owners.filter(\.isEmpty).count == 1, "round \(round)")
            }
        }
    }

    @Test("REFUND revokes the account's grant, REFUND_REVERSED grants it again once; a refund notified first refuses the transaction", arguments: TestEngine.all)
    func refunds(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { server, http in
            let reader = try await http.createAccount()
            let token = try #require(try await Self.summary(http, reader).appAccountToken)
            let jws = try chain.transaction(id: "7200", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: token)
            #expect(try await Self.present(http, reader, jws).status == 200)

            let refunded = try chain.transaction(id: "7200", productId: AppStoreBridgeTests.appStoreBook, revoked: Date(), appAccountToken: token)
            _ = try await Self.notify(http, chain, type: "REFUND", uuid: "refund-7200", transaction: refunded)
            #expect(try await Self.summary(http, reader).owned.isEmpty)
            let page = try await http.send("GET", "/v1/transactions", token: reader.token).decode(TransactionPage.self)
            #expect(page.transactions.map(\.status) == [.revoked])

            let reversed = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7200", transaction: jws)
            #expect(reversed.outcome.contains("refund was reversed"), "\(reversed.outcome)")
            _ = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7200", transaction: jws)
            #expect(try await Self.summary(http, reader).owned == [AppStoreBridgeTests.book])
            let after = try await http.send("GET", "/v1/transactions", token: reader.token).decode(TransactionPage.self)
            #expect(after.transactions.filter { $0.status == .purchased }.count == 1)
            // The proof path follows too: the transaction downloads again.
            #expect(try await http.send("HEAD", "/v1/content/\(AppStoreBridgeTests.book)", authorization: "AppStore \(jws)").status == 200)

            // Refunded before it was presented.
            let early = try chain.transaction(id: "7201", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: token)
            let earlyRefund = try chain.transaction(id: "7201", productId: AppStoreBridgeTests.appStoreBook, revoked: Date(), appAccountToken: token)
            _ = try await Self.notify(http, chain, type: "REFUND", uuid: "refund-7201", transaction: earlyRefund)
            let late = try await Self.present(http, reader, early)
            #expect(late.status == 402, "\(Self.message(late))")
            #expect(try late.decode(APIError.self).code == "payment_withdrawn")
            #expect(try await Self.summary(http, reader).owned == [AppStoreBridgeTests.book], "the reinstated purchase only")
            // 7200 charged, refunded, charged again when reinstated; 7201 was a free re-buy of the
            // book the account had again by then (nothing charged), withdrawn at once.
            let charges = try await http.charges(accountId: reader.accountId, adminToken: server.adminToken)
            #expect(charges.count == 3 && charges[0] > 0 && charges[1] == -charges[0] && charges[2] == charges[0], "\(charges)")
        }
    }

    static func credits(_ http: StoreHTTP, _ account: AccountCreated) async throws -> Int {
        try await summary(http, account).credits
    }

    static func toActOn(_ http: StoreHTTP, _ server: KioskServer) async throws -> [AdminChannelEventRow] {
        try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
    }

    @Test("REFUND_REVERSED of a transaction of 3 credit packs gives back all 15 credits the refund took", arguments: TestEngine.all)
    func reversalRestoresQuantity(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { server, http in
            let reader = try await http.createAccount()
            let token = try #require(try await Self.summary(http, reader).appAccountToken)
            let jws = try chain.transaction(id: "7300", productId: AppStoreBridgeTests.appStorePack, type: "Consumable", appAccountToken: token, quantity: 3)
            #expect(try await Self.present(http, reader, jws).status == 200)
            #expect(try await Self.credits(http, reader) == 15)
            let refunded = try chain.transaction(id: "7300", productId: AppStoreBridgeTests.appStorePack, type: "Consumable", revoked: Date(),
                                                 appAccountToken: token, quantity: 3)
            _ = try await Self.notify(http, chain, type: "REFUND", uuid: "refund-7300", transaction: refunded)
            #expect(try await Self.credits(http, reader) == 0)
            _ = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7300", transaction: jws)
            _ = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7300", transaction: jws)
            #expect(try await Self.credits(http, reader) == 15, "the reversal gives back what the refund took, once")
            let charges = try await http.charges(accountId: reader.accountId, adminToken: server.adminToken)
            #expect(charges.count == 3 && charges[0] == 1_497 && charges[1] == -1_497 && charges[2] == 1_497, "\(charges)")
        }
    }

    @Test("a credit pack spent, refunded (nothing can be taken back) and the refund reversed is granted once: listed for the operator, then settled by the reversal", arguments: TestEngine.all)
    func spentPackRefundReversedOnce(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { server, http in
            let reader = try await http.createAccount()
            let token = try #require(try await Self.summary(http, reader).appAccountToken)
            let jws = try chain.transaction(id: "7400", productId: AppStoreBridgeTests.appStorePack, type: "Consumable", appAccountToken: token)
            #expect(try await Self.present(http, reader, jws).status == 200)
            let redeem = #"{"productId": "\#(AppStoreBridgeTests.issue2)", "idempotencyKey": "\#(UUID().uuidString)"}"#
            let redeemed = try await http.send("POST", "/v1/redemptions", token: reader.token, json: redeem)
            #expect(redeemed.status == 200, "\(Self.message(redeemed))")
            #expect(try await Self.credits(http, reader) == 3)

            let refunded = try chain.transaction(id: "7400", productId: AppStoreBridgeTests.appStorePack, type: "Consumable", revoked: Date(), appAccountToken: token)
            _ = try await Self.notify(http, chain, type: "REFUND", uuid: "refund-7400", transaction: refunded)
            #expect(try await Self.credits(http, reader) == 3, "spent credits cannot be taken back")
            let listed = try await Self.toActOn(http, server)
            #expect(listed.contains { $0.channel == "appstore" && $0.eventId == "refund-7400" && $0.outcome == "unsettled" }, "\(listed)")

            _ = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7400", transaction: jws)
            #expect(try await Self.credits(http, reader) == 3, "the refund took nothing, so its reversal gives nothing")
            #expect(try await Self.toActOn(http, server).filter { $0.channel == "appstore" }.isEmpty)
        }
    }

    @Test("REFUND_REVERSED of a book taken off sale meanwhile gives it back: owned is forever", arguments: TestEngine.all)
    func reversalOfWithdrawnBook(engine: TestEngine) async throws {
        let chain = try AppStoreTestChain()
        try await AppStoreBridgeTests.withAppStore(engine: engine, chain: chain) { server, http in
            let reader = try await http.createAccount()
            let token = try #require(try await Self.summary(http, reader).appAccountToken)
            let jws = try chain.transaction(id: "7500", productId: AppStoreBridgeTests.appStoreBook, appAccountToken: token)
            #expect(try await Self.present(http, reader, jws).status == 200)
            let refunded = try chain.transaction(id: "7500", productId: AppStoreBridgeTests.appStoreBook, revoked: Date(), appAccountToken: token)
            _ = try await Self.notify(http, chain, type: "REFUND", uuid: "refund-7500", transaction: refunded)
            #expect(try await Self.summary(http, reader).owned.isEmpty)
            // Taken off sale: a new sale of it is refused from now on.
            let books = server.configuration.catalogDirectory.appendingPathComponent("books.json")
            var root = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: books)) as? [String: Any])
            var products = try #require(root["products"] as? [[String: Any]])
            for index in products.indices where products[index]["id"] as? String == AppStoreBridgeTests.book { products[index]["forSale"] = false }
            root["products"] = products
            try JSONSerialization.data(withJSONObject: root).write(to: books)
            #expect(await server.catalog.reload())
            #expect(try await http.pay(AppStoreBridgeTests.book, token: try await http.createAccount().token).status == 409)

            _ = try await Self.notify(http, chain, type: "REFUND_REVERSED", uuid: "reversed-7500", transaction: jws)
            #expect(try await Self.summary(http, reader).owned == [AppStoreBridgeTests.book])
            let content = try await http.send("HEAD", "/opds/content/\(AppStoreBridgeTests.book)", token: reader.token)
            #expect(content.status == 200, "\(Self.message(content))")
        }
    }
}
