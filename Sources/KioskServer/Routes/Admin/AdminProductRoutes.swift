import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for products taken off sale: who owns one, and removing it, under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminProductRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.get("products/:id/owners", use: productOwners)
        routes.delete("products/:id", use: removeProduct)
    }

    /// `GET /v1/admin/products/{id}/owners`: `{"productId", "owners"}`, the accounts that own it.
    @Sendable func productOwners(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try AdminRoutes.pathID(context)
        return try JSONBody.response(AdminProductOwners(productId: id, owners: try await store.reports.owners(of: id)))
    }

    /// `DELETE /v1/admin/products/{id}[?force=true]`: removes a withdrawn product on purpose;
    /// refused while accounts own it unless forced. `{"productId", "owners", "removed": true}`.
    @Sendable func removeProduct(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try AdminRoutes.pathID(context)
        let force = request.uri.queryParameters.get("force").map { $0 == "true" || $0 == "1" } ?? false
        let owners = try await store.reports.removeWithdrawn(id, force: force)
        return try JSONBody.response(AdminProductOwners(productId: id, owners: owners, removed: true))
    }
}
