import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// The reader's library in a browser, and buying from the shop: under `/account`, where the
/// session cookie is sent, so the shop's own pages stay the same for everyone.
extension AccountPage {
    /// `GET /account/library`: what the account owns (bought outright, or an issue a subscription
    /// covers), each with a download of the publisher's file; its subscriptions; and what it
    /// started paying for on the web whose payment has not landed yet.
    @Sendable func library(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let device = try await signedIn(request) else { return signInPage(request, next: "/account/library") }
        let published = try await catalog.current
        let candidates = published.products.values.filter { $0.kind == .nonConsumable && $0.content != nil }
        let owned = try await store.receipts.ownedProducts(device.accountId, among: Array(candidates))
        let places = try await store.reading.percentages(accountId: device.accountId)
        let items = owned.compactMap { published.products[$0] }
            .sorted { ($0.publicationDate ?? "", $1.title, $1.id) > ($1.publicationDate ?? "", $0.title, $0.id) }
            .map { product -> [String: Any] in
                var values: [String: Any] = ["title": product.title, "href": ShopPages.productPath(product.id)]
                // Where a reading app that syncs (KOReader) last left the reader.
                if let place = places[product.id] { values["place"] = "\(Int((place * 100).rounded())) %" }
                if let content = product.content {
                    values["format"] = ShopPages.formatName(content.format)
                    values["size"] = ByteCount.text(content.size)
                    values["download"] = "/account/library/\(OPDSFeeds.escaped(product.id))/file"
                }
                return values
            }
        let subscriptions = try await store.subscriptions.list(accountId: device.accountId).subscriptions.map { info -> [String: Any] in
            ["title": published.products[info.productId]?.title ?? info.productId, "state": info.state.rawValue,
             "expires": Self.shown(info.expiresDate), "autoRenew": info.autoRenew]
        }
        let waiting = try await store.stripe.waitingCheckouts(accountId: device.accountId)
            .filter { !owned.contains($0) }.map { published.products[$0]?.title ?? $0 }
        // The way back to a reading app after paying in the browser: its shelf as an `opds://`
        // link (the scheme Thorium and other apps register for a catalog), and the plain address.
        let origin = RequestOrigin.base(of: request)
        let shelf = origin + OPDSFormat.v2.root + "/shelf"
        let appLink = "opds://" + (origin.split(separator: "://", maxSplits: 1).last.map(String.init) ?? origin) + OPDSFormat.v2.root + "/shelf"
        return html(.ok, "library", [
            "title": "Your library", "signedIn": true, "csrf": Self.csrf(for: token(request) ?? ""),
            "hasItems": !items.isEmpty, "items": items, "appLink": appLink, "shelf": shelf,
            "hasSubscriptions": !subscriptions.isEmpty, "subscriptions": subscriptions,
            "hasWaiting": !waiting.isEmpty, "waiting": waiting,
        ])
    }

    /// `GET /account/library/{id}/file`: the publisher's file, byte for byte, with ranges (a browser
    /// resumes an interrupted download), named for saving. A zip or tar.gz product is its archive.
    @Sendable func download(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        guard let device = try await signedIn(request) else {
            throw HTTPError(.unauthorized, message: "This browser is signed out: sign in at /account/library, then download again.")
        }
        guard let response = try await content.current(id, request: request, account: { device.accountId }) else {
            throw HTTPError(.unauthorized, message: "This browser is signed out: sign in at /account/library, then download again.")
        }
        return response
    }

    /// `GET /account/buy/{id}`: what is bought and for how much, with the form that starts the
    /// payment (a book the account owns says so instead); signed out, the sign-in first, which
    /// comes back here. The form carries a fresh idempotency key: sent twice (a reload, a double
    /// click), it is one purchase.
    @Sendable func buyPage(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let path = "/account/buy/\(OPDSFeeds.escaped(id))"
        guard let device = try await signedIn(request) else { return signInPage(request, next: path) }
        let product = try await sellable(id)
        var values: [String: Any] = [
            "title": product.kind == .subscription ? "Subscribe" : "Buy", "signedIn": true, "csrf": Self.csrf(for: token(request) ?? ""),
            "name": product.title, "href": ShopPages.productPath(product.id), "price": ShopPages.price(product), "action": path,
            "payLabel": "Pay \(ShopPages.price(product))", "key": UUID().uuidString,
            "sandbox": pretendPayment, "owned": false,
        ]
        if product.kind == .subscription, let months = product.periodMonths { values["period"] = ShopPages.period(months) }
        // The reader's storefront: its price, currency and tax (the catalog's base price for one
        // who chose none, as the purchase is charged).
        let storefront = try await store.accounts.storefront(of: device.accountId)
        let local = product.price(in: storefront)
        if let local, let cents = Price.cents(local.amount), cents > 0 {
            let charge = store.taxes.charge(cents: cents, currency: local.currency, country: storefront, category: product.taxClass)
            let shown = Price.shown(cents: charge.cents, charge.currency)
            let tax = charge.taxBasisPoints.map { " (incl. \(AdminTaxRow.rateText($0)) % VAT, \(Price.shown(cents: charge.taxCents, charge.currency)))" } ?? ""
            values["price"] = shown + tax
            values["payLabel"] = "Pay \(shown)"
        }
        if let storefront {
            values["storefrontNote"] = "Prices for \(StorefrontCountry.name(storefront)) (\(storefront)); your country is changed on your account page."
        } else if product.prices != nil {
            values["storefrontNote"] = "These are the store's base prices; choose your country on your account page for its prices and tax."
        }
        // What stops the purchase is said here, before a form is offered.
        if local == nil {
            values["owned"] = true
            values["error"] = "\(product.title) is not sold in \(StorefrontCountry.name(storefront ?? "")) (\(storefront ?? "")): it has no price there."
        } else if ShopPages.isFree(product) {
            values["owned"] = true
            values["notice"] = "\(product.title) is free: download it from its page."
        } else if product.kind == .nonConsumable, try await store.receipts.accountOwns(device.accountId, product) {
            values["owned"] = true
            values["notice"] = "You own \(product.title) already: it is in your library."
        } else if product.kind == .subscription,
                  let active = try await store.subscriptions.list(accountId: device.accountId).subscriptions.first(where: { $0.productId == product.id && $0.entitled }) {
            values["owned"] = true
            values["notice"] = "You subscribe to \(product.title) already, until \(Self.shown(active.expiresDate)): its issues are in your library."
        } else if let other = try await store.payments.runningPlan(inGroupOf: product, accountId: device.accountId) {
            // A second plan of the group would be charged beside the first.
            values["owned"] = true
            values["notice"] = "You subscribe to \(try await catalog.current.products[other.productId]?.title ?? other.productId) until \(Self.shown(other.until)), a plan of the same magazine: change its plan to this one on your account page (an upgrade starts at once, a downgrade at the renewal)."
        } else if !pretendPayment, let refusal = store.stripe.webRefusal(for: product) {
            values["owned"] = true
            values["error"] = Self.readerWords(refusal, product: product)
        } else if let offer = product.offerText {
            // The offer is for a first subscription in the group: said before the reader pays.
            let eligible = try await store.payments.introductoryOfferEligible(accountId: device.accountId, product: product)
            if eligible, !pretendPayment, product.introductoryOffer?.type == .payUpFront {
                // The web's checkout gives a free trial (Stripe's trial days) and a price paid as it
                // goes (a coupon); one price for several periods is the apps'.
                values["offer"] = "The introductory offer (\(offer)) is made in the store's apps; on the web this plan is at the normal price."
            } else if eligible {
                values["offer"] = "Your first subscription: \(offer)."
                values["payLabel"] = product.introductoryOffer?.type == .freeTrial ? "Start the free trial" : "Pay \(Price.shown(cents: product.introductoryOffer?.firstChargeCents ?? 0, product.price.currency))"
            } else {
                values["offer"] = "The introductory offer (\(offer)) is for a first subscription; this account had one, so this plan starts at the normal price."
            }
        }
        return html(.ok, "buy", values, formTargets: store.stripe.checkoutOrigin.map { [$0] } ?? [])
    }

    /// A refusal of the store's, in the reader's words on the web (the API's name `kiosk` commands).
    static func readerWords(_ refusal: StoreError, product: Product) -> String {
        switch refusal.code {
        case "already_owned": "You own \(product.title) already: it is in your library."
        case "off_sale": "\(product.title) is no longer on sale. If you bought it, it is in your library."
        case "already_subscribed": "You subscribe to \(product.title) already: its issues are in your library."
        case "web_not_offered", "web_not_configured": "This store sells in its apps, not on the web: buy \(product.title) in the app, and it is in your library here too."
        case "free_product": "\(product.title) is free: download it from its page."
        default: refusal.message
        }
    }

    /// A sandbox store without a web shop takes the sandbox's pretend payment from the shop, as
    /// `kiosk buy` does, so the bundled store can be tried in a browser; any other pays on the web.
    private var pretendPayment: Bool { store.environment == .sandbox && !store.stripe.takesWebPayments }

    /// `POST /account/buy/{id}`: a purchase intent, and a 303 to where the reader pays; the grant
    /// comes from the payment's signed event alone, never from the reader coming back. In the
    /// sandbox without a web shop, the pretend payment under the form's key, and the library.
    @Sendable func buy(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let (device, form) = try await postedForm(request)
        try await limits.admitPurchase(request, context: context, accountId: device.accountId)
        do {
            // A code taken off the price (or a subscription's offer), limited as guesses are.
            let code = form["offerCode"].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
            if code != nil { try await limits.admitCodeAttempt(request, context: context, accountId: device.accountId) }
            if pretendPayment {
                _ = try await store.payments.pay(PaymentRequest(productId: id, quantity: 1, paymentMethod: .approve, idempotencyKey: form["key"] ?? "",
                                                                offerCode: code), accountId: device.accountId)
                return Response(status: .seeOther, headers: [.location: "/account/library"])
            }
            let checkout = try await store.stripe.startCheckout(CheckoutRequest(productId: id, offerCode: code), accountId: device.accountId,
                                                                origin: RequestOrigin.base(of: request), formKey: form["key"])
            return Response(status: .seeOther, headers: [.location: checkout.url])
        } catch let error as StoreError {
            let product = try await catalog.current.products[id]
            var response = html(error.status, "message", ["title": "Not bought", "signedIn": true, "csrf": Self.csrf(for: token(request) ?? ""),
                                                          "error": product.map { Self.readerWords(error, product: $0) } ?? error.message, "shop": true])
            if let retryAfter = error.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
            return response
        }
    }

    /// A product on sale, or a page-sized reason why not.
    private func sellable(_ id: String) async throws -> Product {
        guard let product = try await catalog.current.products[id], product.forSale != false else {
            throw HTTPError(.notFound, message: "No product \(ProductID.printable(id)) is on sale here.")
        }
        return product
    }
}
