import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Testing

/// Offer codes (issue 65): made by the operator, kept hashed, each redeemed within its limit
/// whatever the races, refused alike when unknown, used up, expired or withdrawn.
@Suite("Offer codes")
struct OfferCodeTests: StoreSuite {
    static func make(_ http: StoreHTTP, _ server: KioskServer, _ json: String) async throws -> AdminCodesCreated {
        let reply = try await http.send("POST", "/v1/admin/codes", token: server.adminToken, json: json)
        #expect(reply.status == 201, "\(Self.message(reply))")
        return try reply.decode(AdminCodesCreated.self)
    }

    static func redeem(_ http: StoreHTTP, _ code: String, token: String) async throws -> StoreHTTP.Reply {
        try await http.send("POST", "/v1/codes/redeem", token: token, json: #"{"code": "\#(code)"}"#)
    }

    @Test("one-time codes: each gives its book once, to one account; redeemed again by that account it answers the same grant; the store keeps no code, only hashes; the batch lists what was redeemed", arguments: TestEngine.all)
    func oneTime(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, ann in
            let made = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 3}"#)
            #expect(made.codes.count == 3 && Set(made.codes).count == 3 && made.codes.allSatisfy { $0.count == 19 })
            let first = try await Self.redeem(http, made.codes[0].lowercased(), token: ann.token)
            #expect(first.status == 200, "\(Self.message(first))")
            let granted = try first.decode(RedeemCodeResponse.self)
            #expect(granted.productId == Self.book && granted.transaction.paidBy == PaidBy.code.rawValue && granted.transaction.signedTransaction != nil)
            #expect(try await http.send("GET", "/v1/account", token: ann.token).decode(AccountSummary.self).owned.contains(Self.book))
            let again = try await Self.redeem(http, made.codes[0], token: ann.token)
            #expect(try again.decode(RedeemCodeResponse.self).transaction.transactionId == granted.transaction.transactionId, "one grant per code and account")
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [], "nothing charged")

            let bo = try await http.createAccount()
            let taken = try await Self.redeem(http, made.codes[0], token: bo.token)
            #expect(taken.status == 400 && (try? taken.decode(APIError.self).code) == "invalid_code", "\(Self.message(taken))")
            #expect(try await Self.redeem(http, made.codes[1], token: bo.token).status == 200)
            // Ann owns the book: a third code is refused and stays unused.
            let owned = try await Self.redeem(http, made.codes[2], token: ann.token)
            #expect(owned.status == 409 && (try? owned.decode(APIError.self).code) == "already_owned")
            // A used-up code tells her nothing more than an unknown one would, owned or not.
            let spent = try await Self.redeem(http, made.codes[1], token: ann.token)
            #expect(spent.status == 400 && (try? spent.decode(APIError.self).code) == "invalid_code", "\(Self.message(spent))")

            let batches = try await http.send("GET", "/v1/admin/codes", token: server.adminToken).decode([AdminCodeBatchRow].self)
            #expect(batches.map(\.batch) == [made.batch] && batches.first?.redeemed == 2 && batches.first?.limit == 3 && batches.first?.kind == "oneTime")
            let stored = try await server.store.base.database.read { db in
                try await db.raw("SELECT \"codeHash\", \"batch\", \"id\" FROM \"offerCode\"").all().map { try $0.decode(column: "codeHash", as: String.self) }
            }
            #expect(stored.count == 3 && !stored.contains { hash in made.codes.contains { hash.contains(OfferCodeText.normalized($0)) } }, "only hashes")
        }
    }

    @Test("a one-time code redeemed by eight accounts at once is redeemed once; a custom code with a limit of three, by six at once, three times", arguments: TestEngine.all)
    func races(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: { $0.rateLimits = .off }) { server, http, _ in
            let once = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 1}"#)
            var accounts: [AccountCreated] = []
            for _ in 0..<8 { accounts.append(try await http.createAccount()) }
            let tokens = accounts.map(\.token)
            let replies = try await Self.concurrently(8) { index in try await Self.redeem(http, once.codes[0], token: tokens[index]) }
            #expect(replies.filter { $0.status == 200 }.count == 1 && replies.filter { $0.status == 400 }.count == 7, "\(replies.map(\.status))")

            let custom = try await Self.make(http, server, #"{"productId": "\#(Self.subscription)", "code": "HARBOR-2026", "limit": 3}"#)
            #expect(custom.codes == ["HARBOR2026"])
            let planReplies = try await Self.concurrently(6) { index in try await Self.redeem(http, "harbor 2026", token: tokens[index]) }
            #expect(planReplies.filter { $0.status == 200 }.count == 3, "\(planReplies.map(\.status))")
            let period = try #require(try planReplies.first { $0.status == 200 }?.decode(RedeemCodeResponse.self).transaction.signedTransaction)
            let claims = try SubscriptionFixture.claims(period)
            #expect(claims.offerType == "offerCode" && claims.offerPeriod == "P1M" && claims.productId == Self.subscription)
            // The period a code gave does not renew on its own: nobody agreed to pay.
            let winner = try #require(try planReplies.first { $0.status == 200 }?.decode(RedeemCodeResponse.self).transaction.transactionId)
            var given: SubscriptionInfo?
            for account in accounts where given == nil {
                given = try await http.send("GET", "/v1/subscriptions", token: account.token).decode(SubscriptionList.self).subscriptions.first { $0.originalTransactionId == winner }
            }
            #expect(given?.autoRenew == false && given?.state == .active, "\(String(describing: given))")
            let taken = try await http.send("POST", "/v1/admin/codes", token: server.adminToken, json: #"{"productId": "\#(Self.book)", "code": "harbor2026", "limit": 1}"#)
            #expect(taken.status == 409 && (try? taken.decode(APIError.self).code) == "code_taken")
        }
    }

    @Test("an expired code and a withdrawn one are refused as an unknown one is; broken requests name their field; guessing is throttled", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, ann in
            let tomorrow = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
            let expiring = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 2, "expiresAt": "\#(tomorrow)"}"#)
            // Today the batch's codes are good (Dan's clock is the store's).
            let dan = try await http.createAccount()
            #expect(try await Self.redeem(http, expiring.codes[1], token: dan.token).status == 200)
            // The account's clock two days on (the sandbox's): the code has expired for it.
            let body = String(decoding: try JSONEncoder.kiosk.encode(SandboxAccountSettings(renewals: nil, advanceSeconds: 2 * 86_400)), as: UTF8.self)
            #expect(try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/sandbox", token: server.adminToken, json: body).status == 200)
            let expired = try await Self.redeem(http, expiring.codes[0], token: ann.token)
            #expect(expired.status == 400 && (try? expired.decode(APIError.self).code) == "invalid_code")

            let batch = try await Self.make(http, server, #"{"productId": "\#(Self.issue)", "count": 2}"#)
            let revoked = try await http.send("POST", "/v1/admin/codes/\(batch.batch)/revoke", token: server.adminToken)
            #expect(revoked.status == 200 && String(decoding: revoked.body, as: UTF8.self).contains(#""withdrawn":2"#))
            let bo = try await http.createAccount()
            #expect(try await Self.redeem(http, batch.codes[0], token: bo.token).status == 400)
            #expect(try await http.send("POST", "/v1/admin/codes/batch_nothing/revoke", token: server.adminToken).status == 404)
            #expect(try await Self.redeem(http, batch.codes[1], token: bo.token).status == 400, "withdrawn")

            for (json, field) in [(#"{"productId": "\#(Self.book)", "count": 0}"#, "count"), (#"{"productId": "\#(Self.book)", "code": "ab", "limit": 1}"#, "code"),
                                  (#"{"productId": "\#(Self.book)", "code": "GOODCODE"}"#, "limit"), (#"{"productId": "\#(Self.pack5)", "count": 1}"#, "credit pack"),
                                  (#"{"productId": "\#(Self.book)", "count": 1, "code": "BOTH1234", "limit": 1}"#, "not both")] {
                let refused = try await http.send("POST", "/v1/admin/codes", token: server.adminToken, json: json)
                #expect(refused.status == 400 && Self.message(refused).contains(field), "\(json): \(Self.message(refused))")
            }
            #expect(try await http.send("POST", "/v1/admin/codes", token: ann.token, json: #"{"productId": "\#(Self.book)", "count": 1}"#).status == 401, "a reader is no operator")

            // Guesses: the account's bucket (ten at once) runs out.
            let carol = try await http.createAccount()
            var statuses: [Int] = []
            for guess in 0..<12 { statuses.append(try await Self.redeem(http, "GUESS\(guess)XYZ", token: carol.token).status) }
            #expect(statuses.prefix(10).allSatisfy { $0 == 400 } && statuses.last == 429, "\(statuses)")
        }
    }

    @Test("a code redeemed on /account puts its book in the library; a wrong one is said on the page", arguments: [TestEngine.sqlite])
    func onTheAccountPage(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let made = try await Self.make(http, server, #"{"productId": "com.kiosk.books.river-of-maps", "count": 1}"#)
            _ = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account")
            let page = String(decoding: try await browser.get("/account").body, as: UTF8.self)
            #expect(page.contains(#"action="/account/redeem-code""#) && page.components(separatedBy: #"id="code""#).count <= 2, "one element per id")
            let wrong = String(decoding: try await browser.post("/account/redeem-code", ["csrf": browser.csrf, "offerCode": "NOPE-NOPE"]).body, as: UTF8.self)
            #expect(wrong.contains("cannot be redeemed"), "\(wrong)")
            let done = String(decoding: try await browser.post("/account/redeem-code", ["csrf": browser.csrf, "offerCode": made.codes[0]]).body, as: UTF8.self)
            #expect(done.contains("Redeemed: A River of Maps is in your library."), "\(done)")
            #expect(String(decoding: try await browser.get("/account/library").body, as: UTF8.self).contains("A River of Maps"))
        }
    }

    /// A purchase with an offer code, on the sandbox's pretend payment.
    static func buy(_ http: StoreHTTP, _ productId: String, code: String, token: String, method: PaymentMethod = .approve,
                    key: String = UUID().uuidString) async throws -> StoreHTTP.Reply {
        try await http.send("POST", "/v1/payments", token: token, json: """
            {"productId": "\(productId)", "quantity": 1, "paymentMethod": "\(method.rawValue)", "idempotencyKey": "\(key)", "offerCode": "\(code)"}
            """)
    }

    static let plan = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// Harbor Monthly's plan with a 14-day trial, for codes that give it.
    static func withTrial(_ store: SampleStore) throws {
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == Self.plan {
                products[index]["introductoryOffer"] = ["type": "freeTrial", "days": 14]
            }
        }
    }

    @Test("codes used when buying: 20% off, 1.50 off and a subscription's trial for a reader who had one; each priced as said, on the receipt, spent once; not spent by a decline or a replay", arguments: TestEngine.all)
    func benefits(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, prepare: Self.withTrial) { server, http, ann in
            let percent = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 1, "benefit": {"kind": "percentOff", "value": 20}}"#)
            #expect(percent.benefit == .percentOff(20))
            // Declined: nothing charged, the code not spent.
            let declined = try await Self.buy(http, Self.book, code: percent.codes[0], token: ann.token, method: .decline)
            #expect(declined.status == 402 || declined.status == 400, "\(Self.message(declined))")
            let key = UUID().uuidString
            let bought = try await Self.buy(http, Self.book, code: percent.codes[0], token: ann.token, key: key)
            #expect(bought.status == 201 || bought.status == 200, "\(Self.message(bought))")
            let receipt = try SubscriptionFixture.claims(try #require(try bought.decode(PaymentResponse.self).transaction.signedTransaction))
            #expect(receipt.offerType == "offerCode")
            // 4.99 less 20 % (0.998, to the nearest cent 1.00).
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [399])
            // The same purchase sent again: the first answer, the code counted once.
            #expect(try await Self.buy(http, Self.book, code: percent.codes[0], token: ann.token, key: key).status < 300)
            #expect(try await http.send("GET", "/v1/admin/codes", token: server.adminToken).decode([AdminCodeBatchRow].self).first?.redeemed == 1)

            let amount = try await Self.make(http, server, #"{"productId": "\#(Self.plan)", "code": "SAVE150", "limit": 5, "benefit": {"kind": "amountOff", "value": 150}}"#)
            #expect(amount.benefit == .amountOff(150))
            let bo = try await http.createAccount()
            let sub = try await Self.buy(http, Self.plan, code: "save-150", token: bo.token)
            #expect(sub.status < 300, "\(Self.message(sub))")
            let subReceipt = try SubscriptionFixture.claims(try #require(try sub.decode(PaymentResponse.self).transaction.signedTransaction))
            #expect(subReceipt.offerType == "offerCode" && subReceipt.offerPeriod == "P1M", "a code's price, not the trial: offers do not stack")
            #expect(try await http.charges(accountId: bo.accountId, adminToken: server.adminToken) == [99])

            // Bo had a subscription in the group: no trial by right, but a code gives it.
            let trial = try await Self.make(http, server, #"{"productId": "\#(Self.plan)", "count": 1, "benefit": {"kind": "introductoryOffer"}}"#)
            let cancelled = try await http.send("POST", "/v1/subscriptions/\(subReceipt.originalTransactionId)/cancel", token: bo.token)
            #expect(cancelled.status == 200)
            _ = try await http.send("POST", "/v1/admin/accounts/\(bo.accountId)/sandbox", token: server.adminToken, json: #"{"advanceSeconds": 3000000}"#)
            _ = try await http.send("POST", "/v1/admin/renewals/run", token: server.adminToken)
            let again = try await Self.buy(http, Self.plan, code: trial.codes[0], token: bo.token)
            #expect(again.status < 300, "\(Self.message(again))")
            let againReceipt = try SubscriptionFixture.claims(try #require(try again.decode(PaymentResponse.self).transaction.signedTransaction))
            #expect(againReceipt.offerType == "freeTrial" && againReceipt.offerPeriod == "P14D")
            #expect(try await http.charges(accountId: bo.accountId, adminToken: server.adminToken) == [99], "the trial charges nothing")
        }
    }

    @Test("each kind of code, one-time, used by six accounts at once: one purchase gets it, the others are refused and charged nothing", arguments: TestEngine.all)
    func benefitRaces(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, prepare: Self.withTrial, configure: { $0.rateLimits = .off }) { server, http, _ in
            for (product, benefit) in [(Self.book, #"{"kind": "percentOff", "value": 50}"#), (Self.book, #"{"kind": "amountOff", "value": 100}"#),
                                       (Self.plan, #"{"kind": "introductoryOffer"}"#)] {
                let made = try await Self.make(http, server, #"{"productId": "\#(product)", "count": 1, "benefit": \#(benefit)}"#)
                var accounts: [AccountCreated] = []
                for _ in 0..<6 { accounts.append(try await http.createAccount()) }
                let statuses = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                    for account in accounts {
                        group.addTask { (account.accountId, try await Self.buy(http, product, code: made.codes[0], token: account.token).status) }
                    }
                    return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                #expect(statuses.values.filter { $0 < 300 }.count == 1, "\(benefit): \(statuses)")
                for account in accounts where (statuses[account.accountId] ?? 500) >= 300 {
                    #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [], "a refused purchase charged nothing")
                }
            }
        }
    }

    @Test("a code where it does not belong: a free one at a purchase, one that takes money off redeemed alone, one for another product, one off a price by its whole", arguments: [TestEngine.sqlite])
    func misplaced(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, ann in
            func code(_ reply: StoreHTTP.Reply) -> String { (try? reply.decode(APIError.self).code) ?? "\(reply.status)" }
            let free = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 1}"#)
            #expect(code(try await Self.buy(http, Self.book, code: free.codes[0], token: ann.token)) == "code_redeemed_alone")
            let off = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 1, "benefit": {"kind": "percentOff", "value": 10}}"#)
            let alone = try await Self.redeem(http, off.codes[0], token: ann.token)
            #expect(code(alone) == "code_used_when_buying" && Self.message(alone).contains("--code"), "\(Self.message(alone))")
            #expect(code(try await Self.buy(http, "com.kiosk.books.lighthouse-keeper", code: off.codes[0], token: ann.token)) == "code_for_another_product")
            for bad in [#"{"kind": "amountOff", "value": 499}"#, #"{"kind": "percentOff", "value": 100}"#, #"{"kind": "introductoryOffer"}"#, #"{"kind": "half"}"#] {
                let refused = try await http.send("POST", "/v1/admin/codes", token: server.adminToken, json: #"{"productId": "\#(Self.book)", "count": 1, "benefit": \#(bad)}"#)
                #expect(refused.status == 400 && !Self.message(refused).isEmpty, "\(bad): \(Self.message(refused))")
            }
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [])
            // Guessing through purchases is throttled as redemptions are: the account's bucket runs out.
            let carol = try await http.createAccount()
            var statuses: [Int] = []
            for guess in 0..<12 { statuses.append(try await Self.buy(http, Self.book, code: "GUESS\(guess)XYZ", token: carol.token).status) }
            #expect(statuses.prefix(10).allSatisfy { $0 == 400 } && statuses.last == 429, "\(statuses)")
        }
    }

    @Test("the shop's buy page takes a code: the purchase is charged the code's price, and a wrong code is said on the page with nothing charged", arguments: [TestEngine.sqlite])
    func onTheBuyPage(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let made = try await Self.make(http, server, #"{"productId": "\#(Self.book)", "count": 1, "benefit": {"kind": "amountOff", "value": 100}}"#)
            let ann = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/buy/\(Self.book)")
            let page = String(decoding: try await browser.get("/account/buy/\(Self.book)").body, as: UTF8.self)
            #expect(page.contains(#"name="offerCode""#), "\(page)")
            let key = try #require(page.firstMatch(of: /name="key" value="([^"]+)"/)?.1)
            let wrong = String(decoding: try await browser.post("/account/buy/\(Self.book)", ["csrf": browser.csrf, "key": String(key), "offerCode": "NOPE-NOPE"]).body, as: UTF8.self)
            #expect(wrong.contains("cannot be redeemed"), "\(wrong)")
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [])
            let paid = try await browser.post("/account/buy/\(Self.book)", ["csrf": browser.csrf, "key": String(key), "offerCode": made.codes[0]])
            #expect(paid.status == 303, "\(String(decoding: paid.body, as: UTF8.self))")
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [399])
        }
    }
}
