import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// Credit packs and what credits buy: exact balances, redemptions, the balance in each answer.
@Suite("Credits: packs, redemptions and the balance")
struct CreditTests: StoreSuite {
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

    @Test("16 redemptions of one issue at once: credits spent once, exactly", arguments: TestEngine.all)
    func concurrentRedemptions(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            #expect(try await http.pay(Self.pack10, token: account.token).status == 200)
            let replies = try await Self.concurrently(16) { _ in
                try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "\#(UUID().uuidString)"}"#)
            }
            #expect(replies.allSatisfy { $0.status == 200 })
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.credits == 8)
        }
    }
}
