import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// Ask to Buy: a purchase that waits for the operator's approval or decline, once however often it
/// is asked or decided.
@Suite("Ask to Buy: deferred purchases, approved or declined once")
struct AskToBuyTests: StoreSuite {
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

    @Test("several Ask to Buy requests for one product: one stays pending, the others answer with it", arguments: TestEngine.all)
    func onePendingRequest(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let replies = try await Self.concurrently(8) { _ in try await http.pay(Self.book, token: account.token, method: .defer) }
            #expect(replies.allSatisfy { $0.status == 200 })
            let ids = Set(try replies.map { try $0.decode(PaymentResponse.self).transaction.transactionId })
            #expect(ids.count == 1)
            let pending = try await http.send("GET", "/v1/admin/pending", token: server.adminToken)
            #expect(try JSONSerialization.jsonObject(with: pending.body) as? [[String: Any]] != nil)
            #expect((try JSONSerialization.jsonObject(with: pending.body) as? [[String: Any]])?.count == 1)
        }
    }

    @Test("an approval and a decline of one Ask to Buy at once: exactly one wins, the other is told 409", arguments: TestEngine.all)
    func approveRacingDecline(engine: TestEngine) async throws {
        try await exactlyOneWins(engine, ("approve", "decline"), product: Self.pack5, method: .defer)
    }

    @Test("two approvals of one Ask to Buy at once: one charge, one grant of credits, the other is told 409", arguments: TestEngine.all)
    func approveRacingApprove(engine: TestEngine) async throws {
        try await exactlyOneWins(engine, ("approve", "approve"), product: Self.pack5, method: .defer)
    }
}
