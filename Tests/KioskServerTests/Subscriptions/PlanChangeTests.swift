import Foundation
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// Plans in a group (issue 65), by the App Store's rules: an upgrade at once with the unused part
/// of the running period credited in the ledger, a downgrade (or a crossgrade to another length)
/// at the next renewal, one plan per group whatever the races.
@Suite("Plan changes")
struct PlanChangeTests: SubscriptionSuite, StoreSuite {
    /// Level 1, monthly: an upgrade from the monthly plan (level 2).
    static let premium = "com.kiosk.magazines.harbor-monthly.subscription.premium"
    /// Level 2, yearly: a crossgrade of another length from the monthly plan.
    static let yearly = "com.kiosk.magazines.harbor-monthly.subscription.yearly"

    /// The sample store with the monthly plan at level 2, a premium monthly plan at level 1 and a
    /// yearly plan at level 2, all in Harbor Monthly's group.
    static func withPlans(engine: TestEngine, _ body: @Sendable (Fixture) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try Self.addPlans(to: store, yearly: true)
        try store.editCatalog("publications.json") { products in
            products.append(["id": Self.otherGroup, "kind": "subscription", "title": "Coastal Charts, yearly", "summary": "Every issue for a year.",
                             "price": "9.99", "currency": "USD", "series": "com.kiosk.magazines.coastal-charts", "periodMonths": 12])
        }
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = try await engine.freshDatabase()
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            try await body(Fixture(server: server, http: http, account: try await http.createAccount()))
        }
    }

    /// The monthly plan at level 2, with a premium plan at level 1 (and, when asked, a yearly one at
    /// level 2) in its group: the sample store's plans to move between.
    static func addPlans(to store: SampleStore, yearly: Bool) throws {
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                products[index]["planLevel"] = 2
                var premium = products[index]
                premium["id"] = Self.premium
                premium["title"] = "Harbor Monthly Premium, monthly"
                premium["price"] = "4.99"
                premium["planLevel"] = 1
                products.append(premium)
                if yearly {
                    var plan = products[index]
                    plan["id"] = Self.yearly
                    plan["title"] = "Harbor Monthly, yearly"
                    plan["price"] = "24.99"
                    plan["periodMonths"] = 12
                    products.append(plan)
                }
            }
        }
    }

    /// A plan of another magazine's group.
    static let otherGroup = "com.kiosk.magazines.coastal-charts.yearly"

    static func change(_ store: Fixture, _ id: String, to productId: String, key: String = UUID().uuidString, token: String? = nil) async throws -> StoreHTTP.Reply {
        try await store.http.send("POST", "/v1/subscriptions/\(id)/change", token: token ?? store.account.token,
                                  json: #"{"productId": "\#(productId)", "idempotencyKey": "\#(key)"}"#)
    }

    static func notifications(_ store: Fixture) async throws -> [String] {
        try await StripeSubscriptionTests.notifications(store.server, store.account)
    }

    @Test("an upgrade mid-period starts the premium plan at once, charges it, credits the unused half of the monthly period, renews as premium; a later refund of the old period pays back only the rest", arguments: TestEngine.all)
    func upgrade(engine: TestEngine) async throws {
        try await Self.withPlans(engine: engine) { store in
            let first = try await store.buy()
            let id = first.claims.originalTransactionId
            let start = first.claims.purchased
            let end = try #require(first.claims.expires)
            // Half the period gone.
            _ = try await store.sandbox(advance: end.timeIntervalSince(start) / 2)
            let key = UUID().uuidString
            let reply = try await Self.change(store, id, to: Self.premium, key: key)
            #expect(reply.status == 200, "\(Self.message(reply))")
            let result = try reply.decode(PlanChangeResult.self)
            #expect(result.change == .upgrade && result.atOnce && result.subscription.productId == Self.premium && result.subscription.renewsAs == nil)
            // Half of 2.49, rounded down, give or take the seconds the test's own steps took.
            #expect((123...124).contains(result.creditedCents), "\(result.creditedCents)")
            let period = try #require(result.transaction)
            let claims = try Self.claims(try #require(period.signedTransaction))
            #expect(claims.productId == Self.premium && claims.originalTransactionId == id)
            #expect(try await store.charges() == [249, 499, -result.creditedCents], "the ledger: the monthly, the premium, the credit")
            #expect(try await Self.notifications(store) == ["SUBSCRIBED INITIAL_BUY", "DID_CHANGE_RENEWAL_PREF UPGRADE"])
            // The period left ends at the change (its unused part was credited): its receipt, signed
            // again, says so; the account runs premium alone; the monthly plan is not "owned" beside it.
            let left = try #require(try await store.http.send("GET", "/v1/transactions", token: store.account.token).decode(TransactionPage.self)
                .transactions.first { $0.transactionId == first.transaction.transactionId })
            let leftClaims = try Self.claims(try #require(left.signedTransaction))
            let leftEnd = try #require(leftClaims.expires)
            #expect(leftEnd < end && leftEnd <= claims.purchased.addingTimeInterval(1), "\(leftClaims)")
            let summary = try await store.http.send("GET", "/v1/account", token: store.account.token).decode(AccountSummary.self)
            #expect(summary.subscriptions.filter(\.active).map(\.productId) == [Self.premium], "\(summary.subscriptions)")
            let beside = try await store.http.pay(Self.monthly, token: store.account.token)
            #expect(beside.status == 409 && (try? beside.decode(APIError.self).code) == "plan_running", "\(Self.message(beside))")

            // The same request again: the first answer, nothing charged twice.
            let again = try await Self.change(store, id, to: Self.premium, key: key).decode(PlanChangeResult.self)
            #expect(again.transaction?.transactionId == period.transactionId && again.creditedCents == result.creditedCents)
            #expect(try await store.charges() == [249, 499, -result.creditedCents])
            // At the premium period's end it renews as premium.
            #expect(try await store.advance(to: try #require(claims.expires)) == 1)
            #expect(try await store.charges() == [249, 499, -result.creditedCents, 499])
            #expect(try await store.subscription(id).productId == Self.premium)

            // The monthly period refunded later: only what was not credited goes back.
            let refunded = try await store.http.send("POST", "/v1/admin/transactions/\(first.transaction.transactionId)/refund", token: store.admin, json: #"{"reason": "test"}"#)
            #expect(refunded.status == 200, "\(Self.message(refunded))")
            #expect(try refunded.decode(AdminRevocation.self).refundedCents == 249 - result.creditedCents)
            #expect(try await store.charges().reduce(0, +) == 499 + 499, "the ledger sums to what was really paid")
        }
    }

    @Test("a downgrade, and a crossgrade to another length, wait for the renewal; asking for the running plan undoes the wait; the renewal charges the new plan", arguments: TestEngine.all)
    func downgradeAtRenewal(engine: TestEngine) async throws {
        try await Self.withPlans(engine: engine) { store in
            let paid = try await store.http.pay(Self.premium, token: store.account.token).decode(PaymentResponse.self).transaction
            let claims = try Self.claims(try #require(paid.signedTransaction))
            let id = claims.originalTransactionId

            var result = try await Self.change(store, id, to: Self.monthly).decode(PlanChangeResult.self)
            #expect(result.change == .downgrade && !result.atOnce && result.transaction == nil && result.creditedCents == 0)
            #expect(result.subscription.productId == Self.premium && result.subscription.renewsAs == Self.monthly)
            // Undone by asking for the running plan; then the yearly plan (another length) waits too.
            result = try await Self.change(store, id, to: Self.premium).decode(PlanChangeResult.self)
            #expect(result.change == nil && result.subscription.renewsAs == nil, "\(result.message)")
            result = try await Self.change(store, id, to: Self.monthly).decode(PlanChangeResult.self)
            #expect(result.subscription.renewsAs == Self.monthly)
            #expect(try await store.charges() == [499], "nothing charged before the renewal")
            #expect(try await Self.notifications(store) == [
                "SUBSCRIBED INITIAL_BUY", "DID_CHANGE_RENEWAL_PREF DOWNGRADE", "DID_CHANGE_RENEWAL_PREF -", "DID_CHANGE_RENEWAL_PREF DOWNGRADE",
            ])

            #expect(try await store.advance(to: try #require(claims.expires)) == 1)
            let renewed = try await store.subscription(id)
            #expect(renewed.productId == Self.monthly && renewed.renewsAs == nil && renewed.state == .active)
            #expect(try await store.charges() == [499, 249], "the renewal charges the plan it moved to")

            // Monthly to yearly: the same level, another length, at the renewal.
            result = try await Self.change(store, id, to: Self.yearly).decode(PlanChangeResult.self)
            #expect(result.change == .crossgrade && !result.atOnce && result.subscription.renewsAs == Self.yearly)
            #expect(try await store.advance(to: renewed.expiresDate) == 1)
            #expect(try await store.subscription(id).productId == Self.yearly)
            #expect(try await store.charges() == [499, 249, 2499])
        }
    }

    @Test("changes raced at once, and one asked twice with its key, end with one plan, one charge and one credit", arguments: TestEngine.all)
    func racedChanges(engine: TestEngine) async throws {
        try await Self.withPlans(engine: engine) { store in
            let first = try await store.buy()
            let id = first.claims.originalTransactionId
            let key = UUID().uuidString
            let replies = try await withThrowingTaskGroup(of: StoreHTTP.Reply.self) { group in
                for index in 0..<8 {
                    group.addTask { try await Self.change(store, id, to: Self.premium, key: index < 4 ? key : UUID().uuidString) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == 200 }, "\(replies.map(Self.message))")
            let results = try replies.map { try $0.decode(PlanChangeResult.self) }
            #expect(Set(results.compactMap(\.transaction?.transactionId)).count == 1, "every answer names the one period made")
            let charges = try await store.charges()
            #expect(charges.filter { $0 > 0 } == [249, 499] && charges.filter { $0 < 0 }.count == 1, "\(charges)")
            #expect(try await store.subscriptions().subscriptions.map(\.productId) == [Self.premium])
        }
    }

    @Test("refused, with nothing changed: another group's plan, an unknown product, another account's subscription, an ended one, a declined charge, a reused key", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        try await Self.withPlans(engine: engine) { store in
            let first = try await store.buy()
            let id = first.claims.originalTransactionId
            func code(_ reply: StoreHTTP.Reply) -> String { (try? reply.decode(APIError.self).code) ?? "\(reply.status)" }

            #expect(code(try await Self.change(store, id, to: "com.kiosk.books.lighthouse-keeper")) == "unknown_product")
            #expect(code(try await Self.change(store, id, to: Self.otherGroup)) == "not_in_group")
            #expect(code(try await Self.change(store, id, to: "com.example.none")) == "unknown_product")
            let stranger = try await store.http.createAccount()
            let foreign = try await Self.change(store, id, to: Self.premium, token: stranger.token)
            #expect(foreign.status == 404 && code(foreign) == "unknown_subscription")
            try await store.sandbox(renewals: .fail)
            #expect(code(try await Self.change(store, id, to: Self.premium)) == "payment_declined")
            try await store.sandbox(renewals: .succeed)
            // A key used for one change cannot make another.
            let key = UUID().uuidString
            #expect(try await Self.change(store, id, to: Self.premium, key: key).status == 200)
            #expect(code(try await Self.change(store, id, to: Self.monthly, key: key)) == "idempotency_key_reused")
            #expect(try await store.charges().filter { $0 > 0 } == [249, 499])

            let cancelled = try await store.http.send("POST", "/v1/subscriptions/\(id)/cancel", token: store.account.token)
            #expect(cancelled.status == 200)
            #expect(try await store.advance(to: try await store.subscription(id).expiresDate) == 1)
            #expect(code(try await Self.change(store, id, to: Self.monthly)) == "subscription_expired")

            // A subscription whose only period was refunded has ended: said so, never a 500.
            let bo = try await store.http.createAccount()
            let boughtByBo = try await store.http.pay(Self.monthly, token: bo.token).decode(PaymentResponse.self).transaction
            let refunded = try await store.http.send("POST", "/v1/admin/transactions/\(boughtByBo.transactionId)/refund", token: store.admin, json: #"{"reason": "test"}"#)
            #expect(refunded.status == 200)
            let afterRefund = try await Self.change(store, boughtByBo.transactionId, to: Self.premium, token: bo.token)
            #expect(afterRefund.status == 409 && code(afterRefund) == "subscription_expired", "\(Self.message(afterRefund))")
        }
    }

    @Test("on /account: each running plan offers the group's other plans with what moving does; the form's own key makes a reload one change", arguments: [TestEngine.sqlite])
    func onTheAccountPage(engine: TestEngine) async throws {
        try await Self.withPlans(engine: engine) { store in
            let ann = try await WebSession.account(store.http, "ann@example.com")
            let bought = try await store.http.pay(Self.monthly, token: ann.token).decode(PaymentResponse.self).transaction
            let browser = try await WebSession.signIn(store.http, "ann@example.com", next: "/account")
            let page = String(decoding: try await browser.get("/account").body, as: UTF8.self)
            #expect(page.contains(#"action="/account/subscriptions/change""#))
            #expect(page.contains("Harbor Monthly Premium, monthly, 4.99 USD: upgrade, at once") && page.contains("Harbor Monthly, yearly, 24.99 USD: crossgrade, at the renewal"), "\(page)")
            let key = try #require(page.firstMatch(of: /name="key" value="([^"]+)"/)?.1)
            let fields = ["csrf": browser.csrf, "key": String(key), "subscription": bought.transactionId, "plan": Self.premium]
            let done = String(decoding: try await browser.post("/account/subscriptions/change", fields).body, as: UTF8.self)
            #expect(done.contains("An upgrade: it starts now"), "\(done)")
            _ = try await browser.post("/account/subscriptions/change", fields)
            #expect(try await store.http.charges(accountId: ann.accountId, adminToken: store.admin).filter { $0 > 0 } == [249, 499], "a reload changes nothing more")
        }
    }
}
