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
    }

    /// `GET /v1/admin/accounts`: ``AdminAccountRow`` per account.
    /// `GET /v1/admin/accounts?since=&product=&state=`: ``AdminAccountRow`` per account created since,
    /// holding a transaction of that product in that state.
    @Sendable func accounts(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.accounts(try AdminRoutes.filter(request)))
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
