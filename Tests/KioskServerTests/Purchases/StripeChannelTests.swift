import Foundation
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import Testing

/// The web channel (issue 45): Stripe's signed events, signed here by Stripe's own library
/// (`scripts/stripe_sign.py`, the `stripe` package `make test-tools` installs), granted and
/// revoked through the same path as every purchase.
@Suite("The web channel: Stripe events")
struct StripeChannelTests: StoreSuite {
    static let secret = "whsec_kiosk_test_secret"
    static let rotated = "whsec_kiosk_next_secret"

    static func stripeStore<T: Sendable>(engine: TestEngine, environment: StoreEnvironment = .sandbox,
                                         _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> T) async throws -> T {
        try StripeSigner.requireLibrary()
        return try await withStore(engine: engine, environment: environment, configure: {
            $0.stripe = StripeSignature(secrets: [Self.secret, Self.rotated])
        }, body)
    }

    /// A Checkout Session event paying for `product` on `account`.
    static func checkout(_ id: String, session: String, account: String, product: String, amount: Int = 1234, currency: String = "eur",
                         paymentIntent: String, type: String = "checkout.session.completed", status: String = "paid") -> String {
        checkout(id, session: session, account: account, product: product, amount: amount as Any, currency: currency, paymentIntent: paymentIntent, type: type, status: status)
    }

    static func checkout(_ id: String, session: String, account: String, product: String, amount: Any, currency: String,
                         paymentIntent: String, type: String, status: String) -> String {
        json(["id": id, "object": "event", "type": type, "created": Int(Date().timeIntervalSince1970),
              "data": ["object": ["id": session, "object": "checkout.session", "payment_status": status, "client_reference_id": account,
                                  "amount_total": amount, "currency": currency, "payment_intent": paymentIntent,
                                  "metadata": ["kiosk_product_id": product]]]])
    }

    static func refund(_ id: String, paymentIntent: String, type: String = "charge.refunded", amount: Int = 1234, refunded: Int = 1234) -> String {
        let object: [String: Any] = type == "charge.refunded"
            ? ["id": "ch_\(id)", "object": "charge", "payment_intent": paymentIntent, "amount": amount, "amount_refunded": refunded, "refunded": refunded >= amount]
            : ["id": "dp_\(id)", "object": "dispute", "payment_intent": paymentIntent, "amount": amount]
        return json(["id": id, "object": "event", "type": type, "data": ["object": object]])
    }

    static func json(_ object: [String: Any]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(), as: UTF8.self)
    }

    /// The header Stripe's library makes for `body` (now, or at `timestamp`).
    static func signature(_ body: String, secret: String = secret, timestamp: Int? = nil) async throws -> String {
        try await StripeSigner.header(body, secret: secret, timestamp: timestamp)
    }

    static func post(_ http: StoreHTTP, _ body: String, signature: String?) async throws -> StoreHTTP.Reply {
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        if let signature { headers.append(("Stripe-Signature", signature)) }
        return try await http.send("POST", "/v1/stripe/webhook", json: body, headers: headers)
    }

    static func deliver(_ http: StoreHTTP, _ body: String) async throws -> AdminChannelEventRow {
        let reply = try await post(http, body, signature: try await signature(body))
        #expect(reply.status == 200, "\(Self.message(reply))")
        return try reply.decode(AdminChannelEventRow.self)
    }

    static func owned(_ http: StoreHTTP, _ account: AccountCreated) async throws -> [String] {
        try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).owned
    }

    @Test("a paid checkout grants the book with what Stripe charged, signed and in the account's feed; sent again it is one purchase", arguments: TestEngine.all)
    func grant(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            let event = Self.checkout("evt_1", session: "cs_1", account: account.accountId, product: Self.book, paymentIntent: "pi_1")
            let row = try await Self.deliver(http, event)
            #expect(row.outcome == "granted", "\(row)")
            #expect(try await Self.owned(http, account) == [Self.book])
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1234])
            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.count == 1)
            #expect(page.transactions.first?.signedTransaction != nil)

            // The same event again, and the same session in its async event: still one purchase.
            #expect(try await Self.deliver(http, event).transactionId == row.transactionId)
            let async = Self.checkout("evt_2", session: "cs_1", account: account.accountId, product: Self.book, paymentIntent: "pi_1",
                                      type: "checkout.session.async_payment_succeeded")
            #expect(try await Self.deliver(http, async).transactionId == row.transactionId)
            // Four deliveries of a new event at once: one purchase.
            let pack = Self.checkout("evt_3", session: "cs_3", account: account.accountId, product: Self.pack5, amount: 499, currency: "usd", paymentIntent: "pi_3")
            let signed = try await Self.signature(pack)
            let replies = try await Self.concurrently(4) { _ in try await Self.post(http, pack, signature: signed) }
            #expect(replies.allSatisfy { $0.status == 200 })
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1234, 499])
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 5)
        }
    }

    @Test("a production store grants nothing for an event of Stripe's test mode (livemode false), and says why; a sandbox store takes it", arguments: TestEngine.all)
    func testModeInProduction(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine, environment: .production) { _, http, account in
            var object = try #require(try JSONSerialization.jsonObject(with: Data(Self.checkout("evt_t1", session: "cs_t1", account: account.accountId, product: Self.book, paymentIntent: "pi_t1").utf8)) as? [String: Any])
            object["livemode"] = false
            let row = try await Self.deliver(http, Self.json(object))
            #expect(row.outcome == "ignored" && row.detail.contains("test mode"), "\(row)")
            #expect(try await Self.owned(http, account).isEmpty)
            object["id"] = "evt_t2"
            object["livemode"] = true
            #expect(try await Self.deliver(http, Self.json(object)).outcome == "granted")
        }
        try await Self.stripeStore(engine: engine) { _, http, account in
            var object = try #require(try JSONSerialization.jsonObject(with: Data(Self.checkout("evt_t3", session: "cs_t3", account: account.accountId, product: Self.book, paymentIntent: "pi_t3").utf8)) as? [String: Any])
            object["livemode"] = false
            #expect(try await Self.deliver(http, Self.json(object)).outcome == "granted")
        }
    }

    @Test("a forged, tampered, stale or unsigned event is a 400 with its reason and grants nothing; a rotated secret signs too", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            let event = Self.checkout("evt_f", session: "cs_f", account: account.accountId, product: Self.book, paymentIntent: "pi_f")
            let forged = try await Self.post(http, event, signature: try await Self.signature(event, secret: "whsec_someone_else"))
            #expect(forged.status == 400)
            #expect(try forged.decode(APIError.self).code == "bad_signature")
            let tampered = event.replacingOccurrences(of: "1234", with: "1")
            #expect(try await Self.post(http, tampered, signature: try await Self.signature(event)).status == 400)
            let stale = try await Self.post(http, event, signature: try await Self.signature(event, timestamp: Int(Date().timeIntervalSince1970) - 400))
            #expect(stale.status == 400)
            #expect(try stale.decode(APIError.self).message.contains("tolerance"), "\(Self.message(stale))")
            #expect(try await Self.post(http, event, signature: nil).status == 400)
            #expect(try await Self.post(http, event, signature: "t=1,v1=zz").status == 400)
            #expect(try await Self.owned(http, account).isEmpty)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)

            let rotated = try await Self.post(http, event, signature: try await Self.signature(event, secret: Self.rotated))
            #expect(rotated.status == 200)
            #expect(try await Self.owned(http, account) == [Self.book])
            let malformed = "{\"not\": \"an event\"}"
            #expect(try await Self.post(http, malformed, signature: try await Self.signature(malformed)).status == 400)
        }
    }

    @Test("a refund or a dispute revokes the grant, whichever comes first; a partial refund revokes nothing", arguments: TestEngine.all)
    func refunds(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            // Refunded after the grant.
            _ = try await Self.deliver(http, Self.checkout("evt_a", session: "cs_a", account: account.accountId, product: Self.book, paymentIntent: "pi_a"))
            let refunded = try await Self.deliver(http, Self.refund("evt_ra", paymentIntent: "pi_a"))
            #expect(refunded.outcome == "revoked", "\(refunded)")
            #expect(try await Self.owned(http, account).isEmpty)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1234, -1234])

            // Refunded before its checkout event came: the grant is revoked as it lands.
            let early = try await Self.deliver(http, Self.refund("evt_rb", paymentIntent: "pi_b"))
            #expect(early.outcome == "unmatched")
            let late = try await Self.deliver(http, Self.checkout("evt_b", session: "cs_b", account: account.accountId, product: Self.book, paymentIntent: "pi_b"))
            #expect(late.outcome == "revoked", "\(late)")
            #expect(try await Self.owned(http, account).isEmpty)

            // A dispute, and a partial refund.
            _ = try await Self.deliver(http, Self.checkout("evt_c", session: "cs_c", account: account.accountId, product: Self.issue, paymentIntent: "pi_c"))
            #expect(try await Self.deliver(http, Self.refund("evt_pc", paymentIntent: "pi_c", refunded: 100)).outcome == "partial_refund")
            #expect(try await Self.owned(http, account) == [Self.issue])
            #expect(try await Self.deliver(http, Self.refund("evt_dc", paymentIntent: "pi_c", type: "charge.dispute.created")).outcome == "revoked")
            #expect(try await Self.owned(http, account).isEmpty)
            // The refund of an already revoked grant, sent again: nothing more.
            #expect(try await Self.deliver(http, Self.refund("evt_ra", paymentIntent: "pi_a")).outcome == "revoked")
        }
    }

    @Test("an event Kiosk cannot match is answered 200 and kept for the operator; a production store grants through the web", arguments: TestEngine.all)
    func unmatchedAndProduction(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine, environment: .production) { server, http, account in
            #expect(try await http.pay(Self.book, token: account.token).status == 403, "the sandbox's pretend payment")
            let unknownAccount = try await Self.deliver(http, Self.checkout("evt_u1", session: "cs_u1", account: "acct_nobody", product: Self.book, paymentIntent: "pi_u1"))
            #expect(unknownAccount.outcome == "unmatched")
            let unknownProduct = try await Self.deliver(http, Self.checkout("evt_u2", session: "cs_u2", account: account.accountId, product: "com.kiosk.none", paymentIntent: "pi_u2"))
            #expect(unknownProduct.outcome == "unmatched")
            #expect(unknownProduct.detail.contains("refund it on Stripe"))
            let listed = try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(Set(listed.map(\.eventId)) == ["evt_u1", "evt_u2"])

            let granted = try await Self.deliver(http, Self.checkout("evt_p", session: "cs_p", account: account.accountId, product: Self.book, paymentIntent: "pi_p"))
            #expect(granted.outcome == "granted")
            #expect(try await Self.owned(http, account) == [Self.book])
            // Paid again for what the account owns: a free re-buy, and the operator is told to refund.
            let twice = try await Self.deliver(http, Self.checkout("evt_p2", session: "cs_p2", account: account.accountId, product: Self.book, paymentIntent: "pi_p2"))
            #expect(twice.outcome == "owned")
            #expect(try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self).count == 3)

            // A subscription paid on the web: nothing on this store renews it, so it says it does not,
            // and asking it to is refused.
            let subscribed = try await Self.deliver(http, Self.checkout("evt_s", session: "cs_s", account: account.accountId, product: Self.subscription, paymentIntent: "pi_s"))
            #expect(subscribed.outcome == "granted", "\(subscribed)")
            let list = try await http.send("GET", "/v1/subscriptions", token: account.token).decode(SubscriptionList.self)
            let subscription = try #require(list.subscriptions.first)
            #expect(subscription.state == .active && !subscription.autoRenew, "\(subscription)")
            let resume = try await http.send("POST", "/v1/subscriptions/\(subscription.originalTransactionId)/resume", token: account.token)
            #expect(resume.status == 409, "\(Self.message(resume))")
            #expect(try resume.decode(APIError.self).code == "renewal_not_offered")
        }
    }

    @Test("a signed event with a hostile currency, an amount out of range or odd ids is kept unmatched; a free session grants; a far-off timestamp is a 400", arguments: TestEngine.all)
    func hostileSignedEvents(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            let hostile = Self.checkout("evt_h1", session: "cs_h1", account: account.accountId, product: Self.pack5, amount: 499 as Any,
                                        currency: "<meta http-equiv=refresh content=0;url=http://127.0.0.2/>", paymentIntent: "pi_h1",
                                        type: "checkout.session.completed", status: "paid")
            #expect(try await Self.deliver(http, hostile).outcome == "unmatched")
            for (index, amount) in [-500, Int.min, Int.max].enumerated() {
                let event = Self.checkout("evt_a\(index)", session: "cs_a\(index)", account: account.accountId, product: Self.pack5,
                                          amount: amount as Any, currency: "usd", paymentIntent: "pi_a\(index)", type: "checkout.session.completed", status: "paid")
                #expect(try await Self.deliver(http, event).outcome == "unmatched", "amount \(amount)")
            }
            let longIntent = String(repeating: "p", count: 300)
            #expect(try await Self.deliver(http, Self.checkout("evt_l", session: "cs_l", account: account.accountId, product: Self.pack5, paymentIntent: longIntent)).outcome == "unmatched")
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)

            // A coupon made it free: complete without a payment, granted at 0.
            let free = Self.checkout("evt_free", session: "cs_free", account: account.accountId, product: Self.book, amount: 0 as Any,
                                     currency: "eur", paymentIntent: "pi_free", type: "checkout.session.completed", status: "no_payment_required")
            #expect(try await Self.deliver(http, free).outcome == "granted")
            #expect(try await Self.owned(http, account) == [Self.book])

            let far = try await Self.post(http, hostile, signature: try await Self.signature(hostile, timestamp: -999_999_999_999))
            #expect(far.status == 400)
            #expect(try await http.send("GET", "/healthz").status == 200, "the server is still up")
        }
    }

    @Test("a dispute and a refund that both came before the grant are both settled when it lands", arguments: TestEngine.all)
    func twoWithdrawalsFirst(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            _ = try await Self.deliver(http, Self.refund("evt_d", paymentIntent: "pi_x", type: "charge.dispute.created"))
            _ = try await Self.deliver(http, Self.refund("evt_r", paymentIntent: "pi_x"))
            #expect(try await Self.deliver(http, Self.checkout("evt_x", session: "cs_x", account: account.accountId, product: Self.book, paymentIntent: "pi_x")).outcome == "revoked")
            #expect(try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self).isEmpty)
        }
    }

    @Test("a reader's checkout: a one-time intent in the shop's URL, granted to its account when its session is paid, once", arguments: TestEngine.all)
    func checkoutIntents(engine: TestEngine) async throws {
        let template = try CheckoutURLTemplate("https://shop.example/pay?product={product}&account={account}&intent={intent}&n={quantity}")
        try StripeSigner.requireLibrary()
        try await Self.withStore(engine: engine, configure: {
            $0.stripe = StripeSignature(secrets: [Self.secret])
            $0.channels.checkout = template
        }) { server, http, account in
            let description = try await http.send("GET", "/v1/store").decode(StoreDescription.self)
            #expect(description.webCheckout && description.channels == ["sandbox", "web"], "\(description)")
            let reply = try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "\#(Self.book)"}"#)
            #expect(reply.status == 201, "\(Self.message(reply))")
            let checkout = try reply.decode(Checkout.self)
            #expect(checkout.url == "https://shop.example/pay?product=\(Self.book)&account=\(account.accountId)&intent=\(checkout.intent)&n=1")
            #expect(try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "com.kiosk.none"}"#).status == 404)
            #expect(try await http.send("POST", "/v1/checkouts", json: #"{"productId": "\#(Self.book)"}"#).status == 401)
            #expect(try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "\#(Self.book)", "quantity": 2}"#).status == 400)

            // The shop's session names only the intent: the intent says the account and the product.
            func session(_ id: String, intent: String, account: String? = nil) -> String {
                var object: [String: Any] = ["id": "cs_\(id)", "object": "checkout.session", "payment_status": "paid", "amount_total": 1234,
                                             "currency": "eur", "payment_intent": "pi_\(id)", "metadata": ["kiosk_intent": intent]]
                if let account { object["client_reference_id"] = account }
                return Self.json(["id": "evt_\(id)", "object": "event", "type": "checkout.session.completed", "data": ["object": object]])
            }
            let granted = try await Self.deliver(http, session("i1", intent: checkout.intent))
            #expect(granted.outcome == "granted" && granted.accountId == account.accountId, "\(granted)")
            #expect(try await Self.owned(http, account) == [Self.book])
            // The same session's event again is the same grant; another session paying the intent is kept for a refund.
            #expect(try await Self.deliver(http, session("i1", intent: checkout.intent)).transactionId == granted.transactionId)
            let twice = try await Self.deliver(http, session("i2", intent: checkout.intent))
            #expect(twice.outcome == "unmatched" && twice.detail.contains("already paid by another Checkout Session"), "\(twice)")
            // An intent of another account, or none this store made.
            let other = try await http.createAccount()
            let otherCheckout = try await http.send("POST", "/v1/checkouts", token: other.token, json: #"{"productId": "\#(Self.issue)"}"#).decode(Checkout.self)
            let mismatched = try await Self.deliver(http, session("i3", intent: otherCheckout.intent, account: account.accountId))
            #expect(mismatched.outcome == "unmatched" && mismatched.detail.contains("is not the account intent"), "\(mismatched)")
            #expect(try await Self.deliver(http, session("i4", intent: "ci_made_up")).outcome == "unmatched")
            #expect(try await Self.owned(http, other).isEmpty)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1234])
        }
        try await Self.stripeStore(engine: engine) { _, http, account in
            let refused = try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "\#(Self.book)"}"#)
            #expect(refused.status == 404)
            #expect(try refused.decode(APIError.self).code == "web_not_configured")
        }
    }

    @Test("what the attack found: yen counted in whole yen, an intent's quantity kept, an owned book's checkout refused and its refund settled, a deleted account's payment kept for a refund", arguments: TestEngine.all)
    func attackFindings(engine: TestEngine) async throws {
        let template = try CheckoutURLTemplate("https://shop.example/pay?intent={intent}")
        try StripeSigner.requireLibrary()
        try await Self.withStore(engine: engine, configure: {
            $0.stripe = StripeSignature(secrets: [Self.secret])
            $0.channels.checkout = template
        }) { server, http, account in
            // Stripe's 1200 in yen is 1,200 yen: Kiosk keeps hundredths of a unit, so 120000.
            let yen = Self.checkout("evt_yen", session: "cs_yen", account: account.accountId, product: Self.book, amount: 1200, currency: "jpy", paymentIntent: "pi_yen")
            #expect(try await Self.deliver(http, yen).outcome == "granted")
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [120_000])

            // The intent's quantity is the quantity.
            let intent = try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "\#(Self.pack10)"}"#).decode(Checkout.self)
            let greedy = Self.json(["id": "evt_q", "object": "event", "type": "checkout.session.completed", "data": ["object": [
                "id": "cs_q", "object": "checkout.session", "payment_status": "paid", "amount_total": 899, "currency": "usd", "payment_intent": "pi_q",
                "metadata": ["kiosk_intent": intent.intent, "kiosk_quantity": "100"]]]])
            let kept = try await Self.deliver(http, greedy)
            #expect(kept.outcome == "unmatched" && kept.detail.contains("kiosk_quantity"), "\(kept)")
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 0)

            // A checkout of a book the account owns is refused; a payment for it anyway is settled by its refund.
            let owned = try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": "\#(Self.book)"}"#)
            #expect(try owned.status == 409 && owned.decode(APIError.self).code == "already_owned")
            let again = try await Self.deliver(http, Self.checkout("evt_own", session: "cs_own", account: account.accountId, product: Self.book, paymentIntent: "pi_own"))
            #expect(again.outcome == "owned")
            let refunded = try await Self.deliver(http, Self.refund("evt_own_r", paymentIntent: "pi_own"))
            #expect(refunded.outcome == "refunded", "\(refunded)")
            #expect(try await Self.owned(http, account) == [Self.book], "the book itself stays")
            let toActOn = try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(!toActOn.contains { $0.eventId.hasPrefix("evt_own") }, "\(toActOn.map(\.eventId))")
            #expect(try await http.send("POST", "/v1/checkouts", token: account.token, json: #"{"productId": ""}"#).status == 400)

            // A deleted account's payment: taken back and kept for a refund; its appAccountToken erased.
            let leaving = try await http.createAccount()
            #expect(try await http.send("GET", "/v1/account", token: leaving.token).decode(AccountSummary.self).appAccountToken != nil)
            #expect(try await http.send("DELETE", "/v1/account", token: leaving.token).status == 200)
            let late = try await Self.deliver(http, Self.checkout("evt_gone", session: "cs_gone", account: leaving.accountId, product: Self.issue, paymentIntent: "pi_gone"))
            #expect(late.outcome == "unmatched" && late.detail.contains("deleted or disabled"), "\(late)")
            let detail = try await http.send("GET", "/v1/admin/accounts/\(leaving.accountId)", token: server.adminToken)
            #expect(!String(decoding: detail.body, as: UTF8.self).contains("appAccountToken\":\""), "the token is erased")
        }
    }

    static func disputeClosed(_ id: String, paymentIntent: String, status: String, type: String = "charge.dispute.closed") -> String {
        json(["id": id, "object": "event", "type": type,
              "data": ["object": ["id": "dp_\(paymentIntent)", "object": "dispute", "payment_intent": paymentIntent, "amount": 1234, "status": status]]])
    }

    @Test("a dispute the publisher wins gives the book back once (closed and funds reinstated); one lost leaves it revoked; one won before its checkout came does not revoke the grant", arguments: TestEngine.all)
    func disputeWon(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            _ = try await Self.deliver(http, Self.checkout("evt_dw1", session: "cs_dw1", account: account.accountId, product: Self.book, paymentIntent: "pi_dw1"))
            let disputed = try await Self.deliver(http, Self.refund("evt_dw2", paymentIntent: "pi_dw1", type: "charge.dispute.created"))
            #expect(disputed.outcome == "revoked")
            #expect(try await Self.owned(http, account).isEmpty)

            let won = try await Self.deliver(http, Self.disputeClosed("evt_dw3", paymentIntent: "pi_dw1", status: "won"))
            #expect(won.outcome == "reversed", "\(won)")
            let reinstated = try await Self.deliver(http, Self.disputeClosed("evt_dw4", paymentIntent: "pi_dw1", status: "won", type: "charge.dispute.funds_reinstated"))
            #expect(reinstated.outcome == "reversed")
            #expect(try await Self.owned(http, account) == [Self.book])
            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.filter { $0.status == .purchased }.count == 1, "granted again once")
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [1234, -1234, 1234])
            let toActOn = try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(toActOn.isEmpty, "\(toActOn)")

            // Lost: the revocation stands.
            let other = try await http.createAccount()
            _ = try await Self.deliver(http, Self.checkout("evt_dl1", session: "cs_dl1", account: other.accountId, product: Self.book, paymentIntent: "pi_dl1"))
            _ = try await Self.deliver(http, Self.refund("evt_dl2", paymentIntent: "pi_dl1", type: "charge.dispute.created"))
            #expect(try await Self.deliver(http, Self.disputeClosed("evt_dl3", paymentIntent: "pi_dl1", status: "lost")).outcome == "ignored")
            #expect(try await Self.owned(http, other).isEmpty)

            // Won before the checkout's event came: the grant, when it comes, stands.
            let third = try await http.createAccount()
            _ = try await Self.deliver(http, Self.refund("evt_de1", paymentIntent: "pi_de1", type: "charge.dispute.created"))
            #expect(try await Self.deliver(http, Self.disputeClosed("evt_de2", paymentIntent: "pi_de1", status: "won")).outcome == "reversed")
            #expect(try await Self.deliver(http, Self.checkout("evt_de3", session: "cs_de3", account: third.accountId, product: Self.book, paymentIntent: "pi_de1")).outcome == "granted")
            #expect(try await Self.owned(http, third) == [Self.book])
        }
    }

    @Test("a dispute won on a subscription's period gives back that period of that subscription, not a fresh month from the day it was won", arguments: TestEngine.all)
    func disputeWonOnSubscriptionPeriod(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, account in
            func subscriptions() async throws -> [SubscriptionInfo] {
                try await http.send("GET", "/v1/subscriptions", token: account.token).decode(SubscriptionList.self).subscriptions
            }
            _ = try await Self.deliver(http, Self.checkout("evt_sw1", session: "cs_sw1", account: account.accountId, product: Self.subscription, paymentIntent: "pi_sw1"))
            let bought = try #require(try await subscriptions().first)
            #expect(bought.entitled)
            #expect(try await Self.deliver(http, Self.refund("evt_sw2", paymentIntent: "pi_sw1", type: "charge.dispute.created")).outcome == "revoked")
            #expect(try await subscriptions().first?.entitled == false)
            // Twenty days later on the account's clock, the dispute is won.
            let moved = try await http.send("POST", "/v1/admin/accounts/\(account.accountId)/sandbox", token: server.adminToken, json: #"{"advanceSeconds": 1728000}"#)
            #expect(moved.status == 200)
            #expect(try await Self.deliver(http, Self.disputeClosed("evt_sw3", paymentIntent: "pi_sw1", status: "won")).outcome == "reversed")
            let given = try await subscriptions()
            #expect(given.count == 1, "the same subscription: \(given)")
            #expect(given.first?.originalTransactionId == bought.originalTransactionId)
            #expect(given.first?.expiresDate == bought.expiresDate, "the period taken, given back: \(given)")
            #expect(given.first?.entitled == true)
        }
    }

    @Test("disputes and refunds in any order take back exactly what stands and give back only what they took: a refund after a won dispute, a second dispute, a dispute after a refund then won, a close before its opening", arguments: TestEngine.all)
    func disputesInAnyOrder(engine: TestEngine) async throws {
        try await Self.stripeStore(engine: engine) { server, http, _ in
            func standing(_ account: AccountCreated) async throws -> Int {
                try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self).transactions.filter { $0.status == .purchased }.count
            }
            func net(_ account: AccountCreated) async throws -> Int {
                try await http.charges(accountId: account.accountId, adminToken: server.adminToken).reduce(0, +)
            }
            // A refund after a won dispute takes back the grant the dispute gave back.
            let a = try await http.createAccount()
            _ = try await Self.deliver(http, Self.checkout("evt_o1", session: "cs_o1", account: a.accountId, product: Self.book, paymentIntent: "pi_o1"))
            _ = try await Self.deliver(http, Self.refund("evt_o2", paymentIntent: "pi_o1", type: "charge.dispute.created"))
            _ = try await Self.deliver(http, Self.disputeClosed("evt_o3", paymentIntent: "pi_o1", status: "won"))
            #expect(try await Self.owned(http, a) == [Self.book])
            let refunded = try await Self.deliver(http, Self.refund("evt_o4", paymentIntent: "pi_o1"))
            #expect(refunded.outcome == "revoked", "\(refunded)")
            #expect(try await Self.owned(http, a).isEmpty)
            #expect(try await standing(a) == 0)
            #expect(try await net(a) == 0, "the money went back: nothing kept")

            // A second dispute after a won one takes back what the first gave back.
            let b = try await http.createAccount()
            _ = try await Self.deliver(http, Self.checkout("evt_p1", session: "cs_p1", account: b.accountId, product: Self.book, paymentIntent: "pi_p1"))
            _ = try await Self.deliver(http, Self.refund("evt_p2", paymentIntent: "pi_p1", type: "charge.dispute.created"))
            _ = try await Self.deliver(http, Self.disputeClosed("evt_p3", paymentIntent: "pi_p1", status: "won", type: "charge.dispute.funds_reinstated"))
            #expect(try await Self.owned(http, b) == [Self.book])
            _ = try await Self.deliver(http, Self.refund("evt_p4", paymentIntent: "pi_p1", type: "charge.dispute.created"))
            #expect(try await Self.owned(http, b).isEmpty)
            #expect(try await net(b) == 0)

            // A dispute after a full refund takes nothing, so winning it gives nothing back.
            let c = try await http.createAccount()
            _ = try await Self.deliver(http, Self.checkout("evt_q1", session: "cs_q1", account: c.accountId, product: Self.book, paymentIntent: "pi_q1"))
            _ = try await Self.deliver(http, Self.refund("evt_q2", paymentIntent: "pi_q1"))
            let tookNothing = try await Self.deliver(http, Self.refund("evt_q3", paymentIntent: "pi_q1", type: "charge.dispute.created"))
            #expect(tookNothing.outcome == "ignored", "\(tookNothing)")
            _ = try await Self.deliver(http, Self.disputeClosed("evt_q4", paymentIntent: "pi_q1", status: "won"))
            #expect(try await Self.owned(http, c).isEmpty, "a refunded book was given back by a won dispute")
            #expect(try await net(c) == 0)

            // A won close that came before its opening: the opening takes nothing.
            let d = try await http.createAccount()
            _ = try await Self.deliver(http, Self.checkout("evt_r1", session: "cs_r1", account: d.accountId, product: Self.book, paymentIntent: "pi_r1"))
            _ = try await Self.deliver(http, Self.disputeClosed("evt_r2", paymentIntent: "pi_r1", status: "won"))
            let late = try await Self.deliver(http, Self.refund("evt_r3", paymentIntent: "pi_r1", type: "charge.dispute.created"))
            #expect(late.outcome == "reversed", "\(late)")
            #expect(try await Self.owned(http, d) == [Self.book])
            #expect(try await net(d) == 1234)
            let toActOn = try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(toActOn.isEmpty, "\(toActOn)")
        }
    }
}
