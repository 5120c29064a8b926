import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The customer's routes: accounts, payments, redemptions and the account's transactions.
///
/// Who is asking is decided once, by ``AccountMiddleware``; each handler asks the context for
/// the account and the ``Store`` for the answer.
struct AccountRoutes: Sendable {
    let store: Store
    let limits: RateLimitGate
    /// ``StoreDescription/entityTag`` of this server's `GET /v1/store`, named by every feed page.
    let storeTag: String

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.post("v1/accounts", use: createAccount)
        routes.get("v1/account", use: account)
        routes.put("v1/account/storefront", use: setStorefront)
        routes.post("v1/payments", use: pay)
        routes.post("v1/codes/redeem", use: redeemCode)
        routes.post("v1/redemptions", use: redeem)
        routes.get("v1/transactions", use: transactions)
        routes.post("v1/transactions/:id/finish", use: finish)
        routes.get("v1/subscriptions", use: subscriptions)
        routes.post("v1/subscriptions/:id/cancel", use: cancelSubscription)
        routes.post("v1/subscriptions/:id/resume", use: resumeSubscription)
        routes.post("v1/subscriptions/:id/change", use: changePlan)
        return routes
    }

    /// `GET /v1/subscriptions`: ``SubscriptionList``.
    @Sendable func subscriptions(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.subscriptions.list(accountId: context.requireAccount()))
    }

    /// `POST /v1/subscriptions/{originalTransactionId}/cancel`: auto-renew off; ``SubscriptionInfo``.
    @Sendable func cancelSubscription(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.subscriptions.setAutoRenew(accountId: context.requireAccount(), originalTransactionId: context.parameters.require("id"), on: false))
    }

    /// `POST /v1/subscriptions/{originalTransactionId}/resume`: auto-renew on; ``SubscriptionInfo``.
    @Sendable func resumeSubscription(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.subscriptions.setAutoRenew(accountId: context.requireAccount(), originalTransactionId: context.parameters.require("id"), on: true))
    }

    /// `POST /v1/subscriptions/{originalTransactionId}/change` with a ``PlanChangeRequest``: another
    /// plan of the group, at once or at the renewal; ``PlanChangeResult``.
    @Sendable func changePlan(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let asked = try JSONBody.decode(PlanChangeRequest.self, from: Data(buffer: try await JSONBody.body(of: request, upTo: 1 << 14)))
        return try JSONBody.response(try await store.subscriptions.changePlan(
            accountId: context.requireAccount(), originalTransactionId: context.parameters.require("id"), asked))
    }

    /// `POST /v1/accounts`: a new account and its first device's token; with a body
    /// ``SignInDetails``, an account that other devices sign in to, else an anonymous one.
    @Sendable func createAccount(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try await limits.admitAccountCreation(request, context: context)
        let body = try await JSONBody.body(of: request, upTo: 1 << 16)
        let asked = body.readableBytes == 0 ? NewAccount() : try JSONBody.decode(NewAccount.self, from: Data(buffer: body))
        let signIn = try asked.signIn()
        // With a sign-in, limited as sign-ins are too: it answers whether an email is taken.
        if let signIn { try await limits.admitSignIn(request, context: context, email: signIn.email) }
        return try JSONBody.response(try await store.accounts.createAccount(signIn: signIn, deviceName: asked.deviceName, storefront: asked.storefront), status: .created)
    }

    /// The body of `POST /v1/accounts`: empty or `{}` (as clients before sign-ins send) for an
    /// anonymous account, or an email and a password for one with a sign-in.
    struct NewAccount: Decodable {
        var email: String?
        var password: String?
        var deviceName: String?
        /// The storefront chosen at sign-up (a country code); absent: none yet.
        var storefront: String?

        func signIn() throws -> SignInDetails? {
            switch (email, password) {
            case (nil, nil): return nil
            case (let email?, let password?): return SignInDetails(email: email, password: password, deviceName: deviceName)
            default: throw APIFailure.badRequest("an account with a sign-in needs both \"email\" and \"password\"; send neither for an anonymous one")
            }
        }
    }

    /// `GET /v1/account`: the balance and what the account owns.
    @Sendable func account(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.accounts.summary(of: context.requireAccount(), makingToken: true))
    }

    /// `PUT /v1/account/storefront` with a ``StorefrontChoice``: the account's ``AccountSummary`` after it.
    @Sendable func setStorefront(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let choice = try await JSONBody.decode(StorefrontChoice.self, from: request)
        return try JSONBody.response(try await store.accounts.setStorefront(choice.storefront, accountId: context.requireAccount()))
    }

    /// `POST /v1/payments`.
    @Sendable func pay(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitPurchase(request, context: context, accountId: account)
        let payment = try await JSONBody.decode(PaymentRequest.self, from: request)
        // A code sent with a purchase is a guess like one redeemed alone: the same limits.
        if payment.offerCode != nil { try await limits.admitCodeAttempt(request, context: context, accountId: account) }
        return try JSONBody.response(try await store.payments.pay(payment, accountId: account))
    }

    /// `POST /v1/codes/redeem`: an offer code's product, free; limited as guesses are.
    @Sendable func redeemCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitCodeAttempt(request, context: context, accountId: account)
        let asked = try await JSONBody.decode(RedeemCodeRequest.self, from: request)
        return try JSONBody.response(try await store.codes.redeem(asked.code, accountId: account))
    }

    /// `POST /v1/redemptions`: credits spent on a product with a credit price.
    @Sendable func redeem(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitPurchase(request, context: context, accountId: account)
        let redemption = try await JSONBody.decode(RedemptionRequest.self, from: request)
        return try JSONBody.response(try await store.payments.redeem(redemption, accountId: account))
    }

    /// `GET /v1/transactions?after=CURSOR[&wait=SECONDS][&catalog=ETAG]`: a page of the account's
    /// change feed and the served catalog's ETag; with `wait`, held until something is after the
    /// cursor, the catalog is not `catalog` (it changed, on any instance), or that many seconds pass
    /// (at most ``longestWait``).
    @Sendable func transactions(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let after = request.uri.queryParameters.get("after")
        var wait: Duration?
        if let text = request.uri.queryParameters.get("wait") {
            guard let seconds = Int(text), seconds >= 0 else {
                throw StoreError.invalidRequest("wait must be a whole number of seconds, at most \(Self.longestWait)")
            }
            wait = .seconds(min(seconds, Self.longestWait))
        }
        let catalog = request.uri.queryParameters.get("catalog").map { String($0) }
        var page = try await store.accounts.transactions(accountId: account, after: after, wait: wait, catalog: catalog)
        page.store = storeTag
        // A device removed while its poll waited is told so when the poll ends (the removal wakes it).
        if wait != nil, let token = JSONBody.bearerToken(request), try await store.accounts.device(forToken: token)?.kind != .app {
            throw StoreError.signedOut
        }
        return try JSONBody.response(page)
    }

    /// The longest a change feed request is held, in seconds. A waiting device asks again once per
    /// wait, and each poll costs the server 100–200 µs of CPU, so 50,000 devices waiting 30 s kept
    /// a sixth of a core busy with nothing changing; at 300 s (deploy/nginx.conf's feed location
    /// waits 330 s) they cost about 2 % (docs/benchmarks.md section 8). The agent asks for 280 s.
    static let longestWait = 300

    /// `POST /v1/transactions/{id}/finish`: the client delivered it.
    @Sendable func finish(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let id = try context.parameters.require("id")
        return try JSONBody.response(try await store.payments.finish(transactionId: id, accountId: account))
    }
}
