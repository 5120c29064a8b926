import Foundation
import Synchronization
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore
import Mustache

/// The reader's account page, `/account` on the store's own address: sign in, see purchases and
/// subscriptions (cancel auto-renew), devices (remove one, sign out everywhere), approve a
/// device code, export, delete. Server-made HTML from ``AccountPageTemplates``, no script.
///
/// - The browser is one of the account's devices (kind `web`, one per account): signing in makes
///   it a token like any device's, kept in an HttpOnly, SameSite=Strict cookie scoped to `/account`;
///   removing it from any device signs the page out. Nothing else is kept for a session.
/// - Every form carries a CSRF token. Signed in, it is the SHA-256 of `csrf:` and the cookie's
///   token (no other site can read the cookie to make it); before, the sign-in form's token is a
///   random value also set in a cookie of its own, and the two must match (a site cannot make a
///   reader sign in to its account). Both are compared in constant time.
/// - Sign-ins here are limited as the API's are, per email and per address.
struct AccountPage: Sendable {
    let store: Store
    let limits: RateLimitGate
    let templates: MustacheLibrary
    /// Sends a library's downloads as a reading app's acquisition links are sent; its catalog is
    /// what the library and the buy page name.
    let content: ContentRoutes
    var catalog: CatalogService { content.catalog }
    /// The sync-password forms already answered: a reload sends the form again, and must not make
    /// (and use up) another password the reader never sees twice.
    let answeredForms = AnsweredForms()

    static let cookie = "kiosk_account"
    static let signInCookie = "kiosk_account_csrf"

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("account", use: guarded(page))
        routes.get("account/device", use: guarded(devicePage))
        routes.post("account/sign-in", use: guarded(signIn))
        routes.post("account/sign-up", use: guarded(signUp))
        routes.post("account/sign-out", use: guarded(signOut))
        routes.post("account/sign-out-everywhere", use: guarded(signOutEverywhere))
        routes.post("account/devices/remove", use: guarded(removeDevice))
        routes.post("account/sync-password", use: guarded(makeSyncPassword))
        routes.post("account/redeem-code", use: guarded(redeemCode))
        routes.post("account/subscriptions/cancel", use: guarded(cancelSubscription))
        routes.post("account/subscriptions/change", use: guarded(changePlan))
        routes.post("account/storefront", use: guarded(chooseStorefront))
        routes.post("account/device", use: guarded(approveCode))
        routes.get("account/export", use: guarded(export))
        routes.post("account/delete", use: guarded(deleteAccount))
        routes.get("account/library", use: guarded(library))
        routes.get("account/library/:id/file", use: guarded(download))
        routes.get("account/forgot", use: guarded(forgotPage))
        routes.post("account/forgot", use: guarded(forgot))
        routes.get("account/reset", use: guarded(resetPage))
        routes.post("account/reset", use: guarded(reset))
        routes.get("account/confirm", use: guarded(confirmPage))
        routes.post("account/confirm", use: guarded(confirm))
        routes.post("account/mail", use: guarded(mailPreferences))
        routes.get("account/buy/:id", use: guarded(buyPage))
        routes.post("account/buy/:id", use: guarded(buy))
        return routes
    }

    typealias Handler = @Sendable (Request, KioskRequestContext) async throws -> Response

    /// A refused form or a rate limit answers as a page saying so, not as the API's JSON.
    private func guarded(_ handler: @escaping Handler) -> Handler {
        { [self] request, context in
            do {
                if request.method == .post { try Self.requireSameOrigin(request) }
                return try await handler(request, context)
            } catch let error as HTTPError {
                return html(error.status, "message", ["title": error.status.reasonPhrase, "error": error.body ?? error.status.reasonPhrase])
            } catch let error as StoreError {
                return refusal(error.status, error.message, retryAfter: error.retryAfter)
            } catch let error as APIFailure {
                // A download refused (not owned, unknown) is a page too, not the API's JSON.
                return refusal(error.status, error.message, retryAfter: error.retryAfter)
            }
        }
    }

    /// A refusal as a page, with `Retry-After` when trying again later will do.
    func refusal(_ status: HTTPResponse.Status, _ message: String, retryAfter: Int? = nil) -> Response {
        var response = html(status, "message", ["title": status.reasonPhrase, "error": message])
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    // MARK: Pages

    @Sendable func page(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let device = try await signedIn(request) else { return signInPage(request, next: "/account") }
        return try await accountPage(device, request: request)
    }

    /// The verification URI device codes name (RFC 8628): the account page, its code field first.
    @Sendable func devicePage(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let code = request.uri.queryParameters.get("code").map { String($0) }
        guard let device = try await signedIn(request) else { return signInPage(request, next: "/account/device", code: code) }
        return try await accountPage(device, request: request, code: code)
    }

    /// - Parameter syncPassword: a sync password just made, shown this once.
    private func accountPage(_ device: DeviceIdentity, request: Request, notice: String? = nil, error: String? = nil, code: String? = nil,
                             syncPassword: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let summary = try await store.accounts.summary(of: device.accountId)
        let devices = try await store.accounts.devices(of: device.accountId, current: device.deviceId)
        let subscriptions = try await store.subscriptions.list(accountId: device.accountId).subscriptions
        let products = try await catalog.current.products
        let csrf = Self.csrf(for: token(request) ?? "")
        var values: [String: Any] = [
            "title": "Your account", "signedIn": true, "csrf": csrf, "code": code ?? "",
            "email": devices.email ?? "no sign-in", "accountId": device.accountId, "credits": summary.credits,
            "hasOwned": !summary.owned.isEmpty, "owned": summary.owned,
            "hasSubscriptions": !subscriptions.isEmpty,
            "subscriptions": subscriptions.map { info -> [String: Any] in
                var values: [String: Any] = ["id": info.originalTransactionId, "productId": info.productId, "state": info.state.rawValue,
                                             "expires": Self.shown(info.expiresDate), "autoRenew": info.autoRenew]
                if let next = info.renewsAs { values["renewsAs"] = next }
                let plans = info.state == .expired || (info.renewsThrough != nil && info.renewsThrough != PaidBy.stripe.rawValue) ? []
                    : Self.otherPlans(of: info, in: products, storefront: summary.storefront, taxes: store.taxes)
                if !plans.isEmpty {
                    values["plans"] = plans
                    values["hasPlans"] = true
                }
                return values
            },
            "storefronts": Self.countries.map { ["code": $0.code, "name": $0.name, "selected": $0.code == summary.storefront] },
            "storefrontName": summary.storefront.map { "\(StorefrontCountry.name($0)) (\($0))" } ?? "none chosen: the store's base prices, and no tax",
            "deviceCount": devices.devices.filter(\.countsAsDevice).count, "deviceLimit": devices.limit, "formKey": UUID().uuidString, "syncServer": RequestOrigin.base(of: request),
            "devices": devices.devices.map { info -> [String: Any] in
                ["id": info.id, "name": info.name, "created": Self.shown(info.createdAt), "lastSeen": Self.shown(info.lastSeenAt), "current": info.current]
            },
        ]
        if let notice { values["notice"] = notice }
        if let error { values["error"] = error }
        if let syncPassword { values["syncPassword"] = syncPassword }
        return html(status, "account", values)
    }

    func signInPage(_ request: Request, next: String, code: String? = nil, email: String = "", error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = Store.randomHex(bytes: 16)
        var values: [String: Any] = ["title": "Sign in", "csrf": csrf, "next": next, "email": email, "code": code ?? "", "sendsMail": store.sendsMail]
        if let error { values["error"] = error }
        var response = html(status, "signIn", values)
        let secure = RequestOrigin.isSecure(request) ? "; Secure" : ""
        response.headers[values: .setCookie].append("\(Self.signInCookie)=\(csrf); Path=/account; HttpOnly; SameSite=Strict; Max-Age=3600\(secure)")
        return response
    }

    // MARK: Signing in and out

    @Sendable func signIn(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        // Only the page's own two addresses: no redirect elsewhere. A device code typed before signing in comes along.
        let code = form["code"].flatMap { $0.isEmpty ? nil : Accounts.normalizedUserCode($0) }
        let next = Self.returning(to: form["next"], code: code)
        let email = form["email"] ?? ""
        guard let cookie = request.cookies[Self.signInCookie]?.value, let sent = form["csrf"], AdminMiddleware.matches(sent, cookie) else {
            return signInPage(request, next: Self.returning(to: form["next"], code: nil), code: code, email: email, error: "This form is out of date: sign in again.", status: .forbidden)
        }
        do {
            try await limits.admitSignIn(request, context: context, email: email)
            let signedIn = try await store.accounts.signIn(SignInRequest(email: email, password: form["password"] ?? "", deviceName: "web browser"), kind: .web)
            var response = Response(status: .seeOther, headers: [.location: next])
            // A session cookie (gone when the browser closes); the server ends it after 12 hours anyway.
            response.headers[values: .setCookie].append(sessionCookie(signedIn.token, request: request, seconds: nil))
            response.headers[values: .setCookie].append("\(Self.signInCookie)=; Path=/account; HttpOnly; SameSite=Strict; Max-Age=0")
            return response
        } catch let error as StoreError {
            var page = signInPage(request, next: Self.returning(to: form["next"], code: nil), code: code, email: email, error: error.message, status: error.status)
            if let retryAfter = error.retryAfter { page.headers[.retryAfter] = String(retryAfter) }
            return page
        }
    }

    /// `POST /account/sign-up`: a new account with this email and password, this browser signed
    /// in to it, and on to where the reader was going (a purchase, the library). Limited as the
    /// API's account creation and sign-ins are; a taken email is said, as the API says it.
    @Sendable func signUp(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        let next = Self.returning(to: form["next"], code: nil)
        let email = form["email"] ?? ""
        guard let cookie = request.cookies[Self.signInCookie]?.value, let sent = form["csrf"], AdminMiddleware.matches(sent, cookie) else {
            return signInPage(request, next: next, email: email, error: "This form is out of date: send it again.", status: .forbidden)
        }
        do {
            try await limits.admitAccountCreation(request, context: context)
            try await limits.admitSignIn(request, context: context, email: email)
            let created = try await store.accounts.createAccount(signIn: SignInDetails(email: email, password: form["password"] ?? "", deviceName: "web browser"), kind: .web)
            var response = Response(status: .seeOther, headers: [.location: next])
            response.headers[values: .setCookie].append(sessionCookie(created.token, request: request, seconds: nil))
            response.headers[values: .setCookie].append("\(Self.signInCookie)=; Path=/account; HttpOnly; SameSite=Strict; Max-Age=0")
            return response
        } catch let error as StoreError {
            // The API's words name kiosk commands; the page says what to do here.
            let message = error.code == StoreError.emailTaken(email).code ? "An account with this email exists already: sign in with it above." : error.message
            var page = signInPage(request, next: next, email: email, error: message, status: error.status)
            if let retryAfter = error.retryAfter { page.headers[.retryAfter] = String(retryAfter) }
            return page
        }
    }

    @Sendable func signOut(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, _) = try await postedForm(request)
        try await store.accounts.signOut(device)
        return signedOut(request)
    }

    @Sendable func signOutEverywhere(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, _) = try await postedForm(request)
        try await store.accounts.signOutEverywhere(device.accountId)
        return signedOut(request)
    }

    private func signedOut(_ request: Request) -> Response {
        var response = Response(status: .seeOther, headers: [.location: "/account"])
        response.headers[values: .setCookie].append(sessionCookie("", request: request, seconds: 0))
        return response
    }

    // MARK: The account's forms

    @Sendable func removeDevice(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        return try await acting(device, request) {
            let removed = try await store.accounts.removeDevice(form["device"] ?? "", of: device.accountId)
            return "\(removed.name) is signed out."
        }
    }

    /// A sync password for KOReader's progress sync, shown once; it is one of the account's
    /// devices, removed from the list as any other (``Accounts/makeSyncPassword(for:name:)``).
    @Sendable func makeSyncPassword(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        guard answeredForms.firstAnswer(to: form["key"] ?? "", of: device.accountId) else {
            return try await accountPage(device, request: request, notice: "This form was sent before, and the password it made was shown then; it is in the device list. Make another below if you need one.")
        }
        do {
            let made = try await store.accounts.makeSyncPassword(for: device.accountId, name: "KOReader progress sync")
            return try await accountPage(device, request: request, notice: "A sync password is made; it is shown once, below.", syncPassword: made.password)
        } catch let error as StoreError {
            return try await accountPage(device, request: request, error: error.message, status: error.status)
        }
    }

    /// An offer code's product, into the library; limited as guesses are.
    @Sendable func redeemCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        try await limits.admitCodeAttempt(request, context: context, accountId: device.accountId)
        return try await acting(device, request) {
            let redeemed = try await store.codes.redeem(form["offerCode"] ?? "", accountId: device.accountId)
            let title = try await catalog.current.products[redeemed.productId]?.title ?? redeemed.productId
            return "Redeemed: \(title) is in your library."
        }
    }

    @Sendable func cancelSubscription(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        return try await acting(device, request) {
            let info = try await store.subscriptions.setAutoRenew(accountId: device.accountId, originalTransactionId: form["subscription"] ?? "", on: false)
            return "\(info.productId) will not renew; it stays yours until \(Self.shown(info.expiresDate))."
        }
    }

    /// Every country a reader may choose, by name.
    static let countries: [(code: String, name: String)] = StorefrontCountry.countries.map { ($0, StorefrontCountry.name($0)) }.sorted { $0.name < $1.name }

    @Sendable func chooseStorefront(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        return try await acting(device, request) {
            let summary = try await store.accounts.setStorefront(form["storefront"] ?? "", accountId: device.accountId)
            return "Your country is \(summary.storefront.map { StorefrontCountry.name($0) } ?? "none"): prices, currency and tax follow it from now on."
        }
    }

    /// The other plans of a subscription's group on sale in the reader's storefront, each at its
    /// price there (with its tax) and with what moving to it does.
    private static func otherPlans(of info: SubscriptionInfo, in products: [String: Product], storefront: String?, taxes: TaxTable) -> [[String: Any]] {
        guard let running = products[info.productId] else { return [] }
        return products.values.filter { $0.kind == .subscription && $0.forSale != false && $0.group == running.group && $0.id != running.id }
            .sorted { ($0.planLevel ?? 1, $0.id) < ($1.planLevel ?? 1, $1.id) }
            .compactMap { plan in
                guard let price = plan.price(in: storefront), let cents = Price.cents(price.amount) else { return nil }
                let charge = taxes.charge(cents: cents, currency: price.currency, country: storefront, category: plan.taxClass)
                let change = PlanChange(from: running, to: plan)
                return ["id": plan.id, "label": "\(plan.title), \(Price.shown(cents: charge.cents, charge.currency)): \(change.kind.rawValue), \(change.atOnce ? "at once" : "at the renewal")"]
            }
    }

    @Sendable func changePlan(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        return try await acting(device, request) {
            // The form's own key: a reload posts the same change again, which answers the first.
            let asked = PlanChangeRequest(productId: form["plan"] ?? "", idempotencyKey: form["key"] ?? "")
            let changed = try await store.subscriptions.changePlan(accountId: device.accountId, originalTransactionId: form["subscription"] ?? "", asked)
            return changed.message.prefix(1).uppercased() + changed.message.dropFirst() + "."
        }
    }

    @Sendable func approveCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        try await limits.admitDeviceCode(request, context: context, approvingAccount: device.accountId)
        return try await acting(device, request) {
            let approved = try await store.accounts.approveDeviceCode(form["code"] ?? "", for: device.accountId)
            return "Approved: \(approved.deviceName) is signing in to this account."
        }
    }

    @Sendable func export(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let device = try await signedIn(request) else { return Response(status: .seeOther, headers: [.location: "/account"]) }
        var response = try JSONBody.response(try await store.accounts.export(device.accountId))
        response.headers[.contentDisposition] = #"attachment; filename="kiosk-account.json""#
        response.headers[.cacheControl] = "no-store"
        if let sniffing = HTTPField.Name("X-Content-Type-Options") { response.headers[sniffing] = "nosniff" }
        return response
    }

    @Sendable func deleteAccount(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        guard form["confirm"] == "yes" else {
            return try await accountPage(device, request: request, error: "Tick the box to say you understand, then delete.", status: .badRequest)
        }
        try await limits.admitAccountPassword(request, context: context, accountId: device.accountId)
        do {
            let deleted = try await store.accounts.delete(device.accountId, password: form["password"] ?? "")
            var response = html(.ok, "deleted", ["title": "Account deleted", "accountId": deleted.accountId, "erased": deleted.erased, "kept": deleted.kept])
            response.headers[values: .setCookie].append(sessionCookie("", request: request, seconds: 0))
            return response
        } catch let error as StoreError {
            return try await accountPage(device, request: request, error: error.message, status: error.status)
        }
    }

    /// Runs one of the page's actions; the page comes back with what it did, or why not.
    func acting(_ device: DeviceIdentity, _ request: Request, _ action: () async throws -> String) async throws -> Response {
        do {
            let notice = try await action()
            // Removing this browser's own device signs the page out.
            guard try await signedIn(request) != nil else { return signedOut(request) }
            return try await accountPage(device, request: request, notice: notice)
        } catch let error as StoreError {
            return try await accountPage(device, request: request, error: error.message, status: error.status)
        }
    }

    // MARK: Plumbing

    /// A form posted from another origin is refused before anything is read, whatever its cookies
    /// and CSRF token: a site on another port or a sibling host of the same site can plant cookies
    /// on this one (the CSRF cookie of the sign-in form among them), so the token alone is not
    /// proof. Browsers say where a form came from (`Sec-Fetch-Site`, and `Origin` on every POST);
    /// a client that says neither is no browser another site can drive.
    static func requireSameOrigin(_ request: Request) throws {
        if let site = HTTPField.Name("Sec-Fetch-Site").flatMap({ request.headers[$0] }), site != "same-origin", site != "none" {
            throw HTTPError(.forbidden, message: "This form came from another site (\(site)); send it from the account page itself.")
        }
        guard let origin = HTTPField.Name("Origin").flatMap({ request.headers[$0] }) else { return }
        let host = request.head.authority ?? ""
        guard origin == "http://\(host)" || origin == "https://\(host)" else {
            throw HTTPError(.forbidden, message: "This form came from another origin; send it from the account page itself.")
        }
    }

    func token(_ request: Request) -> String? {
        request.cookies[Self.cookie]?.value.nonEmpty
    }

    /// The device the cookie signs in, if it still may.
    func signedIn(_ request: Request) async throws -> DeviceIdentity? {
        guard let token = token(request) else { return nil }
        return try await store.accounts.device(forToken: token).flatMap { $0.kind == .web ? $0 : nil }
    }

    /// The signed-in device and the form's fields, once the form's CSRF token is this session's;
    /// otherwise a 403 page. Every signed-in form is read here, so none can forget the check.
    func postedForm(_ request: Request) async throws -> (DeviceIdentity, [String: String]) {
        let form = try await HTMLForm.fields(request)
        guard let token = token(request), let device = try await store.accounts.device(forToken: token), device.kind == .web else {
            throw HTTPError(.forbidden, message: "This browser is signed out: sign in again at /account.")
        }
        guard let sent = form["csrf"], AdminMiddleware.matches(sent, Self.csrf(for: token)) else {
            throw HTTPError(.forbidden, message: "This form's CSRF token is missing or not this session's: reload the page and send it again.")
        }
        return (device, form)
    }

    static func csrf(for token: String) -> String {
        FileDigest.sha256(of: Data(("csrf:" + token).utf8))
    }

    /// - Parameter seconds: nil for a cookie that ends with the browser; 0 to delete it.
    func sessionCookie(_ token: String, request: Request, seconds: Int?) -> String {
        // Secure when the store is reached over HTTPS (the proxy in front says so).
        let secure = RequestOrigin.isSecure(request) ? "; Secure" : ""
        return "\(Self.cookie)=\(token); Path=/account; HttpOnly; SameSite=Strict\(seconds.map { "; Max-Age=\($0)" } ?? "")\(secure)"
    }

    func html(_ status: HTTPResponse.Status, _ template: String, _ values: [String: Any], formTargets: [String] = []) -> Response {
        var values = values
        values["styleVersion"] = PageStyle.version
        return HTMLForm.page(status, templates.render(values, withTemplate: template) ?? "", formTargets: formTargets)
    }

    /// Where a sign-in goes on to: one of the account's own pages (the account, a device code, the
    /// library, buying a product), never an address elsewhere.
    static func returning(to next: String?, code: String?) -> String {
        guard let next else { return "/account" }
        if next == "/account/device" { return "/account/device" + (code.map { "?code=\($0)" } ?? "") }
        if next == "/account/library" { return next }
        let buying = "/account/buy/"
        if next.hasPrefix(buying), next.count <= 300 {
            // One path segment of plain characters: the ID as ShopPages escapes it.
            let id = next.dropFirst(buying.count)
            if !id.isEmpty, id.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-._~%".unicodeScalars.contains($0)) }) {
                return next
            }
        }
        return "/account"
    }

    static func shown(_ date: Date) -> String {
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withFullDate]
        return format.string(from: date)
    }
}

/// Forms a page answered once, by their one-time key and account, for ten minutes on the monotonic
/// clock, in this process (a reload reaches the instance that answered, behind a sticky proxy; on
/// another one it is answered again, which the sync passwords' limit of five bounds).
final class AnsweredForms: Sendable {
    private let answered = Mutex<[String: ContinuousClock.Instant]>([:])

    /// True the first time `key` is sent for `accountId`; false for a key sent again, or empty.
    func firstAnswer(to key: String, of accountId: String) -> Bool {
        guard !key.isEmpty, key.utf8.count <= 64 else { return key.isEmpty }
        return answered.withLock { answered in
            let now = ContinuousClock.now
            if answered.count >= 10_000 { answered = answered.filter { now - $0.value < .seconds(600) } }
            let name = accountId + "\u{0}" + key
            if let when = answered[name], now - when < .seconds(600) { return false }
            answered[name] = now
            return true
        }
    }
}
