import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for subscriptions: a renewal pass on demand (sandbox), under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminSubscriptionRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.post("renewals/run", use: runRenewals)
    }

    /// `POST /v1/admin/renewals/run`: one renewal pass now, as the worker makes every second; `{"steps": N}`.
    @Sendable func runRenewals(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard store.environment == .sandbox else { throw StoreError.sandboxOnly("a renewal pass on demand") }
        return try JSONBody.response(["steps": try await store.subscriptions.renewDue()])
    }
}
