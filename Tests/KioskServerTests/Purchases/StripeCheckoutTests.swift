import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import SQLKit
import KioskTestSupport
import Testing

/// Checkout Sessions Kiosk creates on Stripe (`--stripe-secret-key`), against a stand-in for
/// Stripe's API (scripts/stripe_standin.py) whose record of each request is held to what Stripe's
/// own library sends for the same parameters; the grant still comes from the signed event alone.
@Suite("The web channel: Checkout Sessions Kiosk creates")
struct StripeCheckoutTests: StoreSuite {
    static let epub = "com.kiosk.books.salt-and-stars"

    /// Stripe's `checkout.session.completed` for the stand-in's first session: the EPUB paid, 4.99.
    /// A paid session of the EPUB's checkout `intent`, for `amount` of `currency`, with `extra` fields of the session's.
    static func bookPaid(_ id: String, account: String, intent: String, session: String = "cs_test_standin000001", amount: Int = 499,
                         currency: String = "usd", extra: [String: Any] = [:]) -> String {
        var object: [String: Any] = ["id": session, "object": "checkout.session", "payment_status": "paid", "client_reference_id": account,
                                     "amount_total": amount, "currency": currency, "payment_intent": "pi_" + id.dropFirst(4),
                                     "metadata": ["kiosk_intent": intent, "kiosk_product_id": epub, "kiosk_quantity": "1"]]
        object.merge(extra) { _, new in new }
        return StripeChannelTests.json(["id": id, "object": "event", "type": "checkout.session.completed", "data": ["object": object]])
    }

    static func withStripe(engine: TestEngine, key: String = StripeStandIn.key, apiURL: String? = nil, prepare: @Sendable (SampleStore) throws -> Void = { _ in },
                           automaticTax: Bool = false, taxes: TaxTable = .none,
                           _ body: @Sendable (KioskServer, StoreHTTP, StripeStandIn) async throws -> Void) async throws {
        let standIn = try await StripeStandIn.start()
        do {
            try await withStore(engine: engine, prepare: prepare, configure: {
                $0.stripe = StripeSignature(secrets: [StripeChannelTests.secret])
                $0.channels.stripeAPI = try? StripeAPI(secretKey: key, baseURL: apiURL ?? standIn.url)
                $0.channels.stripeAutomaticTax = automaticTax
                $0.taxes = taxes
                // As behind nginx: its X-Forwarded-Proto is heard (one test asks through "https").
                $0.rateLimits.trustedProxies = ["127.0.0.1"]
            }) { server, http, _ in try await body(server, http, standIn) }
        } catch {
            await standIn.stop()
            throw error
        }
        await standIn.stop()
    }

    @Test("the shop's Buy creates a Checkout Session with the product's price, the account, the intent and the way back, the fields Stripe's own library sends; the same form twice is one session; the signed event grants it", arguments: TestEngine.all)
    func shopCheckout(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { server, http, stripe in
            let ann = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/buy/\(Self.epub)")
            let page = try await browser.get("/account/buy/\(Self.epub)")
            #expect(page.header("Content-Security-Policy")?.contains("form-action 'self' https://checkout.stripe.com") == true)
            let key = try #require(String(decoding: page.body, as: UTF8.self).firstMatch(of: /name="key" value="([0-9A-F-]+)"/)?.1)

            let first = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": String(key)])
            #expect(first.status == 303 && first.header("Location") == "https://checkout.stripe.com/c/pay/cs_test_standin000001", "\(first.headers)")
            let again = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": String(key)])
            #expect(again.header("Location") == first.header("Location"), "the same form sent again is the same session")

            let sent = try stripe.requests()
            #expect(sent.count == 1, "the same form sent again is sent to the page its intent was given")
            let kiosk = try #require(sent.first)
            #expect(kiosk.path == "/v1/checkout/sessions" && kiosk.authorization == "Bearer \(StripeStandIn.key)")
            #expect(kiosk.contentType == "application/x-www-form-urlencoded")
            let intent = try #require(kiosk.form["metadata[kiosk_intent]"])
            #expect(intent.hasPrefix("ci_") && kiosk.idempotencyKey == "kiosk-checkout-\(intent)")
            // Back to the product and Buy again: a new form, the same intent, the same payment page
            // (two sessions for one book would let the reader pay twice).
            let secondForm = String(decoding: try await browser.get("/account/buy/\(Self.epub)").body, as: UTF8.self)
            let secondKey = try #require(secondForm.firstMatch(of: /name="key" value="([0-9A-F-]+)"/)?.1)
            #expect(secondKey != key)
            let third = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": String(secondKey)])
            #expect(third.header("Location") == first.header("Location"), "\(third.headers)")
            // Asked through another address (https behind a proxy, another host name, the API):
            // the page the intent was given, not a session made for that address.
            let proxied = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": UUID().uuidString],
                                                 headers: [("X-Forwarded-Proto", "https")])
            #expect(proxied.header("Location") == first.header("Location"), "\(proxied.headers)")
            let api = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(Self.epub)"}"#, headers: [("Host", "kiosk.example.com")])
            #expect(try api.decode(Checkout.self).url == first.header("Location"))
            #expect(try stripe.requests().count == 1, "one session for one book, however it was asked for")

            // The judge: Stripe's library, given the parameters as its API reference writes them.
            let base = http.baseURL
            let parameters: [String: Any] = [
                "mode": "payment",
                "line_items": [["price_data": ["currency": "usd", "unit_amount": 499,
                                               "product_data": ["name": "Salt and Stars", "images": ["\(base)/v1/covers/\(Self.epub)"]]],
                                "quantity": 1]],
                "client_reference_id": ann.accountId, "customer_email": "ann@example.com",
                "metadata": ["kiosk_intent": intent, "kiosk_product_id": Self.epub, "kiosk_quantity": "1"],
                "success_url": "\(base)/account/library", "cancel_url": "\(base)/products/\(Self.epub)",
            ]
            let judged = try await stripe.judgedFields(of: parameters, idempotencyKey: "judge")
            #expect(kiosk.fields.map { $0.joined(separator: "=") }.sorted() == judged.fields.map { $0.joined(separator: "=") }.sorted())

            // Coming back grants nothing; the signed event does.
            #expect(String(decoding: try await browser.get("/account/library").body, as: UTF8.self).contains("Waiting for the payment"))
            let event = Self.bookPaid("evt_shop1", account: ann.accountId, intent: intent)
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let library = String(decoding: try await browser.get("/account/library").body, as: UTF8.self)
            #expect(library.contains("/account/library/\(Self.epub)/file") && !library.contains("Waiting for the payment"))
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [499])
        }
    }

    @Test("buying from inside a reading app: the OPDS 1.2 buy link is the shop's page; paid there, the signed event puts the book on the app's shelf (Basic, asked for by a challenge) with a link to the file itself, and the library page offers the way back", arguments: TestEngine.all)
    func buyFromAnApp(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { _, http, stripe in
            let ann = try await WebSession.account(http, "ann@example.com")
            let basic = "Basic " + Data("ann@example.com:\(SignInTests.password)".utf8).base64EncodedString()
            // The app reads the entry and hands its buy link to a browser.
            let entry = String(decoding: try await http.send("GET", "/opds/v1.2/publications/\(Self.epub)").body, as: UTF8.self)
            let buy = try #require(entry.firstMatch(of: /rel="http:\/\/opds-spec.org\/acquisition\/buy" href="([^"]+)" type="text\/html"/)?.1, "\(entry)")
            #expect(buy == "\(http.baseURL)/products/\(Self.epub)")
            let page = String(decoding: try await http.send("GET", String(buy.dropFirst(http.baseURL.count))).body, as: UTF8.self)
            #expect(page.contains("/account/buy/\(Self.epub)"), "the shop's page offers Buy: \(page)")
            // Not paid yet: the shelf, reached as such an app does (no credentials until challenged), is empty.
            let challenged = try await http.send("GET", "/opds/v1.2/shelf")
            #expect(challenged.status == 401 && challenged.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
            #expect(!String(decoding: try await http.send("GET", "/opds/v1.2/shelf", authorization: basic).body, as: UTF8.self).contains(Self.epub))

            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/buy/\(Self.epub)")
            let form = String(decoding: try await browser.get("/account/buy/\(Self.epub)").body, as: UTF8.self)
            let key = try #require(form.firstMatch(of: /name="key" value="([0-9A-F-]+)"/)?.1)
            let checkout = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": String(key)])
            #expect(checkout.status == 303 && checkout.header("Location")?.hasPrefix("https://checkout.stripe.com/") == true)
            let intent = try #require(try stripe.requests().last?.form["metadata[kiosk_intent]"])
            // The reader comes back before Stripe's event: nothing on the shelf yet.
            #expect(!String(decoding: try await http.send("GET", "/opds/v1.2/shelf", authorization: basic).body, as: UTF8.self).contains(Self.epub))
            let event = Self.bookPaid("evt_app1", account: ann.accountId, intent: intent)
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let shelf = String(decoding: try await http.send("GET", "/opds/v1.2/shelf", authorization: basic).body, as: UTF8.self)
            let file = "\(http.baseURL)/opds/content/\(Self.epub)"
            #expect(shelf.contains(#"<link rel="http://opds-spec.org/acquisition" href="\#(file)" type="application/epub+zip"/>"#), "\(shelf)")
            let downloaded = try await http.send("GET", "/opds/content/\(Self.epub)", authorization: basic)
            #expect(downloaded.status == 200 && downloaded.body.starts(with: Data("PK".utf8)) && downloaded.header("Content-Type") == "application/epub+zip")
            #expect(downloaded.header("Content-Disposition")?.contains(".epub") == true, "\(downloaded.headers)")
            // The way back from the browser to the app.
            let library = String(decoding: try await browser.get("/account/library").body, as: UTF8.self)
            #expect(library.contains("opds://127.0.0.1:") && library.contains("/opds/shelf"), "\(library)")
        }
    }

    @Test("after a restore to before the checkout: Stripe's resent paid event names an intent the database does not hold, and is granted by the session's own fields (an account the database lacks stays unmatched)", arguments: TestEngine.all)
    func paidIntentLostByRestore(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { server, http, _ in
            let reader = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: reader.token, json: #"{"productId": "\#(Self.epub)"}"#)
            let intent = try reply.decode(Checkout.self).intent
            // As a backup from before the checkout leaves the store.
            try await server.store.database.write { db in try await db.raw(#"DELETE FROM "checkoutIntent""#).run() }
            let granted = try await StripeChannelTests.deliver(http, Self.bookPaid("evt_restored1", account: reader.accountId, intent: intent))
            #expect(granted.outcome == "granted", "\(granted.detail)")
            #expect(try await http.charges(accountId: reader.accountId, adminToken: server.adminToken) == [499])
            let stranger = try await StripeChannelTests.deliver(http, Self.bookPaid("evt_restored2", account: "acct_0000000000000000", intent: "intent_gone",
                                                                                     session: "cs_test_standin000002"))
            #expect(stranger.outcome == "unmatched", "an account the database lacks: \(stranger.detail)")
        }
    }

    @Test("kiosk buy's checkout (POST /v1/checkouts) is a Checkout Session too, in the catalog's currency; a free book is never paid for", arguments: TestEngine.all)
    func apiCheckout(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { _, http, stripe in
            let reader = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: reader.token, json: #"{"productId": "com.kiosk.credits.pack-5", "quantity": 2}"#)
            #expect(reply.status == 201, "\(Self.message(reply))")
            let checkout = try reply.decode(Checkout.self)
            #expect(checkout.url.hasPrefix("https://checkout.stripe.com/c/pay/cs_test_standin"))
            let form = try #require(try stripe.requests().last).form
            #expect(form["line_items[0][quantity]"] == "2" && form["line_items[0][price_data][unit_amount]"] == "499" && form["metadata[kiosk_quantity]"] == "2")
            #expect(form["customer_email"] == nil, "an account without a sign-in has no email to give")
            #expect(form["metadata[kiosk_intent]"] == checkout.intent)

            let free = try await http.send("POST", "/v1/checkouts", token: reader.token, json: #"{"productId": "com.kiosk.books.tidewater-stories"}"#)
            #expect(free.status == 409 && (try? free.decode(APIError.self).code) == "free_product", "a free book is downloaded, never paid for: \(Self.message(free))")
        }
    }

    @Test("a plan is sold with a Checkout Session in subscription mode, its period from the catalog and the intent in the subscription's own metadata, the fields Stripe's library sends; a running subscription is not sold again", arguments: TestEngine.all)
    func subscriptionCheckout(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { _, http, stripe in
            let ann = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/library")
            let planPage = String(decoding: try await browser.get("/account/buy/\(SampleStore.harborMonthly)").body, as: UTF8.self)
            #expect(planPage.contains("Pay 2.49"), "the plan is offered on the web: \(planPage)")
            let paid = try await browser.post("/account/buy/\(SampleStore.harborMonthly)", ["csrf": browser.csrf, "key": UUID().uuidString])
            #expect(paid.status == 303 && paid.header("Location")?.hasPrefix("https://checkout.stripe.com/c/pay/") == true, "\(paid.headers)")
            let kiosk = try #require(try stripe.requests().last)
            let intent = try #require(kiosk.form["metadata[kiosk_intent]"])
            let base = http.baseURL
            let parameters: [String: Any] = [
                "mode": "subscription",
                "line_items": [["price_data": ["currency": "usd", "unit_amount": 249, "recurring": ["interval": "month", "interval_count": 1],
                                               "product_data": ["name": "Harbor Monthly, monthly subscription",
                                                                "images": ["\(base)/v1/covers/\(SampleStore.harborMonthly)"]]],
                                "quantity": 1]],
                "client_reference_id": ann.accountId, "customer_email": "ann@example.com",
                "metadata": ["kiosk_intent": intent, "kiosk_product_id": SampleStore.harborMonthly],
                "subscription_data": ["metadata": ["kiosk_intent": intent, "kiosk_account_id": ann.accountId, "kiosk_product_id": SampleStore.harborMonthly]],
                "success_url": "\(base)/account/library", "cancel_url": "\(base)/products/\(SampleStore.harborMonthly)",
            ]
            let judged = try await stripe.judgedFields(of: parameters, idempotencyKey: "judge-plan")
            #expect(kiosk.fields.map { $0.joined(separator: "=") }.sorted() == judged.fields.map { $0.joined(separator: "=") }.sorted())

            // Paid: the first period is granted; the plan is then not sold again.
            let event = StripeSubscriptionTests.sessionPaid("evt_plan1", subscription: "sub_plan1", account: ann.accountId, intent: intent)
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let again = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(SampleStore.harborMonthly)"}"#)
            #expect(again.status == 409 && (try? again.decode(APIError.self).code) == "already_subscribed", "\(Self.message(again))")
        }
    }

    @Test("a first subscriber's free trial on the web: Checkout's trial_period_days and the offer in the metadata, the fields Stripe's library sends; the signed trial event records the offer; a second subscriber in the group is asked the normal price", arguments: TestEngine.all)
    func webTrial(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine, prepare: { store in
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                    products[index]["introductoryOffer"] = ["type": "freeTrial", "days": 14]
                    var yearly = products[index]
                    yearly["id"] = IntroductoryOfferTests.yearly
                    yearly["periodMonths"] = 12
                    yearly["price"] = "24.99"
                    products.append(yearly)
                }
            }
        }) { server, http, stripe in
            let ann = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/library")
            let paid = try await browser.post("/account/buy/\(SampleStore.harborMonthly)", ["csrf": browser.csrf, "key": UUID().uuidString])
            #expect(paid.status == 303, "\(paid.headers)")
            let kiosk = try #require(try stripe.requests().last)
            let intent = try #require(kiosk.form["metadata[kiosk_intent]"])
            let base = http.baseURL
            let parameters: [String: Any] = [
                "mode": "subscription",
                "line_items": [["price_data": ["currency": "usd", "unit_amount": 249, "recurring": ["interval": "month", "interval_count": 1],
                                               "product_data": ["name": "Harbor Monthly, monthly subscription",
                                                                "images": ["\(base)/v1/covers/\(SampleStore.harborMonthly)"]]],
                                "quantity": 1]],
                "client_reference_id": ann.accountId, "customer_email": "ann@example.com",
                "metadata": ["kiosk_intent": intent, "kiosk_product_id": SampleStore.harborMonthly, "kiosk_offer": "freeTrial", "kiosk_offer_period": "P14D"],
                "subscription_data": ["metadata": ["kiosk_intent": intent, "kiosk_account_id": ann.accountId, "kiosk_product_id": SampleStore.harborMonthly,
                                                   "kiosk_offer": "freeTrial", "kiosk_offer_period": "P14D"],
                                      "trial_period_days": 14],
                "success_url": "\(base)/account/library", "cancel_url": "\(base)/products/\(SampleStore.harborMonthly)",
            ]
            let judged = try await stripe.judgedFields(of: parameters, idempotencyKey: "judge-trial")
            #expect(kiosk.fields.map { $0.joined(separator: "=") }.sorted() == judged.fields.map { $0.joined(separator: "=") }.sorted())

            // Stripe's event for a trial: nothing paid, no payment required; the offer comes back in the metadata Kiosk wrote.
            let event = StripeChannelTests.json([
                "id": "evt_trial1", "object": "event", "type": "checkout.session.completed", "created": 1_796_083_200,
                "data": ["object": ["id": "cs_trial1", "object": "checkout.session", "mode": "subscription", "payment_status": "no_payment_required",
                                    "client_reference_id": ann.accountId, "amount_total": 0, "currency": "usd", "subscription": "sub_trial1",
                                    "metadata": ["kiosk_intent": intent, "kiosk_product_id": SampleStore.harborMonthly, "kiosk_offer": "freeTrial", "kiosk_offer_period": "P14D"]]],
            ])
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let page = try await http.send("GET", "/v1/transactions", token: ann.token).decode(TransactionPage.self)
            let trial = try #require(page.transactions.first { $0.productId == SampleStore.harborMonthly })
            let claims = try SubscriptionFixture.claims(try #require(trial.signedTransaction))
            #expect(claims.offerType == "freeTrial" && claims.offerPeriod == "P14D")
            // The yearly plan is not sold beside the running monthly one: it would be charged too.
            let beside = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(IntroductoryOfferTests.yearly)"}"#)
            #expect(beside.status == 409 && (try? beside.decode(APIError.self).code) == "plan_running", "\(Self.message(beside))")

            // Bo had a subscription in the group (taken and refunded): Stripe is asked the normal price.
            let bo = try await WebSession.account(http, "bo@example.com")
            let had = try await http.pay(SampleStore.harborMonthly, token: bo.token).decode(PaymentResponse.self).transaction
            #expect(try await http.send("POST", "/v1/admin/transactions/\(had.transactionId)/refund", token: server.adminToken, json: #"{"reason": "test"}"#).status == 200)
            let again = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(SampleStore.harborMonthly)"}"#)
            #expect(again.status == 201, "\(Self.message(again))")
            let asked = try #require(try stripe.requests().last).form
            #expect(asked["subscription_data[trial_period_days]"] == nil && asked["metadata[kiosk_offer]"] == nil && asked["client_reference_id"] == bo.accountId)
        }
    }

    @Test("four Buy forms of one book sent at once, each with its own key, make one intent and one Checkout Session", arguments: TestEngine.all)
    func concurrentBuys(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine) { _, http, stripe in
            _ = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/library")
            let replies = try await Self.concurrently(4) { _ in
                try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": UUID().uuidString])
            }
            #expect(replies.allSatisfy { $0.status == 303 }, "\(replies.map(\.status))")
            #expect(Set(replies.compactMap { $0.header("Location") }).count == 1, "\(replies.map { $0.header("Location") ?? "-" })")
            let sessions = try stripe.requests().filter { $0.path == "/v1/checkout/sessions" }
            #expect(Set(sessions.compactMap { $0.form["metadata[kiosk_intent]"] }).count == 1, "one intent: \(sessions.map(\.form))")
            #expect(Set(sessions.compactMap(\.idempotencyKey)).count == 1, "asked of Stripe under one key, so one session")
        }
    }

    @Test("Stripe refusing (a wrong key) or out of reach: the reader is told on a page, nothing is bought, and nothing waits in the library", arguments: TestEngine.all)
    func stripeFails(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine, key: "sk_test_not_the_key") { _, http, _ in
            _ = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/library")
            let refused = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": UUID().uuidString])
            let page = String(decoding: refused.body, as: UTF8.self)
            #expect(refused.status == 503 && page.contains("refused to start this checkout") && page.contains("nothing was bought"), "\(page)")
            // Stripe's own words (they can name the key's ends) are the operator's, not the reader's.
            #expect(!page.contains("sk_") && !page.contains("Invalid API Key"), "\(page)")
            #expect(!String(decoding: try await browser.get("/account/library").body, as: UTF8.self).contains("Waiting for the payment"))
        }
        try await Self.withStripe(engine: engine, apiURL: "http://127.0.0.1:9") { _, http, _ in
            let reader = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: reader.token, json: #"{"productId": "\#(Self.epub)"}"#)
            #expect(reply.status == 503 && reply.header("Retry-After") != nil, "\(Self.message(reply))")
            #expect(try reply.decode(APIError.self).message.contains("could not be reached"))
            _ = try await WebSession.account(http, "bo@example.com")
            let browser = try await WebSession.signIn(http, "bo@example.com", next: "/account/library")
            let page = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": UUID().uuidString])
            #expect(page.status == 503 && page.header("Retry-After") != nil && page.header("Content-Type")?.hasPrefix("text/html") == true)
        }
    }

    @Test("with Stripe's automatic tax: the session asks for it on a price that holds it (the fields Stripe's library sends), and the sale records the tax Stripe charged and the reader's country from its event", arguments: TestEngine.all)
    func automaticTax(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine, automaticTax: true) { server, http, stripe in
            let ann = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(Self.epub)"}"#)
            #expect(reply.status == 200 || reply.status == 201, "\(Self.message(reply))")
            let checkout = try reply.decode(Checkout.self)
            let sent = try #require(try stripe.requests().last)
            #expect(sent.form["automatic_tax[enabled]"] == "true" && sent.form["line_items[0][price_data][tax_behavior]"] == "inclusive", "\(sent.fields)")
            let base = http.baseURL
            let judged = try await stripe.judgedFields(of: [
                "mode": "payment",
                "line_items": [["price_data": ["currency": "usd", "unit_amount": 499, "tax_behavior": "inclusive",
                                               "product_data": ["name": "Salt and Stars", "images": ["\(base)/v1/covers/\(Self.epub)"]]],
                                "quantity": 1]],
                "client_reference_id": ann.accountId,
                "metadata": ["kiosk_intent": checkout.intent, "kiosk_product_id": Self.epub, "kiosk_quantity": "1"],
                "success_url": "\(base)/account/library", "cancel_url": "\(base)/products/\(Self.epub)",
                "automatic_tax": ["enabled": true],
            ], idempotencyKey: "judge-tax")
            #expect(sent.fields.map { $0.joined(separator: "=") }.sorted() == judged.fields.map { $0.joined(separator: "=") }.sorted())
            // Stripe's event: 4.99 holding 0.26 of French VAT (5.5 %), the reader in France.
            let event = Self.bookPaid("evt_tax1", account: ann.accountId, intent: checkout.intent, session: "cs_test_tax1",
                                      extra: ["total_details": ["amount_tax": 26], "customer_details": ["address": ["country": "FR"]]])
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let entry = try #require(try await server.store.base.database.read { try await TransactionRows($0).ledger { $0.where("accountId", .equal, ann.accountId) } }.first)
            // The rate is not in the event: 0.26 over the 4.73 left is 5.50 %.
            #expect(entry.amountCents == 499 && entry.taxCents == 26 && entry.country == "FR" && entry.taxBasisPoints == 550, "\(entry)")
        }
    }

    @Test("a code on the web: a book's discount is the session's price, the code reserved with the checkout (a second reader's checkout with the one-time code is refused), spent by the paid event's grant, given back when a checkout lapses unpaid", arguments: TestEngine.all)
    func codeOnTheWeb(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine, prepare: { store in
            try store.editCatalog("publications.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.epub {
                    products[index]["prices"] = ["US": ["price": "4.99", "currency": "USD"], "DE": ["price": "4.49", "currency": "EUR"]]
                }
            }
        }) { server, http, stripe in
            func code(_ reply: StoreHTTP.Reply) -> String { (try? reply.decode(APIError.self).code) ?? "\(reply.status)" }
            let made = try await http.send("POST", "/v1/admin/codes", token: server.adminToken,
                                           json: #"{"productId": "\#(Self.epub)", "count": 2, "benefit": {"kind": "percentOff", "value": 20}}"#).decode(AdminCodesCreated.self)
            let ann = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[0])"}"#)
            #expect(reply.status == 201, "\(Self.message(reply))")
            let checkout = try reply.decode(Checkout.self)
            let sent = try #require(try stripe.requests().last)
            // 4.99 less 20 % is 3.99; the session lapses in 31 minutes so an abandoned one gives the code back soon.
            #expect(sent.form["line_items[0][price_data][unit_amount]"] == "399" && sent.form["expires_at"] != nil, "\(sent.fields)")
            func redeemed() async throws -> Int {
                try await http.send("GET", "/v1/admin/codes", token: server.adminToken).decode([AdminCodeBatchRow].self).first { $0.batch == made.batch }?.redeemed ?? -1
            }
            #expect(try await redeemed() == 1, "reserved with the checkout")
            // Ann's second click with her code is her checkout, not a refusal.
            let second = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[0])"}"#)
            #expect(second.status == 201 && (try? second.decode(Checkout.self).intent) == checkout.intent, "\(Self.message(second))")
            // A code that cannot be taken in a storefront is refused before it is reserved.
            let off = try await http.send("POST", "/v1/admin/codes", token: server.adminToken,
                                          json: #"{"productId": "\#(Self.epub)", "count": 1, "benefit": {"kind": "amountOff", "value": 498}}"#).decode(AdminCodesCreated.self)
            let cheap = try await http.createAccount()
            _ = try await http.send("PUT", "/v1/account/storefront", token: cheap.token, json: #"{"storefront": "DE"}"#)
            let refusedHere = try await http.send("POST", "/v1/checkouts", token: cheap.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(off.codes[0])"}"#)
            #expect(refusedHere.status == 409 && (try? refusedHere.decode(APIError.self).code) == "code_other_currency", "\(Self.message(refusedHere))")
            #expect(try await http.send("GET", "/v1/admin/codes", token: server.adminToken).decode([AdminCodeBatchRow].self).first { $0.batch == off.batch }?.redeemed == 0)
            // The one-time code is Ann's checkout's: Bo's is refused.
            let bo = try await http.createAccount()
            let taken = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[0])"}"#)
            #expect(code(taken) == "invalid_code", "\(Self.message(taken))")
            // Ann pays: the grant spends the code (its redemption names the transaction).
            let event = Self.bookPaid("evt_code1", account: ann.accountId, intent: checkout.intent, session: "cs_test_code1", amount: 399)
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let spentFor = try await server.store.base.database.read { db in
                try await db.raw(#"SELECT "transactionId" FROM "offerCodeRedemption""#).all().map { try $0.decode(column: "transactionId", as: String.self) }
            }
            #expect(spentFor.count == 1 && spentFor[0].hasPrefix("txn_"), "\(spentFor)")
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [399])

            // Bo's checkout with the other code lapses unpaid: the code is given back, and his next checkout is a new page.
            let boReply = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[1])"}"#)
            let boCheckout = try boReply.decode(Checkout.self)
            #expect(try await redeemed() == 2)
            let lapsed = StripeChannelTests.json([
                "id": "evt_code2", "object": "event", "type": "checkout.session.expired",
                "data": ["object": ["id": "cs_test_lapsed", "object": "checkout.session", "status": "expired", "client_reference_id": bo.accountId,
                                    "metadata": ["kiosk_intent": boCheckout.intent, "kiosk_product_id": Self.epub, "kiosk_quantity": "1"]]],
            ])
            let kept = try await StripeChannelTests.deliver(http, lapsed)
            #expect(kept.detail.contains("code given back"), "\(kept)")
            #expect(try await redeemed() == 1)
            #expect(try await StripeChannelTests.deliver(http, lapsed).detail.contains("code given back"), "sent again: answered as kept")
            #expect(try await redeemed() == 1)
            let again = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[1])"}"#)
            #expect(again.status == 201 && (try? again.decode(Checkout.self).intent) != boCheckout.intent, "\(Self.message(again))")
        }
    }

    @Test("a plan's price paid as it goes, and a code's money off a plan, are coupons Kiosk makes on Stripe for the one checkout (the fields Stripe's library sends), applied to the session", arguments: TestEngine.all)
    func couponsOnTheWeb(engine: TestEngine) async throws {
        try await Self.withStripe(engine: engine, prepare: { store in
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                    products[index]["introductoryOffer"] = ["type": "payAsYouGo", "price": "0.99", "periods": 3]
                }
            }
        }) { server, http, stripe in
            let ann = try await http.createAccount()
            let reply = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(SampleStore.harborMonthly)"}"#)
            #expect(reply.status == 201, "\(Self.message(reply))")
            let requests = try stripe.requests()
            let coupon = try #require(requests.first { $0.path == "/v1/coupons" })
            // 2.49 less 0.99 off each of three months.
            #expect(coupon.form["amount_off"] == "150" && coupon.form["duration"] == "repeating" && coupon.form["duration_in_months"] == "3", "\(coupon.fields)")
            let judged = try await stripe.judgedFields(of: ["amount_off": 150, "currency": "usd", "duration": "repeating", "duration_in_months": 3,
                                                            "max_redemptions": 1, "name": "Introductory price"], idempotencyKey: "judge-coupon", subscription: "--coupon")
            #expect(coupon.fields.map { $0.joined(separator: "=") }.sorted() == judged.fields.map { $0.joined(separator: "=") }.sorted(), "\(coupon.fields)")
            let session = try #require(requests.last { $0.path == "/v1/checkout/sessions" })
            #expect(session.form["discounts[0][coupon]"]?.hasPrefix("coupon_") == true && session.form["subscription_data[metadata][kiosk_offer]"] == "payAsYouGo"
                    && session.form["line_items[0][price_data][unit_amount]"] == "249", "\(session.fields)")

            // A code's 10 % off the plan: a coupon once, the recurring price whole.
            let made = try await http.send("POST", "/v1/admin/codes", token: server.adminToken,
                                           json: #"{"productId": "\#(SampleStore.harborMonthly)", "count": 1, "benefit": {"kind": "percentOff", "value": 10}}"#).decode(AdminCodesCreated.self)
            let bo = try await http.createAccount()
            let withCode = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(SampleStore.harborMonthly)", "offerCode": "\#(made.codes[0])"}"#)
            #expect(withCode.status == 201, "\(Self.message(withCode))")
            let after = try stripe.requests()
            let second = try #require(after.last { $0.path == "/v1/coupons" })
            #expect(second.form["percent_off"] == "10" && second.form["duration"] == "once", "\(second.fields)")
            #expect(after.last?.form["line_items[0][price_data][unit_amount]"] == "249" && after.last?.form["discounts[0][coupon]"] != nil)
        }
    }

    @Test("the web's sale is taxed by the storefront its checkout was priced in, whatever the reader chooses before it is paid; a coded checkout past its session's lapse is closed at the next click and its code taken by the new one", arguments: TestEngine.all)
    func checkoutStorefrontAndLapse(engine: TestEngine) async throws {
        let taxes = try TaxTable.load(SampleStore.repository.appendingPathComponent("deploy/tax/eu-epublications.json"))
        try await Self.withStripe(engine: engine, prepare: { store in
            try store.editCatalog("publications.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.epub {
                    products[index]["prices"] = ["US": ["price": "4.99", "currency": "USD"], "DE": ["price": "4.49", "currency": "EUR"], "FR": ["price": "4.99", "currency": "EUR"]]
                }
            }
        }, taxes: taxes) { server, http, stripe in
            let ann = try await http.createAccount()
            _ = try await http.send("PUT", "/v1/account/storefront", token: ann.token, json: #"{"storefront": "DE"}"#)
            let checkout = try await http.send("POST", "/v1/checkouts", token: ann.token, json: #"{"productId": "\#(Self.epub)"}"#).decode(Checkout.self)
            #expect(try stripe.requests().last?.form["line_items[0][price_data][unit_amount]"] == "449")
            _ = try await http.send("PUT", "/v1/account/storefront", token: ann.token, json: #"{"storefront": "FR"}"#)
            let event = Self.bookPaid("evt_sf1", account: ann.accountId, intent: checkout.intent, session: "cs_test_sf1", amount: 449, currency: "eur")
            #expect(try await StripeChannelTests.deliver(http, event).outcome == "granted")
            let entry = try #require(try await server.store.base.database.read { try await TransactionRows($0).ledger { $0.where("accountId", .equal, ann.accountId) } }.first)
            #expect(entry.country == "DE" && entry.taxBasisPoints == 700 && entry.taxCents == 29, "\(entry)")

            // A coded checkout left past its session's 31 minutes: the next click closes it, gives
            // its code back and takes it again for a new checkout.
            let made = try await http.send("POST", "/v1/admin/codes", token: server.adminToken,
                                           json: #"{"productId": "\#(Self.epub)", "count": 1, "benefit": {"kind": "percentOff", "value": 20}}"#).decode(AdminCodesCreated.self)
            let bo = try await http.createAccount()
            let first = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[0])"}"#).decode(Checkout.self)
            try await server.store.base.database.write { db in
                try await db.raw(#"UPDATE "checkoutIntent" SET "createdAt" = \#(bind: Date().addingTimeInterval(-3600)) WHERE "id" = \#(bind: first.intent)"#).run()
            }
            let next = try await http.send("POST", "/v1/checkouts", token: bo.token, json: #"{"productId": "\#(Self.epub)", "offerCode": "\#(made.codes[0])"}"#)
            #expect(next.status == 201 && (try? next.decode(Checkout.self).intent) != first.intent, "\(Self.message(next))")
            let batch = try await http.send("GET", "/v1/admin/codes", token: server.adminToken).decode([AdminCodeBatchRow].self).first { $0.batch == made.batch }
            #expect(batch?.redeemed == 1, "one reservation: the new checkout's")
            #expect(try await server.store.stripe.waitingCheckouts(accountId: bo.accountId) == [Self.epub])
        }
    }
}
