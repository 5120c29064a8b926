import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// A refund or revocation by the operator: it revokes the transaction and what stood on it, pays
/// back once (money, or credits for what credits bought), and records the reason in the ledger.
@Suite("Refunds and revocations")
struct RefundTests: StoreSuite, SubscriptionSuite {
    @Test("a refund revokes, records a negative charge with its reason, and the ledger sums to what was paid; a second is a 409", arguments: TestEngine.all)
    func refundLedger(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
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
        try await Self.withStore(engine: engine) { server, http, account in
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

    @Test("a credit pack whose credits were spent is not refunded (409, nothing changes); one whose credits are all there is, and the answer says what it withdrew", arguments: TestEngine.all)
    func refundOfSpentCredits(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let pack = try await http.pay(Self.pack10, token: account.token).decode(PaymentResponse.self).transaction.transactionId
            let redeemed = try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "spend-1"}"#)
            #expect(try redeemed.decode(PaymentResponse.self).credits == 8)

            let refused = try await Self.admin(http, server.adminToken, "refund", pack)
            #expect(refused.status == 409)
            let refusal = try refused.decode(APIError.self)
            #expect(refusal.code == "credits_spent")
            #expect(refusal.message.contains(pack) && refusal.message.contains("10 credits") && refusal.message.contains("balance is 8"), "\(refusal.message)")
            let kept = try await Self.outcome(of: pack, account: account, http: http, adminToken: server.adminToken)
            #expect(kept.transaction.status == .purchased)
            #expect(kept.ledger == [899])
            #expect(kept.credits == 8)

            // Once the balance covers the pack again, its refund withdraws all of its credits.
            _ = try await http.pay(Self.pack5, token: account.token)
            let refunded = try await Self.admin(http, server.adminToken, "refund", pack)
            #expect(refunded.status == 200, "\(Self.message(refunded))")
            #expect(try refunded.decode(StoreTransaction.self).status == .revoked)
            let answer = try #require(try JSONSerialization.jsonObject(with: refunded.body) as? [String: Any])
            #expect(answer["refundedCents"] as? Int == 899 && answer["currency"] as? String == "USD", "\(answer)")
            #expect(answer["creditsWithdrawn"] as? Int == 10 && answer["credits"] as? Int == 3, "\(answer)")
            let end = try await Self.outcome(of: pack, account: account, http: http, adminToken: server.adminToken)
            #expect(end.ledger == [899, 499, -899])
            #expect(end.credits == 3)
            // The redeemed issue stays the reader's: it was paid for with credits that are still paid for.
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).owned == [Self.issue])
        }
    }

    @Test("an issue bought with credits is refunded in credits: its price goes back to the balance, once; a second refund is a 409", arguments: TestEngine.all)
    func refundInCredits(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            _ = try await http.pay(Self.pack10, token: account.token)
            let redeemed = try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "spend-1"}"#)
            let issue = try redeemed.decode(PaymentResponse.self)
            #expect(issue.credits == 8)

            let refunded = try await Self.admin(http, server.adminToken, "refund", issue.transaction.transactionId)
            #expect(refunded.status == 200, "\(Self.message(refunded))")
            let answer = try refunded.decode(AdminRevocation.self)
            #expect(answer.transaction.status == .revoked)
            #expect(answer.refundedCents == 0 && answer.creditsReturned == 2 && answer.creditsWithdrawn == 0 && answer.credits == 10, "\(answer)")
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 10)

            let again = try await Self.admin(http, server.adminToken, "refund", issue.transaction.transactionId)
            #expect(again.status == 409)
            #expect(try again.decode(APIError.self).code == "already_refunded")
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 10)
        }
    }

    @Test("a refund of the current period ends the subscription (revoked) and nothing more is charged; a refund of an older period leaves it renewing", arguments: TestEngine.all)
    func refundOfCurrentPeriodEndsIt(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: nil) { store in
            let first = try await store.buy()
            let original = first.claims.originalTransactionId
            let expires = try #require(first.claims.expires)
            #expect(try await store.advance(to: expires) == 1)
            let renewal = try #require(try await store.periods().last)
            func refund(_ id: String) async throws {
                let reply = try await store.http.send("POST", "/v1/admin/transactions/\(id)/refund", token: store.admin, json: "{}")
                #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            }
            try await refund(first.claims.transactionId)
            var info = try await store.subscription(original)
            #expect(info.state == .active && info.autoRenew && info.entitled)
            try await refund(renewal.transactionId)
            info = try await store.subscription(original)
            #expect(info.state == .expired && info.expirationReason == .revoked && !info.entitled)
            #expect(!info.autoRenew, "an ended subscription renews nothing, and says so")
            // Past the refunded period's end: no renewal, no charge.
            #expect(try await store.advance(to: try #require(renewal.expires)) == 0)
            #expect(try await store.charges().sorted() == [-249, -249, 249, 249])
            #expect(try await store.subscription(original).state == .expired)
        }
    }
}
