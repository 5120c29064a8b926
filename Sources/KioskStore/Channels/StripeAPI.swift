import Foundation
import KioskCore
import KioskTransfer

/// Stripe's API as Kiosk calls it (`--stripe-secret-key`): creating the Checkout Session a reader
/// pays on. Requests are form-encoded as Stripe's own libraries encode them (`a[b][0]=c`; the
/// tests hold Kiosk's fields to the `stripe` package's for the same parameters), authorised by
/// the secret key as a Bearer token, and carry an `Idempotency-Key`: a request sent again (a
/// retry, a reader's second click on the same form) is answered with the same session, never a
/// second one. The key is never logged or shown; this value's description leaves it out.
public struct StripeAPI: Sendable, CustomStringConvertible {
    /// `https://api.stripe.com`, or a stand-in's address in tests (`--stripe-api-url`).
    public let baseURL: String
    let secretKey: String

    /// - Throws: ``StoreError`` `invalid_request` for a key that is no Stripe secret or restricted
    ///   key (`sk_…`, `rk_…`), or a base URL that is not http(s).
    public init(secretKey: String, baseURL: String = "https://api.stripe.com") throws {
        guard secretKey.hasPrefix("sk_") || secretKey.hasPrefix("rk_"), secretKey.count <= 255,
              secretKey.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else {
            throw StoreError.invalidRequest("the Stripe secret key must be a secret (sk_…) or restricted (rk_…) key from the Stripe dashboard")
        }
        guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw StoreError.invalidRequest("the Stripe API URL \(baseURL.prefix(200)) is not an http(s) URL")
        }
        self.secretKey = secretKey
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
    }

    public var description: String { "StripeAPI(\(baseURL), secret key not shown)" }

    /// `POST /v1/subscriptions/ID` with `cancel_at_period_end`: the reader's auto-renew turned off
    /// (true) or back on (false). The key names the change, so a retry is the same request.
    /// - Throws: ``Refusal`` when Stripe refused it (the subscription is gone, say);
    ///   ``StoreError`` `payment_service` when it could not be reached (nothing changed).
    func setCancelAtPeriodEnd(_ subscriptionId: String, _ cancel: Bool, idempotencyKey: String) async throws {
        let path = "/v1/subscriptions/" + (subscriptionId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? subscriptionId)
        _ = try await post(path, [("cancel_at_period_end", cancel ? "true" : "false")], idempotencyKey: idempotencyKey, doing: "change the subscription's renewal")
    }

    /// The first item of a subscription (its price's product), as `GET /v1/subscriptions/ID`
    /// answers: what a change of its price names.
    struct SubscriptionItem: Sendable, Equatable {
        var id: String
        var product: String
    }

    /// `GET /v1/subscriptions/ID`: its first item and that item's product.
    /// - Throws: ``Refusal`` (a 404 for one gone); `payment_service` when Stripe cannot be reached
    ///   or answers no item.
    func subscriptionItem(_ subscriptionId: String) async throws -> SubscriptionItem {
        struct Answer: Decodable {
            struct Items: Decodable { var data: [Item] }
            struct Item: Decodable { struct PriceRef: Decodable { var product: String }; var id: String; var price: PriceRef }
            var items: Items
        }
        let body = try await send("GET", Self.subscriptionPath(subscriptionId), [], idempotencyKey: nil, doing: "read the subscription")
        guard let item = (try? JSONDecoder().decode(Answer.self, from: body))?.items.data.first else {
            throw StoreError.paymentService("Stripe's answer names no item of the subscription; nothing changed")
        }
        return SubscriptionItem(id: item.id, product: item.price.product)
    }

    /// `POST /v1/subscriptions/ID` moving its item to another recurring price (`fields`:
    /// ``SubscriptionChangeFields``). The key names the change, so a retry is the same request.
    func changeSubscriptionPrice(_ subscriptionId: String, _ fields: [(String, String)], idempotencyKey: String) async throws {
        _ = try await post(Self.subscriptionPath(subscriptionId), fields, idempotencyKey: idempotencyKey, doing: "change the subscription's plan")
    }

    static func subscriptionPath(_ subscriptionId: String) -> String {
        "/v1/subscriptions/" + (subscriptionId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? subscriptionId)
    }

    /// `POST /v1/coupons` with `fields` (``CouponFields``): the coupon's id, which a Checkout
    /// Session applies (`discounts[0][coupon]`). The key names the checkout, so a retry makes none twice.
    func createCoupon(_ fields: [(String, String)], idempotencyKey: String) async throws -> String {
        struct Coupon: Decodable { var id: String }
        let body = try await post("/v1/coupons", fields, idempotencyKey: idempotencyKey, doing: "make the offer's discount")
        guard let coupon = try? JSONDecoder().decode(Coupon.self, from: body), !coupon.id.isEmpty else {
            throw StoreError.paymentService("Stripe's answer to the discount is not a coupon; nothing was bought")
        }
        return coupon.id
    }

    /// A Checkout Session as Stripe answers its creation: what Kiosk reads of it.
    public struct CheckoutSession: Decodable, Sendable, Equatable {
        public var id: String
        public var url: String
    }

    /// `POST /v1/checkout/sessions` with `fields` (form-encoded, in order).
    /// - Throws: ``Refusal`` when Stripe refused it; ``StoreError`` `payment_service` when it could
    ///   not be reached or failed (try again). Nothing was bought either way.
    func createCheckoutSession(_ fields: [(String, String)], idempotencyKey: String) async throws -> CheckoutSession {
        let body = try await post("/v1/checkout/sessions", fields, idempotencyKey: idempotencyKey, doing: "start the checkout")
        guard let session = try? JSONDecoder().decode(CheckoutSession.self, from: body), session.url.hasPrefix("https://") || session.url.hasPrefix("http://") else {
            throw StoreError.paymentService("Stripe's answer to the checkout is not a Checkout Session with a url; nothing was bought")
        }
        return session
    }

    /// A form-encoded POST to Stripe; its answer's body when 2xx.
    private func post(_ path: String, _ fields: [(String, String)], idempotencyKey: String, doing what: String) async throws -> Data {
        try await send("POST", path, fields, idempotencyKey: idempotencyKey, doing: what)
    }

    /// A request to Stripe (a POST form-encoded with its idempotency key, or a GET); its answer's body when 2xx.
    private func send(_ method: String, _ path: String, _ fields: [(String, String)], idempotencyKey: String?, doing what: String) async throws -> Data {
        var headers = [("Authorization", "Bearer \(secretKey)")]
        if method == "POST" { headers.append(("Content-Type", "application/x-www-form-urlencoded")) }
        if let idempotencyKey { headers.append(("Idempotency-Key", idempotencyKey)) }
        let request = HTTPRequest(method: method, url: baseURL + path, headers: headers,
                                  body: method == "POST" ? Data(Self.formEncoded(fields).utf8) : nil, timeout: 30, maxResponseBytes: 1 << 20)
        let response: HTTPResponse
        do {
            response = try await HTTPClient().send(request)
        } catch {
            throw StoreError.paymentService("Stripe could not be reached to \(what); try again in a moment", retryAfter: 10)
        }
        if response.status >= 500 || response.status == 429 {
            // Stripe may or may not have done it: the same key asks again safely.
            throw StoreError.paymentService("Stripe could not \(what) now (HTTP \(response.status)); try again in a moment", retryAfter: 10)
        }
        guard (200..<300).contains(response.status) else {
            // Stripe's error shape: {"error": {"message": "...", "type": "..."}}. Its words are for
            // the operator (they can name the key's first and last characters): logged by the
            // caller, never shown to the reader.
            struct Failure: Decodable { struct Detail: Decodable { var message: String? }; var error: Detail }
            let said = (try? JSONDecoder().decode(Failure.self, from: response.body))?.error.message
            throw Refusal(status: response.status, message: Self.redacted(said ?? "no message"))
        }
        return response.body
    }

    /// Stripe refused a request (4xx): nothing was made. `message` is Stripe's, with anything
    /// shaped like a key masked, for the operator's log.
    struct Refusal: Error, CustomStringConvertible {
        var status: Int
        var message: String
        var description: String { "Stripe answered HTTP \(status): \(message)" }
    }

    /// Text with every `sk_…`, `rk_…` or `whsec_…` word cut to its prefix.
    static func redacted(_ text: String) -> String {
        String(text.prefix(300)).split(separator: " ", omittingEmptySubsequences: false).map { word in
            for prefix in ["sk_", "rk_", "whsec_"] where word.contains(prefix) { return prefix + "…" }
            return String(word)
        }.joined(separator: " ")
    }

    /// Fields as `application/x-www-form-urlencoded`, each name and value percent-encoded (the
    /// brackets of nested names too, as a browser and Stripe's libraries send them).
    static func formEncoded(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
        return fields.map { "\(encoded($0.0))=\(encoded($0.1))" }.joined(separator: "&")
    }
}

/// A coupon for one checkout (https://docs.stripe.com/api/coupons/create), used once: a plan's
/// introductory price paid as it goes (the difference from the normal price, off each of its
/// months), or an offer code's money off a plan's first period.
enum CouponFields {
    static func amountOff(_ cents: Int, currency: String, months: Int?, name: String) -> [(String, String)] {
        let code = currency.uppercased()
        let amount = Price.wholeUnitCurrencies.contains(code) ? cents / 100 : cents
        return [("amount_off", String(amount)), ("currency", code.lowercased())] + duration(months) + [("max_redemptions", "1"), ("name", String(name.prefix(40)))]
    }

    static func percentOff(_ percent: Int, name: String) -> [(String, String)] {
        [("percent_off", String(percent))] + duration(nil) + [("max_redemptions", "1"), ("name", String(name.prefix(40)))]
    }

    private static func duration(_ months: Int?) -> [(String, String)] {
        months.map { [("duration", "repeating"), ("duration_in_months", String($0))] } ?? [("duration", "once")]
    }
}

/// The fields of a subscription's update to another plan (https://docs.stripe.com/api/subscriptions/update):
/// its item moved to the new plan's recurring price (`price_data` on the item's own product),
/// the plan named in the subscription's metadata (which its invoices bring back), and:
/// - at once (an upgrade): `proration_behavior=always_invoice` and `billing_cycle_anchor=now`, a
///   new period from now, invoiced and charged at once with the unused part of the old one
///   credited on the invoice (Stripe's proration: the App Store's rule, paid as a shortened price);
/// - at the renewal (a downgrade): `proration_behavior=none`, the next invoice at the new price.
enum SubscriptionChangeFields {
    static func fields(item: StripeAPI.SubscriptionItem, plan: Product, charged: (cents: Int, currency: String), atOnce: Bool) -> [(String, String)] {
        let currency = charged.currency.uppercased()
        let amount = Price.wholeUnitCurrencies.contains(currency) ? charged.cents / 100 : charged.cents
        let months = max(1, plan.periodMonths ?? 1)
        let (interval, count) = months % 12 == 0 ? ("year", months / 12) : ("month", months)
        var fields: [(String, String)] = [
            ("items[0][id]", item.id),
            ("items[0][price_data][currency]", currency.lowercased()),
            ("items[0][price_data][product]", item.product),
            ("items[0][price_data][recurring][interval]", interval),
            ("items[0][price_data][recurring][interval_count]", String(count)),
            ("items[0][price_data][unit_amount]", String(amount)),
            ("metadata[kiosk_product_id]", plan.id),
            ("proration_behavior", atOnce ? "always_invoice" : "none"),
        ]
        if atOnce { fields.append(("billing_cycle_anchor", "now")) }
        return fields
    }
}

/// The fields of a Checkout Session Kiosk creates, in Stripe's form names: the product's price as
/// `price_data` (the catalog's currency, in its smallest unit, its name and cover), the account as
/// `client_reference_id`, the intent, product and quantity in `metadata` (what the paid event
/// brings back: ``StripeChannel``), the sign-in's email, and where Stripe sends the reader back.
enum CheckoutSessionFields {
    /// - Parameter charged: what the reader's storefront charges (its price, tax included); nil:
    ///   the catalog's base price.
    static func payment(product: Product, quantity: Int, intent: String, accountId: String, email: String?, origin: String,
                        charged: (cents: Int, currency: String)? = nil) -> [(String, String)] {
        let cents = charged?.cents ?? Price.cents(product.price.amount) ?? 0
        let currency = (charged?.currency ?? product.price.currency).uppercased()
        // Kiosk keeps hundredths of the unit; Stripe wants the smallest unit there is (a yen is one).
        let amount = Price.wholeUnitCurrencies.contains(currency) ? cents / 100 : cents
        let id = product.id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? product.id
        var fields: [(String, String)] = [
            ("mode", "payment"),
            ("line_items[0][price_data][currency]", currency.lowercased()),
            ("line_items[0][price_data][unit_amount]", String(amount)),
            ("line_items[0][price_data][product_data][name]", String(product.title.prefix(250))),
            ("line_items[0][price_data][product_data][images][0]", "\(origin)/v1/covers/\(id)"),
            ("line_items[0][quantity]", String(quantity)),
            ("client_reference_id", accountId),
            ("metadata[kiosk_intent]", intent),
            ("metadata[kiosk_product_id]", product.id),
            ("metadata[kiosk_quantity]", String(quantity)),
            ("success_url", "\(origin)/account/library"),
            ("cancel_url", "\(origin)/products/\(id)"),
        ]
        if let email { fields.append(("customer_email", email)) }
        return fields
    }

    /// The session asking Stripe to compute the tax (`automatic_tax[enabled]`) on a price that
    /// holds it (`tax_behavior=inclusive`, as EU prices to consumers do); its event then says what
    /// Stripe charged (`total_details.amount_tax`) and where the reader is (`customer_details.address`).
    static func automaticTax(_ fields: [(String, String)]) -> [(String, String)] {
        var fields = fields
        let at = (fields.firstIndex { $0.0 == "line_items[0][quantity]" } ?? fields.count)
        fields.insert(("line_items[0][price_data][tax_behavior]", "inclusive"), at: at)
        fields.append(("automatic_tax[enabled]", "true"))
        return fields
    }

    /// A subscription's session (`mode=subscription`): the price recurs every period the catalog
    /// gives (`periodMonths`, a year as `year`), and the subscription Stripe makes carries the
    /// intent, the account and the product in its own metadata, which every invoice of it brings
    /// back (`parent.subscription_details.metadata`): a renewal names them without the session.
    /// - Parameter trial: the free trial a first subscriber is given (its days, and its kind and
    ///   ISO 8601 period for the metadata the paid events bring back), as `trial_period_days`.
    static func subscription(product: Product, intent: String, accountId: String, email: String?, origin: String,
                             trial: (days: Int, period: String)? = nil, charged: (cents: Int, currency: String)? = nil) -> [(String, String)] {
        var fields = payment(product: product, quantity: 1, intent: intent, accountId: accountId, email: email, origin: origin, charged: charged)
        fields[0] = ("mode", "subscription")
        let months = max(1, product.periodMonths ?? 1)
        let (interval, count) = months % 12 == 0 ? ("year", months / 12) : ("month", months)
        let recurring = [("line_items[0][price_data][recurring][interval]", interval),
                         ("line_items[0][price_data][recurring][interval_count]", String(count))]
        fields.insert(contentsOf: recurring, at: 5)
        fields.removeAll { $0.0 == "metadata[kiosk_quantity]" }
        let success = fields.firstIndex { $0.0 == "success_url" } ?? fields.count
        fields.insert(contentsOf: [("subscription_data[metadata][kiosk_intent]", intent),
                                   ("subscription_data[metadata][kiosk_account_id]", accountId),
                                   ("subscription_data[metadata][kiosk_product_id]", product.id)], at: success)
        if let trial {
            let at = fields.firstIndex { $0.0 == "success_url" } ?? fields.count
            fields.insert(contentsOf: [("metadata[kiosk_offer]", IntroductoryOffer.Kind.freeTrial.rawValue), ("metadata[kiosk_offer_period]", trial.period),
                                       ("subscription_data[metadata][kiosk_offer]", IntroductoryOffer.Kind.freeTrial.rawValue),
                                       ("subscription_data[metadata][kiosk_offer_period]", trial.period),
                                       ("subscription_data[trial_period_days]", String(trial.days))], at: at)
        }
        return fields
    }
}
