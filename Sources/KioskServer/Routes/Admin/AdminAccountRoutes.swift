import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for accounts and their sandbox settings, under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminAccountRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.get("accounts", use: accounts)
        routes.get("accounts/:id", use: account)
        routes.post("accounts/:id/sandbox", use: sandbox)
        routes.post("accounts/:id/disable", use: disable)
        routes.post("accounts/:id/enable", use: enable)
        routes.post("accounts/:id/reset-code", use: resetCode)
        routes.post("accounts/:id/grant", use: grant)
    }

    /// `POST /v1/admin/accounts/{id}/grant` ``AdminGrantRequest``: the product granted by hand,
    /// audited; answers the ``StoreTransaction`` with its receipt.
    @Sendable func grant(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 16)
        let grant = try JSONBody.decode(AdminGrantRequest.self, from: Data(buffer: body))
        return try JSONBody.response(try await store.payments.grantByOperator(grant, accountId: context.parameters.require("id")))
    }

    /// `POST /v1/admin/accounts/{id}/disable` {reason?}: every device signed out, no sign-in until
    /// enabled; the ``AccountAuditEntry`` written.
    @Sendable func disable(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await Self.reason(request)
        return try JSONBody.response(try await store.accounts.disable(context.parameters.require("id"), reason: reason))
    }

    /// `POST /v1/admin/accounts/{id}/enable` {reason?}.
    @Sendable func enable(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await Self.reason(request)
        return try JSONBody.response(try await store.accounts.enable(context.parameters.require("id"), reason: reason))
    }

    /// `POST /v1/admin/accounts/{id}/reset-code`: ``ResetCodeIssued``, the code shown this once.
    @Sendable func resetCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.accounts.issueResetCode(context.parameters.require("id")))
    }

    struct Reason: Decodable { var reason: String? }

    static func reason(_ request: Request) async throws -> String {
        let body = try await request.body.collect(upTo: 1 << 16)
        guard body.readableBytes > 0 else { return "" }
        return try JSONBody.decode(Reason.self, from: Data(buffer: body)).reason ?? ""
    }

    /// `GET /v1/admin/accounts`: ``AdminAccountRow`` per account.
    /// `GET /v1/admin/accounts?since=&product=&state=`: ``AdminAccountRow`` per account created since,
    /// holding a transaction of that product in that state.
    /// `GET /v1/admin/accounts?email=`: the account that signs in with that email (none or one).
    @Sendable func accounts(_ request: Request, context: KioskRequestContext) async throws -> Response {
        if let email = request.uri.queryParameters.get("email") {
            guard let id = try await store.accounts.account(email: String(email)) else { return try JSONBody.response([AdminAccountRow]()) }
            return try JSONBody.response(try await store.reports.accounts(try AdminRoutes.filter(request)).filter { $0.accountId == id })
        }
        return try JSONBody.response(try await store.reports.accounts(try AdminRoutes.filter(request)))
    }

    /// `GET /v1/admin/accounts/{id}`: ``AdminAccountView``.
    @Sendable func account(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.adminAccount(context.parameters.require("id")))
    }

    /// `POST /v1/admin/accounts/{id}/sandbox`, body ``SandboxAccountSettings``: ``SandboxAccountState``.
    @Sendable func sandbox(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let settings = try await JSONBody.decode(SandboxAccountSettings.self, from: request)
        return try JSONBody.response(try await store.subscriptions.setSandbox(accountId: context.parameters.require("id"), settings))
    }
}
