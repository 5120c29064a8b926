import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's offer codes (``OfferCodes``), under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminCodeRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.post("codes", use: create)
        routes.get("codes", use: list)
        routes.post("codes/:batch/revoke", use: revoke)
    }

    /// `POST /v1/admin/codes`: the codes made, this once (201).
    @Sendable func create(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let asked = try await JSONBody.decode(AdminCodesRequest.self, from: request)
        return try JSONBody.response(try await store.codes.create(asked), status: .created)
    }

    /// `GET /v1/admin/codes`: every batch, newest first, never the codes.
    @Sendable func list(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.codes.list())
    }

    /// `POST /v1/admin/codes/{batch}/revoke`: `{"batch", "withdrawn"}`.
    @Sendable func revoke(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let batch = try context.parameters.require("batch")
        let withdrawn = try await store.codes.revoke(batch: batch)
        struct Revoked: Encodable { var batch: String; var withdrawn: Int }
        return try JSONBody.response(Revoked(batch: batch, withdrawn: withdrawn))
    }
}
