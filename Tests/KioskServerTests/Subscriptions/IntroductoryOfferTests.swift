import Foundation
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// Introductory offers (issue 65): a free trial, a price paid as it goes and one paid up front,
/// each for a reader's first subscription in its group, then renewed at the normal price.
@Suite("Introductory offers")
struct IntroductoryOfferTests: SubscriptionSuite, StoreSuite {
    static let yearly = "com.kiosk.magazines.harbor-monthly.subscription.yearly"
    static let chartsPlan = "com.kiosk.magazines.coastal-charts.yearly"

    /// The sample store with the monthly plan carrying `offer`, and a yearly plan in the same group
    /// carrying a 30-day trial.
    static func withOffer(_ offer: [String: Any], engine: TestEngine, _ body: @Sendable (Fixture) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                products[index]["introductoryOffer"] = offer
                var yearly = products[index]
                yearly["id"] = Self.yearly
                yearly["title"] = "Harbor Monthly, yearly subscription"
                yearly["price"] = "24.99"
                yearly["periodMonths"] = 12
                yearly["introductoryOffer"] = ["type": "freeTrial", "days": 30]
                products.append(yearly)
            }
        }
        // A plan of the PDF magazine, which reading apps are offered.
        try store.editCatalog("publications.json") { products in
            products.append(["id": Self.chartsPlan, "kind": "subscription", "title": "Coastal Charts, yearly", "summary": "Every issue for a year.",
                             "price": "9.99", "currency": "USD", "series": "com.kiosk.magazines.coastal-charts", "periodMonths": 12,
                             "introductoryOffer": ["type": "freeTrial", "periods": 1]])
        }
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = try await engine.freshDatabase()
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            try await body(Fixture(server: server, http: http, account: try await http.createAccount()))
        }
    }

    @Test("a 14-day free trial charges nothing, says so on the receipt, then renews at the full price; a second subscription in the group gets no trial and is told why", arguments: TestEngine.all)
    func freeTrial(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "freeTrial", "days": 14], engine: engine) { store in
            let now = try await store.subscriptions().now
            let first = try await store.buy()
            #expect(first.claims.offerType == "freeTrial" && first.claims.offerPeriod == "P14D")
            let expires = try #require(first.claims.expires)
            #expect(abs(expires.timeIntervalSince(now.addingTimeInterval(14 * Self.day))) < 60, "\(expires) vs \(now)")
            #expect(try await store.charges() == [], "a trial charges nothing")

            #expect(try await store.advance(to: expires) == 1)
            let periods = try await store.periods()
            #expect(periods.count == 2 && periods[1].offerType == nil && periods[1].originalTransactionId == first.claims.originalTransactionId)
            #expect(try await store.charges() == [249], "the trial's end renews at the normal price")
            // The operator's figures: one trial taken, gone on to the full price.
            #expect(try await store.server.store.reports.offerFigures(since: now.addingTimeInterval(-Self.day)) == OfferFigures(taken: ["freeTrial": 1], converted: 1))

            // Another plan of the group: not sold while the monthly runs (both would be charged)...
            let beside = try await store.http.pay(Self.yearly, token: store.account.token)
            #expect(beside.status == 409 && (try? beside.decode(APIError.self).code) == "plan_running", "\(Self.message(beside))")
            // ...and once it has ended, sold without a trial: the trial was this account's.
            let cancelled = try await store.http.send("POST", "/v1/subscriptions/\(first.claims.originalTransactionId)/cancel", token: store.account.token)
            #expect(cancelled.status == 200, "\(Self.message(cancelled))")
            #expect(try await store.advance(to: try #require(periods.last?.expires)) == 1)
            let yearly = try await store.http.pay(Self.yearly, token: store.account.token)
            let payment = try yearly.decode(PaymentResponse.self)
            let claims = try Self.claims(try #require(payment.transaction.signedTransaction))
            #expect(claims.offerType == nil && payment.transaction.message?.contains("introductory offer is for a first subscription") == true,
                    "\(String(describing: payment.transaction.message))")
            #expect(try await store.charges() == [249, 2499])
        }
    }

    @Test("pay as you go: three periods at 0.99, then 2.49; pay up front: 4.99 for six months, then 2.49", arguments: TestEngine.all)
    func discountedPrices(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "payAsYouGo", "price": "0.99", "periods": 3], engine: engine) { store in
            let first = try await store.buy()
            #expect(first.claims.offerType == "payAsYouGo" && first.claims.offerPeriod == "P1M")
            var expires = try #require(first.claims.expires)
            for _ in 1...3 {
                #expect(try await store.advance(to: expires) == 1)
                expires = try #require(try await store.periods().last?.expires)
            }
            #expect(try await store.charges() == [99, 99, 99, 249])
            #expect(try await store.periods().map { $0.offerType ?? "-" } == ["payAsYouGo", "payAsYouGo", "payAsYouGo", "-"])
        }
        try await Self.withOffer(["type": "payUpFront", "price": "4.99", "periods": 6], engine: engine) { store in
            let now = try await store.subscriptions().now
            let first = try await store.buy()
            #expect(first.claims.offerType == "payUpFront" && first.claims.offerPeriod == "P6M")
            let expires = try #require(first.claims.expires)
            #expect(expires > now.addingTimeInterval(180 * Self.day) && expires < now.addingTimeInterval(185 * Self.day))
            #expect(try await store.advance(to: expires) == 1)
            #expect(try await store.charges() == [499, 249])
        }
    }

    @Test("a subscription the operator granted, or one refunded, is a subscription had: no trial after it", arguments: TestEngine.all)
    func acrossChannels(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "freeTrial", "days": 14], engine: engine) { store in
            let grant = try await store.http.send("POST", "/v1/admin/accounts/\(store.account.accountId)/grant", token: store.admin,
                                                  json: #"{"productId": "\#(Self.yearly)", "quantity": 1, "reason": "a prize", "idempotencyKey": "g1"}"#)
            #expect(grant.status == 200 || grant.status == 201, "\(String(decoding: grant.body, as: UTF8.self))")
            let granted = try grant.decode(StoreTransaction.self)
            #expect(try Self.claims(try #require(granted.signedTransaction)).offerType == nil, "an operator's grant is no trial")
            // Given for nothing, it does not renew by itself: nobody agreed to pay.
            #expect(try await store.subscription(granted.transactionId).autoRenew == false)
            // Taken back (a plan of the group may not run beside another): it was still had.
            let revoked = try await store.http.send("POST", "/v1/admin/transactions/\(granted.transactionId)/revoke", token: store.admin, json: #"{"reason": "test"}"#)
            #expect(revoked.status == 200, "\(Self.message(revoked))")
            let monthly = try await store.buy()
            #expect(monthly.claims.offerType == nil)
            #expect(try await store.charges() == [249])

            // A trial taken and refunded was still taken.
            let other = try await store.http.createAccount()
            let trial = try await store.http.pay(SampleStore.harborMonthly, token: other.token).decode(PaymentResponse.self).transaction
            #expect(try Self.claims(try #require(trial.signedTransaction)).offerType == "freeTrial")
            let refunded = try await store.http.send("POST", "/v1/admin/transactions/\(trial.transactionId)/refund", token: store.admin, json: #"{"reason": "test"}"#)
            #expect(refunded.status == 200, "\(String(decoding: refunded.body, as: UTF8.self))")
            let again = try await store.http.pay(Self.yearly, token: other.token).decode(PaymentResponse.self).transaction
            #expect(try Self.claims(try #require(again.signedTransaction)).offerType == nil)
        }
    }

    @Test("a plan whose renewal is failing (billing retry) still runs: another plan of its group is refused, by payment, by Ask to Buy and by a code", arguments: TestEngine.all)
    func failingPlanRuns(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "freeTrial", "days": 14], engine: engine) { store in
            let first = try await store.buy()
            try await store.sandbox(renewals: .fail)
            #expect(try await store.advance(to: try #require(first.claims.expires)) == 1)
            #expect(try await store.subscription(first.claims.originalTransactionId).state == .billingRetry)
            let paid = try await store.http.pay(Self.yearly, token: store.account.token)
            #expect(paid.status == 409 && (try? paid.decode(APIError.self).code) == "plan_running", "\(Self.message(paid))")
            let asked = try await store.http.pay(Self.yearly, token: store.account.token, method: .defer)
            let pending = try asked.decode(PaymentResponse.self).transaction
            let approved = try await store.http.send("POST", "/v1/admin/transactions/\(pending.transactionId)/approve", token: store.admin)
            #expect(approved.status == 409, "\(Self.message(approved))")
            let code = try await store.http.send("POST", "/v1/admin/codes", token: store.admin, json: #"{"productId": "\#(Self.yearly)", "count": 1}"#)
                .decode(AdminCodesCreated.self)
            let redeemed = try await store.http.send("POST", "/v1/codes/redeem", token: store.account.token, json: #"{"code": "\#(code.codes[0])"}"#)
            #expect(redeemed.status == 409 && (try? redeemed.decode(APIError.self).code) == "plan_running", "\(Self.message(redeemed))")
            #expect(try await store.charges() == [], "nothing charged beside the failing plan")
        }
    }

    @Test("four first subscriptions of the group at once, each with its own key: one plan runs, with one trial, whatever the order", arguments: TestEngine.all)
    func concurrentTrials(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "freeTrial", "days": 14], engine: engine) { store in
            let products = [SampleStore.harborMonthly, Self.yearly, SampleStore.harborMonthly, Self.yearly]
            let replies = try await Self.concurrently(products.count) { index in
                try await store.http.pay(products[index], token: store.account.token)
            }
            // One plan of the group wins; the other plan is refused (both would be charged), the same one a free re-buy.
            #expect(replies.allSatisfy { $0.status == 200 || $0.status == 409 } && replies.contains { $0.status == 409 }, "\(replies.map(\.status))")
            let offers = try replies.filter { $0.status == 200 }.compactMap { try $0.decode(PaymentResponse.self).transaction.signedTransaction }.map { try Self.claims($0).offerType }
            #expect(offers.compactMap { $0 }.count == 1, "\(offers)")
            let running = try await store.subscriptions().subscriptions.filter { $0.state == .active }
            #expect(running.count == 1, "one plan of the group runs: \(running.map(\.productId))")
        }
    }

    @Test("the offer is shown where the price is: the shop's page, the buy page (with whether this account gets it, and why not), both OPDS formats", arguments: [TestEngine.sqlite])
    func shown(engine: TestEngine) async throws {
        try await Self.withOffer(["type": "freeTrial", "days": 14], engine: engine) { store in
            let page = String(decoding: try await store.http.send("GET", "/products/\(SampleStore.harborMonthly)").body, as: UTF8.self)
            #expect(page.contains("New subscribers: 14 days free, then 2.49 USD a month."), "\(page)")
            _ = try await WebSession.account(store.http, "ann@example.com")
            let browser = try await WebSession.signIn(store.http, "ann@example.com", next: "/account/buy/\(SampleStore.harborMonthly)")
            let first = String(decoding: try await browser.get("/account/buy/\(SampleStore.harborMonthly)").body, as: UTF8.self)
            #expect(first.contains("Your first subscription: 14 days free, then 2.49 USD a month.") && first.contains("Start the free trial"), "\(first)")
            let started = try await browser.post("/account/buy/\(SampleStore.harborMonthly)", ["csrf": browser.csrf, "key": UUID().uuidString])
            #expect(started.status == 303)
            let yearly = String(decoding: try await browser.get("/account/buy/\(Self.yearly)").body, as: UTF8.self)
            #expect(yearly.contains("a plan of the same magazine") && !yearly.contains("<form method=\"post\" action=\"/account/buy"), "no second plan beside the first: \(yearly)")

            let atom = String(decoding: try await store.http.send("GET", "/opds/v1.2/series/com.kiosk.magazines.coastal-charts").body, as: UTF8.self)
            #expect(atom.contains(#"title="New subscribers: 1 year free, then 9.99 USD a year""#), "\(atom)")
            let json = String(decoding: try await store.http.send("GET", "/opds/series/com.kiosk.magazines.coastal-charts").body, as: UTF8.self)
            #expect(json.contains(#""title":"New subscribers: 1 year free, then 9.99 USD a year""#), "\(json)")
        }
    }

    static func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> StoreHTTP.Reply) async throws -> [StoreHTTP.Reply] {
        try await withThrowingTaskGroup(of: StoreHTTP.Reply.self) { group in
            for index in 0..<count { group.addTask { try await body(index) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }
}
