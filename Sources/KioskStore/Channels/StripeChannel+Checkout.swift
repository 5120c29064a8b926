import Foundation
import KioskCore
import SQLKit

/// The reader's side of the web channel: where to pay. `kiosk buy` asks for a checkout; the store
/// records a one-time purchase intent and answers the web shop's checkout URL with the product,
/// the account and the intent in it. The shop's Checkout Session carries them back in its event
/// (`client_reference_id`, `metadata.kiosk_product_id`, `metadata.kiosk_intent`), and the grant
/// reaches the reader's devices through the change feed.
struct CheckoutIntentRecord: Codable, Sendable {
    var id: String
    var accountId: String
    var productId: String
    var quantity: Int
    var createdAt: Date
    /// The Checkout Session that paid it; an intent is paid once.
    var session: String?
    /// The payment page Kiosk made for it on Stripe (its first Checkout Session's URL), where it is
    /// sent again whatever address or price the reader asks with later.
    var checkoutUrl: String?
    /// The offer code it reserved (a discount, or a plan's trial), if any.
    var offerCodeId: String? = nil
    /// The storefront it was priced in; nil: none chosen (or an intent from before storefronts).
    var storefront: String? = nil
}

extension StripeChannel {
    /// Where the reader is sent to pay, the one address besides the store's own that the shop's
    /// buy form may lead to: Stripe's Checkout (`https://checkout.stripe.com`) when Kiosk creates
    /// the session, else the publisher's shop (`--checkout-url`); nil when the store has neither.
    public var checkoutOrigin: String? {
        if base.channels.stripeAPI != nil { return "https://checkout.stripe.com" }
        return base.channels.checkout?.origin
    }

    /// Whether readers can pay on the web: Kiosk creates Stripe's Checkout Sessions, or the
    /// publisher's shop does.
    public var takesWebPayments: Bool { base.channels.stripeAPI != nil || base.channels.checkout != nil }

    /// A one-time purchase intent for `productId` and the URL where the reader pays it: a Checkout
    /// Session Kiosk creates on Stripe (`--stripe-secret-key`), or the publisher's shop's page
    /// with the intent in it (`--checkout-url`).
    /// - Parameter origin: the store's own address as the reader reached it, where Stripe sends the
    ///   reader back (the library when paid, the product's page when not).
    /// - Parameter formKey: the shop's form's idempotency key: the same form sent again is the same
    ///   intent, and so the same Checkout Session, never a second one to pay.
    /// - Throws: `web_not_configured` without either; `unknown_product`, `off_sale`, `already_owned`;
    ///   `payment_service` when Stripe refuses or cannot be reached.
    public func startCheckout(_ request: CheckoutRequest, accountId: String, origin: String, formKey: String? = nil) async throws -> Checkout {
        guard takesWebPayments else {
            throw StoreError.channelNotConfigured("web", flags: "--stripe-secret-key (Kiosk creates Stripe's checkout) or --checkout-url (the web shop's checkout page)")
        }
        try RequestText.check(request.productId, field: "productId")
        let product = try await sellable(request.productId)
        if product.kind == .nonConsumable {
            // Paying again for a book the account has would take money for nothing.
            let owned = try await database.read { db in
                try await db.select().column("id").from("storeTransaction").where("accountId", .equal, accountId)
                    .where("productId", .equal, product.id).where("status", .equal, TransactionStatus.purchased.rawValue).first()
            }
            if owned != nil {
                throw StoreError(.wrongState, code: "already_owned", message: "the account owns \(product.id) already; nothing to pay (kiosk restore brings it back)")
            }
        }
        if product.kind == .nonConsumable, product.content != nil, Price.cents(product.price.amount) == 0 {
            throw StoreError(.wrongState, code: "free_product", message: "\(product.id) is free: download it without paying (its page in the shop, or kiosk buy in the sandbox)")
        }
        let quantity = request.quantity ?? 1
        guard (1...100).contains(quantity), quantity == 1 || product.kind == .consumable else {
            throw StoreError.invalidRequest("a quantity of \(quantity) of \(product.id) cannot be bought")
        }
        if product.kind == .subscription {
            // A second subscription to what runs would be charged every period for nothing.
            let running = try await database.read { try await SubscriptionRows($0).unended(accountId: accountId, among: [product.id]) }
            if running != nil {
                throw StoreError(.wrongState, code: "already_subscribed", message: "the account subscribes to \(product.id) already; nothing to pay (its issues are in the library)")
            }
            // Another plan of its group runs: both would be charged every period.
            if let other = try await payments.runningPlan(inGroupOf: product, accountId: accountId) {
                throw StoreError.planRunning(other.productId, until: other.until, wanted: product.id)
            }
        }
        // An offer code: checked now, reserved with the intent (so a one-time code is one checkout's
        // at a time), spent by the payment's grant, given back if the checkout lapses unpaid.
        var code: OfferCodes.Use?
        if let text = request.offerCode?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            let use = try await codes.use(text, for: product, accountId: accountId, reservedByCheckout: true)
            try Self.checkWebCode(use.benefit, product: product)
            code = use
        }
        // What the code comes to is checked before it is reserved: a code that cannot be taken
        // here (another currency, more than the price, no price at all) is refused unreserved.
        if let code {
            let charged = try await storefrontCharge(product, accountId: accountId, benefit: product.kind == .subscription ? nil : code.benefit)
            if product.kind == .subscription { _ = try await webCoupon(product, charged: charged, code: code.benefit, accountId: accountId) }
        }
        let storefront = try await database.read { try await AccountRows($0).find(accountId)?.storefront }
        let (intent, isNew) = try await recordIntent(accountId: accountId, product: product, quantity: quantity, formKey: formKey, code: code,
                                                     storefront: storefront)
        // An intent reused without its code (the reader's next click) keeps the code it reserved.
        if code == nil, let reserved = intent.offerCodeId { code = try await codes.reserved(reserved) }
        guard let stripe = base.channels.stripeAPI else {
            let template = base.channels.checkout
            return Checkout(intent: intent.id, productId: product.id, quantity: quantity,
                            url: template?.url(product: product.id, account: accountId, intent: intent.id, quantity: quantity) ?? "")
        }
        if let page = intent.checkoutUrl {
            // Its session is made: the same page, whatever the address, the scheme or the price
            // asked with now (a second session would be a second payment to take).
            return Checkout(intent: intent.id, productId: product.id, quantity: quantity, url: page)
        }
        let email = try await database.read { db in try await Accounts.signIn(accountId: accountId, in: db)?.email }
        // The reader's storefront's price with its tax, as the store itself would charge, less a
        // code's discount (nil: the base price).
        // A plan's recurring price stays whole: a code's money off its first period is a coupon (below).
        let charged = try await storefrontCharge(product, accountId: accountId, benefit: product.kind == .subscription ? nil : code?.benefit)
        // A code that gives a plan's trial gives it whether or not the account had one.
        let trial = try await webTrial(product, accountId: accountId, byCode: code?.benefit == .introductoryOffer)
        var fields = product.kind == .subscription
            ? CheckoutSessionFields.subscription(product: product, intent: intent.id, accountId: accountId, email: email, origin: origin,
                                                 trial: trial, charged: charged)
            : CheckoutSessionFields.payment(product: product, quantity: quantity, intent: intent.id, accountId: accountId, email: email, origin: origin,
                                            charged: charged)
        if base.channels.stripeAutomaticTax { fields = CheckoutSessionFields.automaticTax(fields) }
        // A plan's price paid as it goes, or a code's money off a plan: a coupon of Stripe's, made
        // for this checkout alone (its key names the intent).
        let coupon = product.kind == .subscription ? try await webCoupon(product, charged: charged, code: code?.benefit, accountId: accountId) : nil
        // A session holding a code lapses 31 minutes after its intent was made (Stripe's least is
        // 30), so an abandoned one gives its code back soon (`checkout.session.expired`); from the
        // intent's time, so a retry of a lost answer is the same request Stripe's key answers.
        if intent.offerCodeId != nil { fields.append(("expires_at", String(Int(intent.createdAt.timeIntervalSince1970) + 31 * 60))) }
        do {
            // A plan's price paid as it goes, or a code's money off a plan: a coupon of Stripe's,
            // made for this checkout alone (its key names the intent).
            if let coupon {
                let id = try await stripe.createCoupon(coupon.fields, idempotencyKey: "kiosk-coupon-\(intent.id)")
                let at = fields.firstIndex { $0.0 == "success_url" } ?? fields.count
                fields.insert(("discounts[0][coupon]", id), at: at)
                if let offer = coupon.offer {
                    fields.insert(contentsOf: [("metadata[kiosk_offer]", offer.type), ("metadata[kiosk_offer_period]", offer.period),
                                               ("subscription_data[metadata][kiosk_offer]", offer.type),
                                               ("subscription_data[metadata][kiosk_offer_period]", offer.period)], at: at)
                }
            }
            // One key per intent: asked again (a retry, an answer lost), Stripe answers the same session.
            let session = try await stripe.createCheckoutSession(fields, idempotencyKey: "kiosk-checkout-\(intent.id)")
            // The first page kept wins: two requests at once for one intent give one page.
            let page = try await database.write { db in
                try await db.update("checkoutIntent").set("checkoutUrl", to: session.url).where("id", .equal, intent.id).where("checkoutUrl", .is, SQLLiteral.null).run()
                return try await db.select().column("checkoutUrl").from("checkoutIntent").where("id", .equal, intent.id)
                    .first(decoding: PageRow.self)?.checkoutUrl ?? session.url
            }
            return Checkout(intent: intent.id, productId: product.id, quantity: quantity, url: page)
        } catch let failure as StoreError where failure.code == "payment_service" {
            logger.warning("Stripe could not create a Checkout Session; the reader was asked to try again", metadata: ["product": "\(product.id)", "intent": "\(intent.id)", "error": "\(failure.message)"])
            throw failure
        } catch let refusal as StripeAPI.Refusal {
            logger.warning("Stripe refused to create a Checkout Session; check --stripe-secret-key and the catalog's price",
                           metadata: ["product": "\(product.id)", "intent": "\(intent.id)", "stripe": "\(refusal)"])
            if isNew {
                // Stripe made no session for this new intent: nothing can pay it, so it is not left
                // waiting in the reader's library. (An intent asked for before may have a session
                // from then, which must still find it; so may one whose answer was lost.)
                try await database.write { db in
                    let deleted = try await db.raw(#"DELETE FROM "checkoutIntent" WHERE "id" = \#(bind: intent.id) AND "session" IS NULL RETURNING "id""#).all()
                    // Its code, reserved with it, is given back with it.
                    if !deleted.isEmpty, let reserved = intent.offerCodeId { try await OfferCodes.release(codeId: reserved, intent: intent.id, in: db) }
                }
            }
            throw StoreError.paymentService("the payment service refused to start this checkout; nothing was bought, and the store's operator can see why")
        }
    }

    private struct PageRow: Decodable { var checkoutUrl: String? }

    /// What the account's storefront charges for one of `product`, tax included; nil when that is
    /// the catalog's base price with no tax (no storefront, no table), so the session is as before.
    /// - Throws: `not_sold_here` when the product lists prices and none for the storefront.
    private func storefrontCharge(_ product: Product, accountId: String, benefit: CodeBenefit? = nil) async throws -> (cents: Int, currency: String)? {
        let storefront = try await database.read { try await AccountRows($0).find(accountId)?.storefront }
        let discounting = benefit.map { $0.price(from: 10_000) != 10_000 } ?? false
        guard storefront != nil || discounting else { return nil }
        guard let price = product.price(in: storefront), var cents = Price.cents(price.amount) else {
            throw StoreError.notSoldHere(product.id, storefront: storefront)
        }
        if let benefit, discounting {
            if case .amountOff = benefit, price.currency != product.price.currency {
                throw StoreError(.wrongState, code: "code_other_currency",
                                 message: "this code takes an amount of \(product.price.currency) off, and this account buys in \(price.currency); ask for a code in \(price.currency)")
            }
            if case .amountOff(let off) = benefit, off >= cents {
                throw StoreError(.wrongState, code: "code_exceeds_price",
                                 message: "this code takes \(Price.shown(cents: off, price.currency)) off, not less than \(product.id)'s price here; ask for another code")
            }
            cents = benefit.price(from: cents)
        }
        // Stripe computes the tax itself (automatic tax): the price as it is, the tax inside it.
        if base.channels.stripeAutomaticTax { return (cents, price.currency) }
        let charge = base.taxes.charge(cents: cents, currency: price.currency, country: storefront, category: product.taxClass)
        return (charge.cents, charge.currency)
    }

    /// The free trial Stripe is asked to give (`trial_period_days`): the product's, in days (a
    /// trial of periods counted from today), when the account never had a subscription in its
    /// group. Another kind of offer is not made on the web: its checkout is at the normal price,
    /// as the buy page says.
    /// - Parameter byCode: an offer code gives it, whether or not the account had one.
    private func webTrial(_ product: Product, accountId: String, byCode: Bool = false) async throws -> (days: Int, period: String)? {
        guard let offer = product.introductoryOffer, offer.type == .freeTrial else { return nil }
        if !byCode, !(try await payments.introductoryOfferEligible(accountId: accountId, product: product)) { return nil }
        let months = product.periodMonths ?? 1
        let now = clock.wallNow()
        guard let end = Calendar.utc.date(byAdding: offer.firstPeriod(periodMonths: months), to: now),
              let days = Calendar.utc.dateComponents([.day], from: now, to: end).day, days > 0 else { return nil }
        return (days, offer.isoPeriod(periodMonths: months))
    }

    /// The coupon a plan's checkout carries, if any: a code's money off its first period, or its
    /// introductory price paid as it goes (the difference off each month it lasts) for a reader
    /// it is offered to (a first subscription in the group, or one a code gives it to).
    private func webCoupon(_ product: Product, charged: (cents: Int, currency: String)?, code: CodeBenefit?, accountId: String) async throws
        -> (fields: [(String, String)], offer: (type: String, period: String)?)? {
        switch code {
        case .percentOff(let percent)?:
            return (CouponFields.percentOff(percent, name: "Offer code"), nil)
        case .amountOff(let off)?:
            let currency = charged?.currency ?? product.price.currency
            guard currency == product.price.currency else {
                throw StoreError(.wrongState, code: "code_other_currency",
                                 message: "this code takes an amount of \(product.price.currency) off, and this account buys in \(currency); ask for a code in \(currency)")
            }
            let price = try charged?.cents ?? Store.cents(product.price)
            guard off < price else {
                throw StoreError(.wrongState, code: "code_exceeds_price", message: "this code takes more off than \(product.id)'s price here; ask for another code")
            }
            return (CouponFields.amountOff(off, currency: currency, months: nil, name: "Offer code"), nil)
        default:
            break
        }
        guard let offer = product.introductoryOffer, offer.type == .payAsYouGo else { return nil }
        if code != .introductoryOffer, !(try await payments.introductoryOfferEligible(accountId: accountId, product: product)) { return nil }
        let months = product.periodMonths ?? 1
        let normal = try Store.cents(product.price)
        let local = charged?.cents ?? normal
        let off = local - offer.firstChargeCents(local: local, normal: normal)
        guard off > 0 else { return nil }
        return (CouponFields.amountOff(off, currency: charged?.currency ?? product.price.currency, months: (offer.periods ?? 1) * months, name: "Introductory price"),
                (offer.type.rawValue, offer.isoPeriod(periodMonths: months)))
    }

    /// What a code may give on the web: money off a book, an issue or a plan's first period (a
    /// coupon), or a plan's introductory offer, free trial or price paid as it goes. A price paid
    /// up front for several periods is not a checkout's (it would take a subscription schedule).
    static func checkWebCode(_ benefit: CodeBenefit, product: Product) throws {
        switch (benefit, product.kind) {
        case (.percentOff, .nonConsumable), (.amountOff, .nonConsumable), (.percentOff, .subscription), (.amountOff, .subscription): return
        case (.introductoryOffer, .subscription) where product.introductoryOffer?.type != .payUpFront: return
        default:
            throw StoreError(.wrongState, code: "code_not_on_web",
                             message: "this code gives \(benefit.described(currency: product.price.currency)) on \(product.id), which the web's checkout does not take; use it in the app (kiosk buy \(product.id) --code CODE)")
        }
    }

    /// Whether the reader can start paying for `product` on the web here, or why not (shown on
    /// the buy page before a form is offered).
    public func webRefusal(for product: Product) -> StoreError? {
        guard takesWebPayments else {
            return StoreError(.forbidden, code: "web_not_offered", message: "this store sells in its apps, not on the web; buy it in the app, and it is in your library here too")
        }
        return nil
    }

    /// The intent, recorded once, and whether this call made it. A book or a plan (what an
    /// account buys once) reuses the account's open intent for it from the last 23 hours, whatever
    /// form asked: a reader who goes back and buys again is sent to the same payment, never to a
    /// second one (Stripe keeps an idempotency key a day). A credit pack, bought any number of
    /// times, gets an intent per form: its key names it, so the same form sent again is the same
    /// intent. Decided under the account's row lock, so two requests at once make one intent.
    ///
    /// With a code, the intent reserves it in the same transaction (``OfferCodes/spend(_:accountId:transactionId:now:in:)``
    /// under `intent:<id>`): a one-time code used by two readers at once is one checkout's. An open
    /// checkout without that code is not swapped for one with it (the reader would have two to
    /// pay): the reader pays it, or uses the code once it lapses.
    private func recordIntent(accountId: String, product: Product, quantity: Int, formKey: String?, code: OfferCodes.Use? = nil,
                              storefront: String? = nil) async throws -> (CheckoutIntentRecord, isNew: Bool) {
        let now = clock.wallNow()
        let id = formKey.map { "ci_" + FileDigest.sha256(of: Data("\(accountId):\($0)".utf8)).prefix(32) } ?? "ci_" + Store.randomHex(bytes: 16)
        var intent = CheckoutIntentRecord(id: id, accountId: accountId, productId: product.id, quantity: quantity, createdAt: now, session: nil, checkoutUrl: nil)
        intent.offerCodeId = code?.codeId
        intent.storefront = storefront
        let made = intent
        return try await database.write { db in
            _ = try await AccountRows(db).lock(accountId)
            // A checkout holding a code whose session has lapsed (31 minutes) is closed now and its
            // code given back, whether or not Stripe's expiry event came: the reader's next click
            // gets a page that can be paid.
            let lapsed = try await db.raw(#"""
                UPDATE "checkoutIntent" SET "session" = 'expired:lapsed'
                WHERE "accountId" = \#(bind: accountId) AND "session" IS NULL AND "offerCodeId" IS NOT NULL
                    AND "createdAt" < \#(bind: now.addingTimeInterval(-31 * 60))
                RETURNING "id", "offerCodeId"
                """#).all()
            var released = Set<String>()
            for row in lapsed {
                let (intentId, codeId) = (try row.decode(column: "id", as: String.self), try row.decode(column: "offerCodeId", as: String.self))
                try await OfferCodes.release(codeId: codeId, intent: intentId, in: db)
                released.insert(intentId)
            }
            // The code is this account's open checkout's already: that checkout, whatever its age.
            if let reservedIntent = code?.reservedIntent, !released.contains(reservedIntent) {
                guard let kept = try await db.select().column("*").from("checkoutIntent").where("id", .equal, reservedIntent)
                    .where("accountId", .equal, accountId).where("productId", .equal, product.id).where("session", .is, SQLLiteral.null)
                    .first(decoding: CheckoutIntentRecord.self) else { throw OfferCodes.invalid }
                return (kept, false)
            }
            if product.kind != .consumable, let open = try await db.select().column("*").from("checkoutIntent")
                .where("accountId", .equal, accountId).where("productId", .equal, product.id).where("session", .is, SQLLiteral.null)
                .where("createdAt", .greaterThan, now.addingTimeInterval(-23 * 3600)).orderBy("createdAt", .descending)
                .first(decoding: CheckoutIntentRecord.self) {
                if let code, open.offerCodeId != code.codeId, code.reservedIntent == nil {
                    throw StoreError(.wrongState, code: "checkout_open",
                                     message: "a checkout for \(product.id) is open already without this code: pay it, or use the code once it lapses (within a day)")
                }
                return (open, false)
            }
            if let kept = try await db.select().column("*").from("checkoutIntent").where("id", .equal, id).first(decoding: CheckoutIntentRecord.self) {
                guard kept.accountId == accountId else {
                    throw StoreError.invalidRequest("the form's key names another purchase; reload the page and buy again")
                }
                guard kept.productId == product.id, kept.quantity == quantity, kept.offerCodeId == code?.codeId else {
                    throw StoreError.idempotencyKeyReused(formKey ?? "", differences: ["productId", "quantity", "offerCode"])
                }
                return (kept, false)
            }
            try await db.insert(into: "checkoutIntent").model(made).run()
            if let code { try await OfferCodes.spend(code, accountId: accountId, transactionId: "intent:" + made.id, now: now, in: db) }
            return (made, true)
        }
    }

    /// `checkout.session.expired`: a checkout that lapsed unpaid. Its intent is closed (no longer
    /// waiting in the library, nor reused for the next click, which gets a page that can be paid)
    /// and gives back the code it reserved. Stripe expires a session once; a paid one never.
    func checkoutExpired(_ event: StripeEvent, session: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        guard let intentId = session.metadata?["kiosk_intent"], Self.isIdentifier(intentId), let sessionId = session.id, Self.isIdentifier(sessionId) else {
            return try await keep(event, payment: session.id, outcome: ChannelEventOutcome.ignored, detail: "a lapsed session of no intent Kiosk made")
        }
        struct Closed: Decodable { var accountId: String; var offerCodeId: String? }
        let closed = try await database.write { db -> Closed? in
            let row = try await db.raw(#"""
                UPDATE "checkoutIntent" SET "session" = \#(bind: "expired:" + sessionId)
                WHERE "id" = \#(bind: intentId) AND "session" IS NULL RETURNING "accountId", "offerCodeId"
                """#).first(decoding: Closed.self)
            if let code = row?.offerCodeId { try await OfferCodes.release(codeId: code, intent: intentId, in: db) }
            return row
        }
        guard let closed else {
            return try await keep(event, payment: sessionId, outcome: ChannelEventOutcome.ignored, detail: "the intent was paid or closed already")
        }
        return try await keep(event, payment: sessionId, outcome: ChannelEventOutcome.applied, account: closed.accountId,
                              detail: "the checkout lapsed unpaid" + (closed.offerCodeId == nil ? "" : "; its offer code given back"))
    }

    /// The products `accountId` started paying for on the web in the last day whose payment has
    /// not landed (no session has paid their intent), the newest first, each once: what the
    /// reader's library shows as waiting for the payment. An abandoned checkout stops showing a
    /// day later (a Checkout Session expires within one).
    public func waitingCheckouts(accountId: String) async throws -> [String] {
        struct Row: Decodable { var productId: String }
        let since = clock.wallNow().addingTimeInterval(-86_400)
        let rows = try await database.read { db in
            try await db.select().column("productId").from("checkoutIntent")
                .where("accountId", .equal, accountId).where("session", .is, SQLLiteral.null).where("createdAt", .greaterThanOrEqual, since)
                .orderBy("createdAt", .descending).all(decoding: Row.self)
        }
        var seen = Set<String>()
        return rows.map(\.productId).filter { seen.insert($0).inserted }
    }

    /// What a paid session's intent says, once it is this session's: the account and product it
    /// was made for, or why the session cannot be granted.
    /// - Returns: nil (success) when the store holds no such intent: a checkout made after the
    ///   backup the store was restored from, whose paid session is judged by its own fields.
    func claimIntent(_ intentId: String, session: String, account: String?, product: String?) async throws -> Result<CheckoutIntentRecord?, StoreError> {
        guard Self.isIdentifier(intentId) else { return .failure(.invalidRequest("metadata.kiosk_intent is not an intent Kiosk made")) }
        // What the session says is checked before the intent is taken: a session naming another
        // account's or product's intent must not use it up for the payment it was made for.
        guard let made = try await database.read({ db in
            try await db.select().column("*").from("checkoutIntent").where("id", .equal, intentId).first(decoding: CheckoutIntentRecord.self)
        }) else {
            return .success(nil)
        }
        if let account, account != made.accountId {
            return .failure(.invalidRequest("client_reference_id \(account.prefix(100)) is not the account intent \(intentId) was made for"))
        }
        if let product, product != made.productId {
            return .failure(.invalidRequest("metadata.kiosk_product_id \(product.prefix(100)) is not the product intent \(intentId) was made for"))
        }
        // Compare-and-set: the intent takes the first session that pays it, and only that one.
        let claimed = try await database.write { db in
            try await db.raw(#"""
                UPDATE "checkoutIntent" SET "session" = \#(bind: session)
                WHERE "id" = \#(bind: intentId) AND ("session" IS NULL OR "session" = \#(bind: session))
                RETURNING "id", "accountId", "productId", "quantity", "createdAt", "session", "offerCodeId", "storefront"
                """#).first(decoding: CheckoutIntentRecord.self)
        }
        guard let intent = claimed else {
            return .failure(.invalidRequest("intent \(intentId) was already paid by another Checkout Session"))
        }
        return .success(intent)
    }
}
