import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import Logging
import KioskTestSupport
import KioskTransfer
import Testing

/// A subscription's whole life with the account's clock moved forward: renewals, billing retry,
/// grace, recovery, expiry, and the content each state entitles. Renewal passes are run through
/// the admin call, so each step happens when the test says.
@Suite("A subscription's life: renewals, billing retry, grace and expiry")
struct SubscriptionRenewalTests: SubscriptionSuite, StoreSuite {
    @Test("a renewal is a change of the account: it comes after the device's feed cursor and wakes a waiting long poll", arguments: TestEngine.all)
    func renewalInChangeFeed(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: nil) { store in
            let first = try await store.buy()
            let expires = try #require(first.claims.expires)
            let seen = try await store.http.send("GET", "/v1/transactions", token: store.account.token).decode(TransactionPage.self)
            let cursor = try #require(seen.cursor)
            async let waiting = store.http.send("GET", "/v1/transactions?after=\(cursor)&wait=20", token: store.account.token)
            try await Task.sleep(for: .milliseconds(300))
            let clock = ContinuousClock()
            let began = clock.now
            #expect(try await store.advance(to: expires) == 1)
            let page = try await waiting.decode(TransactionPage.self)
            #expect(clock.now - began < .seconds(3))
            let renewed = try Self.claims(try #require(page.transactions.first?.signedTransaction))
            #expect(page.transactions.count == 1 && renewed.originalTransactionId == first.claims.originalTransactionId
                    && page.transactions.first?.transactionId != first.transaction.transactionId, "\(page.transactions)")
        }
    }

    @Test("a monthly subscription renews 3 times (3 charges, one original transaction, expiry advancing), then fails into grace and recovers", arguments: TestEngine.all)
    func renewsFailsRecovers(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: 6) { store in
            let first = try await store.buy()
            let original = first.claims.originalTransactionId
            var expires = try #require(first.claims.expires)
            for renewal in 1...3 {
                #expect(try await store.advance(to: expires) == 1)
                let periods = try await store.periods()
                #expect(periods.count == 1 + renewal)
                #expect(Set(periods.map(\.originalTransactionId)) == [original])
                let latest = try #require(periods.last?.expires)
                #expect(latest > expires.addingTimeInterval(27 * Self.day))
                // Each period starts where the last ended.
                #expect(abs((periods.last?.purchased ?? .distantPast).timeIntervalSince(expires)) < 0.01)
                expires = latest
                let info = try await store.subscription(original)
                #expect(info.state == .active && info.autoRenew && info.entitled)
            }
            #expect(try await store.charges() == [249, 249, 249, 249])

            try await store.sandbox(renewals: .fail)
            #expect(try await store.advance(to: expires) == 1)
            var info = try await store.subscription(original)
            #expect(info.state == .gracePeriod)
            #expect(info.entitled)
            #expect(info.failedAttempts == 1)
            #expect(abs((info.gracePeriodExpiresDate ?? .distantPast).timeIntervalSince(expires.addingTimeInterval(6 * Self.day))) < 1)
            // The retry a day later fails too: still in grace.
            #expect(try await store.advance(to: expires.addingTimeInterval(Self.day)) == 1)
            info = try await store.subscription(original)
            #expect(info.state == .gracePeriod && info.failedAttempts == 2)

            try await store.sandbox(renewals: .succeed)
            #expect(try await store.advance(to: expires.addingTimeInterval(3 * Self.day)) == 1)
            info = try await store.subscription(original)
            #expect(info.state == .active && info.failedAttempts == 0 && info.expirationReason == nil)
            #expect(try await store.charges() == [249, 249, 249, 249, 249])
            let recovered = try #require(try await store.periods().last)
            #expect(recovered.originalTransactionId == original)
            // A recovered period starts at the successful retry.
            #expect(abs(recovered.purchased.timeIntervalSince(expires.addingTimeInterval(3 * Self.day))) < 0.01)
        }
    }

    @Test("without grace, a renewal that keeps failing is in billing retry (no access) and expires when retry gives up, 14 days on", arguments: TestEngine.all)
    func expiresAfterRetryGivesUp(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: nil) { store in
            let first = try await store.buy()
            let original = first.claims.originalTransactionId
            let expires = try #require(first.claims.expires)
            try await store.sandbox(renewals: .fail)
            #expect(try await store.advance(to: expires) == 1)
            var info = try await store.subscription(original)
            #expect(info.state == .billingRetry && !info.entitled)
            #expect(abs((info.nextRetryDate ?? .distantPast).timeIntervalSince(expires.addingTimeInterval(Self.day))) < 1)
            // Far ahead at once: the retries at 1, 3, 7 and 14 days are caught up one by one.
            #expect(try await store.advance(to: expires.addingTimeInterval(20 * Self.day)) == 4)
            info = try await store.subscription(original)
            #expect(info.state == .expired && info.expirationReason == .billingError && !info.entitled)
            #expect(info.failedAttempts == 5)
            #expect(try await store.charges() == [249])
            #expect(try await store.runRenewals() == 0)
            // Resuming an expired subscription is refused; buying again starts it again.
            let resume = try await store.http.send("POST", "/v1/subscriptions/\(original)/resume", token: store.account.token)
            #expect(resume.status == 409 || resume.status == 400)
            let again = try await store.buy()
            #expect(again.claims.originalTransactionId == original)
            #expect(try await store.subscription(original).state == .active)
        }
    }

    @Test("an issue published during grace stays entitled after the subscription expires; one published after expiry is not", arguments: TestEngine.all)
    func graceEntitlesContent(engine: TestEngine) async throws {
        // Bought today: the period ends a month on; grace runs 6 days past that.
        let now = Date()
        let end = try #require(Calendar(identifier: .gregorian).date(byAdding: .month, value: 1, to: now))
        let duringGrace = SubscriptionCoverage.day(end.addingTimeInterval(3 * Self.day))
        let afterExpiry = SubscriptionCoverage.day(end.addingTimeInterval(25 * Self.day))
        try await Self.withStore(engine: engine, graceDays: 6, issues: [("grace-issue", duringGrace), ("late-issue", afterExpiry)]) { store in
            let first = try await store.buy()
            let receipt = try #require(first.transaction.signedTransaction)
            let expires = try #require(first.claims.expires)
            try await store.sandbox(renewals: .fail)
            #expect(try await store.advance(to: expires) == 1)
            #expect(try await store.subscription(first.claims.originalTransactionId).state == .gracePeriod)
            #expect(try await store.advance(to: expires.addingTimeInterval(20 * Self.day)) >= 3)
            let info = try await store.subscription(first.claims.originalTransactionId)
            #expect(info.state == .expired && info.expirationReason == .billingError)
            #expect(try await store.entitled("\(Self.series).grace-issue", receipt: receipt))
            #expect(try await !store.entitled("\(Self.series).late-issue", receipt: receipt))
            // The operator's count of an issue's owners is by the same rule, grace included: the
            // subscriber owns the issue published in grace (withdrawing it needs --force), not the late one.
            for (issue, owners) in [("grace-issue", 1), ("late-issue", 0)] {
                let reply = try await store.http.send("GET", "/v1/admin/products/\(Self.series).\(issue)/owners", token: store.admin)
                #expect(try reply.decode(AdminProductOwners.self).owners == owners, "\(issue)")
            }
        }
    }

    @Test("auto-renew off: the subscription stays active to its period's end, then expires (voluntary) with no further charge; resume before the end renews", arguments: TestEngine.all)
    func autoRenewOff(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: nil) { store in
            let first = try await store.buy()
            let original = first.claims.originalTransactionId
            let expires = try #require(first.claims.expires)
            let cancel = try await store.http.send("POST", "/v1/subscriptions/\(original)/cancel", token: store.account.token)
            #expect(cancel.status == 200)
            #expect(try cancel.decode(SubscriptionInfo.self).autoRenew == false)
            #expect(try await store.advance(to: expires, plus: -3600) == 0)
            var info = try await store.subscription(original)
            #expect(info.state == .active && info.entitled && !info.autoRenew)
            #expect(try await store.advance(to: expires) == 1)
            info = try await store.subscription(original)
            #expect(info.state == .expired && info.expirationReason == .voluntary && !info.entitled)
            #expect(try await store.charges() == [249])

            // A second subscriber who turns it off and on again before the end is renewed.
            let second = try await store.http.createAccount()
            let other = Fixture(server: store.server, http: store.http, account: second)
            let bought = try await other.buy()
            let id = bought.claims.originalTransactionId
            #expect(try await other.http.send("POST", "/v1/subscriptions/\(id)/cancel", token: second.token).status == 200)
            #expect(try await other.http.send("POST", "/v1/subscriptions/\(id)/resume", token: second.token).status == 200)
            #expect(try await other.advance(to: try #require(bought.claims.expires)) == 1)
            #expect(try await other.subscription(id).state == .active)
            #expect(try await other.periods().count == 2)
        }
    }

    @Test("an instance that dies between claiming a renewal and committing it leaves nothing: no period, no charge; once its claim lapses another instance renews it once", arguments: TestEngine.all)
    func crashMidRenewal(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, graceDays: nil) { store in
            let first = try await store.buy()
            let original = first.claims.originalTransactionId
            // The period ends; nothing renews it yet (the renewal pass is run below, by hand).
            let now = try await store.subscriptions().now
            try await store.sandbox(advance: try #require(first.claims.expires).addingTimeInterval(60).timeIntervalSince(now))
            struct Killed: Error {}
            let server = store.server
            let dying = Store(database: server.store.database, keys: server.keys, catalog: server.catalog, environment: .sandbox,
                              metrics: server.metrics, logger: Logger(label: "dying"), clock: server.store.clock,
                              renewalLease: 1.5, beforeRenewalCommit: { _ in throw Killed() })
            await #expect(throws: Killed.self) { try await dying.subscriptions.renewDue() }
            #expect(try await store.periods().count == 1)
            #expect(try await store.charges() == [249])
            // Its claim holds for its lease: the live instance finds nothing to take yet.
            #expect(try await store.runRenewals() == 0)
            try await Task.sleep(for: .seconds(2))
            #expect(try await store.runRenewals() == 1)
            #expect(try await store.runRenewals() == 0)
            let periods = try await store.periods()
            #expect(periods.count == 2 && Set(periods.map(\.originalTransactionId)) == [original])
            #expect(try await store.charges() == [249, 249])
        }
    }

    @Test("a production store refuses the sandbox clock and renewal setting")
    func productionRefusesSandbox() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data, environment: .production)
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            let account = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/admin/accounts/\(account.accountId)/sandbox", token: server.adminToken, json: #"{"advanceSeconds": 86400}"#)
            #expect(reply.status == 409 || reply.status == 400)
            #expect(String(decoding: reply.body, as: UTF8.self).contains("sandbox"))
        }
        configuration.sandboxTimeScale = 100
        await #expect(throws: ServerSetupError.self) { _ = try await KioskServer(configuration: configuration) }
    }

    @Test("a subscription expires one period after purchase and shows as active", arguments: TestEngine.all)
    func expiresOnePeriodAfterPurchase(engine: TestEngine) async throws {
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
}
