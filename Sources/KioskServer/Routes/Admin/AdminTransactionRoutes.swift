import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for transactions: the lists and the decisions on one (Ask to Buy, revocation, refund), under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminTransactionRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.get("transactions", use: transactions)
        routes.get("pending", use: pending)
        routes.post("transactions/:id/approve", use: approve)
        routes.post("transactions/:id/decline", use: decline)
        routes.post("transactions/:id/revoke", use: revoke)
        routes.post("transactions/:id/refund", use: refund)
    }

    /// `GET /v1/admin/transactions?since=&product=&state=`: every ``AdminTransactionRow``, oldest first.
    @Sendable func transactions(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.adminTransactions(try AdminRoutes.filter(request)))
    }

    /// `GET /v1/admin/pending`: Ask to Buy requests waiting, as ``AdminTransactionRow``.
    @Sendable func pending(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.pendingRequests(try AdminRoutes.filter(request, states: false)))
    }

    /// `POST /v1/admin/transactions/{id}/approve`: the Ask to Buy is charged and signed.
    @Sendable func approve(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.payments.approve(transactionId: context.parameters.require("id")))
    }

    /// `POST /v1/admin/transactions/{id}/decline`: nothing is charged.
    @Sendable func decline(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.payments.decline(transactionId: context.parameters.require("id")))
    }

    /// `POST /v1/admin/transactions/{id}/revoke`, body `{"reason": "…"}` or none.
    @Sendable func revoke(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await AdminRoutes.reason(request)
        return try JSONBody.response(try await store.payments.revoke(transactionId: context.parameters.require("id"), reason: reason))
    }

    /// `POST /v1/admin/transactions/{id}/refund`, body `{"reason": "…"}` or none.
    @Sendable func refund(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await AdminRoutes.reason(request)
        return try JSONBody.response(try await store.payments.revoke(transactionId: context.parameters.require("id"), reason: reason, refund: true))
    }
}
