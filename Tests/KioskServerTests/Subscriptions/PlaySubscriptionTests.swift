import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// Google Play subscriptions (issue 63): presented as a book's purchase is, then followed from
/// Play's Real-time developer notifications (pushed with tokens joserfc signs), each applied
/// against the state the Android Publisher API answers (a stand-in that issues access tokens only
/// for a service-account assertion joserfc verifies).
@Suite("The Android channel: Google Play subscriptions")
struct PlaySubscriptionTests: StoreSuite {
    static let playPlan = "play.sub.harbor-monthly"
    static let plan = SampleStore.harborMonthly
    static let days = StripeSubscriptionTests.days

    static func playStore(engine: TestEngine, keys: PlayChannelTests.Keys, standIn: PlayStandIn?, otherKey: Bool = false,
                          _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> Void) async throws {
        let play = try PlayPurchaseVerifier(publicKey: keys.playPublicKey, packageName: PlayChannelTests.package)
        let notifications = try await PlayNotificationVerifier(jwks: keys.jwks, audience: PlayChannelTests.audience, serviceAccount: PlayChannelTests.pushAccount)
        let api = try standIn.map { try PlayDeveloperAPI(account: try PlayServiceAccount(json: try $0.serviceAccount(otherKey: otherKey)),
                                                         packageName: PlayChannelTests.package, baseURL: $0.url) }
        try await withStore(engine: engine, prepare: { store in
            try store.editHarborMonthly(graceDays: 6, issues: [])
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.plan { products[index]["playProductId"] = Self.playPlan }
            }
        }, configure: {
            $0.channels.play = play
            $0.channels.playNotifications = notifications
            $0.channels.playAPI = api
        }, body)
    }

    /// Runs `body` with a stand-in for Google, stopped however `body` ends.
    static func withStandIn(_ body: (PlayStandIn) async throws -> Void) async throws {
        let standIn = try await PlayStandIn.start()
        do {
            try await body(standIn)
        } catch {
            await standIn.stop()
            throw error
        }
        await standIn.stop()
    }

    /// A SubscriptionPurchaseV2 in `state` paid until `days[until]`.
    static func v2(_ state: String, until: Int, autoRenew: Bool = true, order: String = "GPA.1111-2222-3333-44444") -> [String: Any] {
        ["subscriptionState": "SUBSCRIPTION_STATE_\(state)", "startTime": "2026-12-01T00:00:00.000Z", "regionCode": "US",
         "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED", "latestOrderId": order,
         "lineItems": [["productId": playPlan, "expiryTime": ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(days[until]))),
                        "autoRenewingPlan": ["autoRenewEnabled": autoRenew], "latestSuccessfulOrderId": order]]]
    }

    static func notified(_ token: String, type: Int) -> [String: Any] {
        ["version": "1.0", "packageName": PlayChannelTests.package, "eventTimeMillis": String(Int(Date().timeIntervalSince1970 * 1000)),
         "subscriptionNotification": ["version": "1.0", "notificationType": type, "purchaseToken": token]]
    }

    static func push(_ http: StoreHTTP, keys: PlayChannelTests.Keys, _ messageId: String, _ token: String, type: Int) async throws -> AdminChannelEventRow {
        let reply = try await PlayChannelTests.push(http, messageId: messageId, notification: Self.notified(token, type: type), token: try keys.token())
        #expect(reply.status == 200, "\(Self.message(reply))")
        return try reply.decode(AdminChannelEventRow.self)
    }

    static func present(_ http: StoreHTTP, keys: PlayChannelTests.Keys, _ account: AccountCreated, token: String) async throws -> StoreHTTP.Reply {
        let json = PlayChannelTests.purchase(token: token, product: playPlan)
        return try await PlayChannelTests.present(http, account, json: json, signature: try keys.sign(json))
    }

    @Test("a Play subscription presented grants the period Play says is paid; renewed, in grace, on hold, recovered, cancelled and expired follow Play's state; a notification twice is one step", arguments: TestEngine.all)
    func life(engine: TestEngine) async throws {
        let keys = try PlayChannelTests.Keys()
        try await Self.withStandIn { standIn in
            try await Self.playStore(engine: engine, keys: keys, standIn: standIn) { server, http, ann in
                let token = "sub-token-life.AO-J1Ox"
                // Told before the app presents it: nothing to follow yet.
                try await standIn.set(token, Self.v2("ACTIVE", until: 1))
                #expect(try await Self.push(http, keys: keys, "m-early", token, type: 4).outcome == "ignored")
                let presented = try await Self.present(http, keys: keys, ann, token: token)
                #expect(presented.status == 200, "\(Self.message(presented))")
                #expect(try presented.decode(ChannelPurchaseAnswer.self).state == "granted")
                var info = try #require(try await StripeSubscriptionTests.subscription(http, ann))
                #expect(info.state == .active && info.autoRenew && info.renewsThrough == "play" && Int(info.expiresDate.timeIntervalSince1970) == Self.days[1], "\(info)")

                // The service account's assertion, as joserfc read it.
                let signIn = try #require(try standIn.requests().first { $0.path == "/token" })
                #expect(signIn.refused == nil && signIn.grantType == "urn:ietf:params:oauth:grant-type:jwt-bearer", "\(signIn)")
                #expect(signIn.header?["alg"] == "RS256" && signIn.header?["kid"] == "0123456789abcdef")
                #expect(signIn.claims?["iss"] == .text(PlayStandIn.email) && signIn.claims?["aud"] == .text("\(standIn.url)/token"))
                #expect(signIn.claims?["scope"] == .text("https://www.googleapis.com/auth/androidpublisher"))

                // Renewed: the new period; the same message again, and another telling the same, change nothing.
                try await standIn.set(token, Self.v2("ACTIVE", until: 2, order: "GPA.1111-2222-3333-44444..0"))
                let renewed = try await Self.push(http, keys: keys, "m-renew", token, type: 2)
                #expect(renewed.outcome == "granted", "\(renewed)")
                #expect(try await Self.push(http, keys: keys, "m-renew", token, type: 2).transactionId == renewed.transactionId)
                #expect(try await Self.push(http, keys: keys, "m-renew-again", token, type: 2).outcome == "ignored")
                #expect(try await StripeSubscriptionTests.periods(server, ann).map { $0[1] } == [Self.days[1], Self.days[2]])

                // In grace, then on hold, then recovered.
                try await standIn.set(token, Self.v2("IN_GRACE_PERIOD", until: 2))
                #expect(try await Self.push(http, keys: keys, "m-grace", token, type: 6).outcome == "applied")
                #expect(try await StripeSubscriptionTests.subscription(http, ann)?.state == .gracePeriod)
                try await standIn.set(token, Self.v2("ON_HOLD", until: 2))
                #expect(try await Self.push(http, keys: keys, "m-hold", token, type: 5).outcome == "applied")
                info = try #require(try await StripeSubscriptionTests.subscription(http, ann))
                #expect(info.state == .billingRetry && !info.entitled, "\(info)")
                try await standIn.set(token, Self.v2("ACTIVE", until: 3, order: "GPA.1111-2222-3333-44444..1"))
                #expect(try await Self.push(http, keys: keys, "m-recover", token, type: 1).outcome == "granted")
                #expect(try await StripeSubscriptionTests.subscription(http, ann)?.state == .active)

                // Cancelled (auto-renew off, paid until the end), then expired.
                try await standIn.set(token, Self.v2("CANCELED", until: 3, autoRenew: false))
                #expect(try await Self.push(http, keys: keys, "m-cancel", token, type: 3).outcome == "applied")
                #expect(try await StripeSubscriptionTests.subscription(http, ann)?.autoRenew == false)
                // The reader cannot turn it back on here: Play renews it.
                let resume = try await http.send("POST", "/v1/subscriptions/\(info.originalTransactionId)/resume", token: ann.token)
                #expect(resume.status == 409 && (try? resume.decode(APIError.self).code) == "renews_elsewhere", "\(Self.message(resume))")
                try await standIn.set(token, Self.v2("EXPIRED", until: 3, autoRenew: false))
                #expect(try await Self.push(http, keys: keys, "m-expire", token, type: 13).outcome == "applied")
                info = try #require(try await StripeSubscriptionTests.subscription(http, ann))
                #expect(info.state == .expired && info.expirationReason == .voluntary)
                #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [249, 249, 249])
                #expect(try await StripeSubscriptionTests.notifications(server, ann) == [
                    "SUBSCRIBED INITIAL_BUY", "DID_RENEW -", "DID_FAIL_TO_RENEW GRACE_PERIOD", "GRACE_PERIOD_EXPIRED -", "DID_RENEW BILLING_RECOVERY",
                    "DID_CHANGE_RENEWAL_STATUS AUTO_RENEW_DISABLED", "EXPIRED VOLUNTARY",
                ])
            }
        }
    }

    @Test("revoked in the Play Console: the latest period is taken back and the subscription ends; access tokens are asked again when Google refuses one", arguments: TestEngine.all)
    func revoked(engine: TestEngine) async throws {
        let keys = try PlayChannelTests.Keys()
        try await Self.withStandIn { standIn in
            try await Self.playStore(engine: engine, keys: keys, standIn: standIn) { server, http, ann in
                let token = "sub-token-revoked"
                try await standIn.set(token, Self.v2("ACTIVE", until: 1))
                #expect(try await Self.present(http, keys: keys, ann, token: token).status == 200)
                try await standIn.revokeTokens()
                try await standIn.set(token, Self.v2("EXPIRED", until: 1, autoRenew: false))
                let row = try await Self.push(http, keys: keys, "m-revoke", token, type: 12)
                #expect(row.outcome == "applied" && row.detail.contains("revoked by Google Play"), "\(row)")
                let info = try #require(try await StripeSubscriptionTests.subscription(http, ann))
                #expect(info.state == .expired && info.expirationReason == .revoked, "\(info)")
                #expect(try await StripeSubscriptionTests.periods(server, ann).isEmpty)
                #expect(try standIn.requests().filter { $0.path == "/token" }.count == 2, "a refused token is asked for again")
            }
        }
    }

    @Test("refused: a store without a service account, a subscription Play says has ended, and a service account Google does not know; nothing is granted", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        let keys = try PlayChannelTests.Keys()
        try await Self.withStandIn { standIn in
            try await standIn.set("sub-token-ended", Self.v2("EXPIRED", until: 1, autoRenew: false))
            try await standIn.set("sub-token-fine", Self.v2("ACTIVE", until: 1))
            try await Self.playStore(engine: engine, keys: keys, standIn: nil) { _, http, ann in
                let reply = try await Self.present(http, keys: keys, ann, token: "sub-token-fine")
                #expect(reply.status == 403 && (try? reply.decode(APIError.self).code) == "play_subscriptions_not_configured", "\(Self.message(reply))")
                #expect(try await StripeSubscriptionTests.subscription(http, ann) == nil)
            }
            try await Self.playStore(engine: engine, keys: keys, standIn: standIn) { _, http, ann in
                let reply = try await Self.present(http, keys: keys, ann, token: "sub-token-ended")
                #expect(reply.status == 402 && (try? reply.decode(APIError.self).code) == "play_subscription_inactive", "\(Self.message(reply))")
                let unknown = try await Self.present(http, keys: keys, ann, token: "sub-token-nobody")
                #expect((try? unknown.decode(APIError.self).code) == "play_unknown_purchase", "\(Self.message(unknown))")
                #expect(try await StripeSubscriptionTests.subscription(http, ann) == nil)
            }
            try await Self.playStore(engine: engine, keys: keys, standIn: standIn, otherKey: true) { _, http, ann in
                let reply = try await Self.present(http, keys: keys, ann, token: "sub-token-fine")
                #expect(reply.status == 503 && (try? reply.decode(APIError.self).code) == "payment_service", "\(Self.message(reply))")
                #expect(try await StripeSubscriptionTests.subscription(http, ann) == nil)
                #expect(try standIn.requests().last { $0.path == "/token" }?.refused != nil, "joserfc refused the assertion signed by another key")
            }
        }
    }
}
