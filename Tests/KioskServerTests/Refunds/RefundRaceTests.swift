import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The store's promise at its edges (issue 28): conflicting actions at once, inputs it must
/// refuse, and refunds of credits already spent.
@Suite("The store at its edges: races of admin and customer, hostile inputs, spent credits")
struct StoreEdgeTests {
    static let book = StoreRulesTests.book
    static let issue = StoreRulesTests.issue
    static let pack5 = StoreRulesTests.pack5
    static let pack10 = StoreRulesTests.pack10
    /// Rounds of each race: enough for PostgreSQL's read committed to interleave the two often.
    static let rounds = 20

    // MARK: Races

    /// The two answers of one race, in the order the actions were named.
    struct Race {
        var first: StoreHTTP.Reply
        var second: StoreHTTP.Reply
        var statuses: [Int] { [first.status, second.status] }
    }

    static func race(_ first: @escaping @Sendable () async throws -> StoreHTTP.Reply, _ second: @escaping @Sendable () async throws -> StoreHTTP.Reply) async throws -> Race {
        async let a = first()
        async let b = second()
        return Race(first: try await a, second: try await b)
    }

    /// What an account ends with: the transaction's row as its owner lists it, the ledger, the balance.
    struct Outcome {
        var transaction: StoreTransaction
        var ledger: [Int]
        var credits: Int
    }

    static func outcome(of transactionId: String, account: AccountCreated, http: StoreHTTP, adminToken: String) async throws -> Outcome {
        let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
        let transaction = try #require(page.transactions.first { $0.transactionId == transactionId })
        let credits = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits
        return Outcome(transaction: transaction, ledger: try await http.charges(accountId: account.accountId, adminToken: adminToken), credits: credits)
    }

    static func admin(_ http: StoreHTTP, _ token: String, _ action: String, _ id: String) async throws -> StoreHTTP.Reply {
        try await http.send("POST", "/v1/admin/transactions/\(id)/\(action)", token: token)
    }

    static func message(_ reply: StoreHTTP.Reply) -> String {
        (try? reply.decode(APIError.self).message) ?? String(decoding: reply.body, as: UTF8.self)
    }

    @Test("a refund and the customer's finish at once: both stand, the transaction ends revoked and finished, refunded once", arguments: TestEngine.all)
    func refundRacingFinish(engine: TestEngine) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, _, _ in
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
        try await StoreRulesTests.withStore(engine: engine) { server, http, _, _ in
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

    /// Two decisions on one Ask to Buy, or one refund twice: exactly one answers 200, the other a
    /// 409 naming the transaction and the state the winner left, and the account shows only the winner's work.
    func exactlyOneWins(_ engine: TestEngine, _ actions: (String, String), product: String, method: PaymentMethod) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, _, _ in
            for round in 0..<Self.rounds {
                let account = try await http.createAccount()
                let id = try await http.pay(product, token: account.token, method: method).decode(PaymentResponse.self).transaction.transactionId
                let before = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                let race = try await Self.race({ try await Self.admin(http, server.adminToken, actions.0, id) },
                                               { try await Self.admin(http, server.adminToken, actions.1, id) })
                #expect(race.statuses.sorted() == [200, 409], "round \(round): \(actions) answered \(race.statuses): \(Self.message(race.first)) / \(Self.message(race.second))")
                guard race.statuses.sorted() == [200, 409] else { continue }
                let (winner, loser) = race.first.status == 200 ? (actions.0, race.second) : (actions.1, race.first)
                let end = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                let refusal = try loser.decode(APIError.self)
                #expect(refusal.message.contains(id) && refusal.message.contains(end.transaction.status.rawValue),
                        "round \(round): the refusal \"\(refusal.message)\" names neither \(id) nor its state \(end.transaction.status)")
                switch winner {
                case "approve":
                    #expect(end.transaction.status == .purchased, "round \(round)")
                    #expect(end.ledger == [499], "round \(round)")
                    #expect(end.credits == 5, "round \(round)")
                case "decline":
                    #expect(end.transaction.status == .declined, "round \(round)")
                    #expect(end.ledger.isEmpty, "round \(round)")
                    #expect(end.credits == 0, "round \(round)")
                default:
                    #expect(end.transaction.status == .revoked, "round \(round)")
                    #expect(end.ledger == before.ledger + [-before.ledger[0]], "round \(round)")
                    #expect(end.credits == 0, "round \(round)")
                }
            }
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

    @Test("two refunds of one purchase at once: paid back once, the other is told 409", arguments: TestEngine.all)
    func refundRacingRefund(engine: TestEngine) async throws {
        try await exactlyOneWins(engine, ("refund", "refund"), product: Self.pack5, method: .approve)
    }

    // MARK: Inputs

    static func payment(_ product: String, quantity: Int = 1, method: String = "approve", key: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: ["productId": product, "quantity": quantity, "paymentMethod": method, "idempotencyKey": key]), as: UTF8.self)
    }

    @Test("a replayed idempotency key with another quantity, payment method or product is refused with 422 naming what differs", arguments: TestEngine.all)
    func keyReplayDiffers(engine: TestEngine) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, account, _ in
            let key = "order-7"
            let first = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, quantity: 2, key: key))
            #expect(first.status == 200)
            let same = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, quantity: 2, key: key))
            #expect(same.status == 200)
            #expect(try same.decode(PaymentResponse.self).transaction == first.decode(PaymentResponse.self).transaction)
            for (body, field) in [
                (Self.payment(Self.pack5, quantity: 3, key: key), "quantity"),
                (Self.payment(Self.pack5, quantity: 2, method: "defer", key: key), "payment method"),
                (Self.payment(Self.pack10, quantity: 2, key: key), "product"),
                (#"{"productId": "\#(Self.issue)", "idempotencyKey": "\#(key)"}"#, "product"),
            ] {
                let path = body.contains("quantity") ? "/v1/payments" : "/v1/redemptions"
                let reply = try await http.send("POST", path, token: account.token, json: body)
                #expect(reply.status == 422, "\(body): \(reply.status) \(Self.message(reply))")
                let refusal = try? reply.decode(APIError.self)
                #expect(refusal?.code == "idempotency_key_reused")
                #expect(refusal?.message.contains(field) == true, "\(Self.message(reply))")
                #expect(refusal?.message.contains("\n") == false)
            }
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [998])
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 10)
        }
    }

    @Test("keys are limited by UTF-8 bytes and printable; NULs, control characters and long texts are a 400 naming the field, never a 500", arguments: TestEngine.all)
    func hostileTexts(engine: TestEngine) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, account, _ in
            let combining = "e" + String(repeating: "\u{0301}", count: 3_000)
            #expect(combining.count == 1)
            for (key, accepted) in [
                (String(repeating: "k", count: 255), true), (String(repeating: "é", count: 127), true), ("ключ-заказа-1", true),
                (String(repeating: "k", count: 256), false), (combining, false), (String(repeating: "k", count: 3_000), false),
                ("nul\u{0}key", false), ("line\nbreak", false), ("tab\tkey", false), ("del\u{7F}", false), ("", false),
            ] {
                let reply = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, key: key))
                if accepted {
                    #expect(reply.status == 200, "a key of \(key.utf8.count) bytes: \(reply.status) \(Self.message(reply))")
                } else {
                    #expect(reply.status == 400, "a key of \(key.utf8.count) bytes: \(reply.status) \(Self.message(reply))")
                    #expect(Self.message(reply).contains("idempotencyKey"), "\(Self.message(reply))")
                }
            }
            let redemption = try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "a\u0000b"}"#)
            #expect(redemption.status == 400 && Self.message(redemption).contains("idempotencyKey"), "\(redemption.status) \(Self.message(redemption))")

            for product in ["com.kiosk\u{0}.x", String(repeating: "p", count: 3_000)] {
                let reply = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(product, key: UUID().uuidString))
                #expect(reply.status == 400 && Self.message(reply).contains("productId"), "\(reply.status) \(Self.message(reply))")
            }

            let book = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.transactionId
            for action in ["revoke", "refund"] {
                for reason in ["nul \u{0} reason", String(repeating: "r", count: 3_000), "two\nlines"] {
                    let body = String(decoding: try JSONSerialization.data(withJSONObject: ["reason": reason]), as: UTF8.self)
                    let reply = try await http.send("POST", "/v1/admin/transactions/\(book)/\(action)", token: server.adminToken, json: body)
                    #expect(reply.status == 400 && Self.message(reply).contains("reason"), "\(action): \(reply.status) \(Self.message(reply))")
                }
                let wrongType = try await http.send("POST", "/v1/admin/transactions/\(book)/\(action)", token: server.adminToken, json: #"{"reason": 7}"#)
                #expect(wrongType.status == 400 && Self.message(wrongType).contains("reason"), "\(action): \(wrongType.status) \(Self.message(wrongType))")
            }
            let standing = try await Self.outcome(of: book, account: account, http: http, adminToken: server.adminToken)
            #expect(standing.transaction.status == .purchased, "a refused revocation changed the transaction")

            // IDs in paths: a long ID is refused before the database sees it; the router does not
            // decode percent escapes, so "%00" is three printable characters and names nothing.
            let longID = String(repeating: "t", count: 3_000)
            for action in ["transactions/\(longID)/finish", "admin/transactions/\(longID)/approve", "admin/transactions/\(longID)/decline",
                           "admin/transactions/\(longID)/revoke", "admin/transactions/\(longID)/refund"] {
                let reply = try await http.send("POST", "/v1/" + action, token: action.hasPrefix("admin") ? server.adminToken : account.token)
                #expect(reply.status == 400 && Self.message(reply).contains("transaction ID"), "\(action.suffix(9)): \(reply.status) \(Self.message(reply))")
            }
            let longAccount = try await http.send("GET", "/v1/admin/accounts/\(longID)", token: server.adminToken)
            #expect(longAccount.status == 400 && Self.message(longAccount).contains("account ID"), "\(longAccount.status) \(Self.message(longAccount))")
            for (method, path, token) in [("POST", "/v1/transactions/txn%00x/finish", account.token), ("POST", "/v1/admin/transactions/txn%00x/refund", server.adminToken),
                                          ("GET", "/v1/admin/accounts/acct%00x", server.adminToken)] {
                let reply = try await http.send(method, path, token: token)
                #expect(reply.status == 404, "\(path): \(reply.status) \(Self.message(reply))")
            }
        }
    }

    // MARK: Refunds of spent credits

    @Test("a credit pack whose credits were spent is not refunded (409, nothing changes); one whose credits are all there is, and the answer says what it withdrew", arguments: TestEngine.all)
    func refundOfSpentCredits(engine: TestEngine) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, account, _ in
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
}

extension StoreEdgeTests {
    @Test("an issue bought with credits is refunded in credits: its price goes back to the balance, once; a second refund is a 409", arguments: TestEngine.all)
    func refundInCredits(engine: TestEngine) async throws {
        try await StoreRulesTests.withStore(engine: engine) { server, http, account, _ in
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
}
