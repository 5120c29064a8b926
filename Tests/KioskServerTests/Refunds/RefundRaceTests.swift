import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// A refund or revocation racing the customer's own actions, another refund or purchases of the
/// same book: each ends as if the two had come one after the other.
@Suite("Refunds racing the customer, each other and purchases")
struct RefundRaceTests: StoreSuite {
    @Test("a refund and the customer's finish at once: both stand, the transaction ends revoked and finished, refunded once", arguments: TestEngine.all)
    func refundRacingFinish(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            for round in 0..<Self.rounds {
                let account = try await http.createAccount()
                let id = try await http.pay(Self.pack5, token: account.token).decode(PaymentResponse.self).transaction.transactionId
                let race = try await Self.race({ try await Self.admin(http, server.adminToken, "refund", id) },
                                               { try await http.send("POST", "/v1/transactions/\(id)/finish", token: account.token) })
                #expect(race.statuses == [200, 200], "round \(round): \(Self.message(race.first)) / \(Self.message(race.second))")
                let finished = try race.second.decode(StoreTransaction.self)
                #expect(finished.status == .purchased || finished.status == .revoked)
                let end = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                #expect(end.transaction.status == .revoked, "round \(round): a refunded transaction ended \(end.transaction.status)")
                #expect(end.transaction.finished, "round \(round)")
                #expect(end.ledger == [499, -499], "round \(round)")
                #expect(end.credits == 0, "round \(round)")
            }
        }
    }

    @Test("a revocation and the customer's finish at once: both stand, the transaction ends revoked and finished, nothing paid back", arguments: TestEngine.all)
    func revokeRacingFinish(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            for round in 0..<Self.rounds {
                let account = try await http.createAccount()
                let id = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.transactionId
                let race = try await Self.race({ try await Self.admin(http, server.adminToken, "revoke", id) },
                                               { try await http.send("POST", "/v1/transactions/\(id)/finish", token: account.token) })
                #expect(race.statuses == [200, 200], "round \(round): \(Self.message(race.first)) / \(Self.message(race.second))")
                let end = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                #expect(end.transaction.status == .revoked, "round \(round): a revoked transaction ended \(end.transaction.status)")
                #expect(end.transaction.finished, "round \(round)")
                #expect(end.ledger == [499], "round \(round)")
            }
        }
    }

    @Test("two refunds of one purchase at once: paid back once, the other is told 409", arguments: TestEngine.all)
    func refundRacingRefund(engine: TestEngine) async throws {
        try await exactlyOneWins(engine, ("refund", "refund"), product: Self.pack5, method: .approve)
    }

    @Test("a refund racing 16 buys of the same book: no free re-buy is left standing on the refunded purchase", arguments: TestEngine.all)
    func refundRacingBuys(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
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
}
