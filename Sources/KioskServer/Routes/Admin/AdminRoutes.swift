import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The store operator's routes, under `/v1/admin`: one collection per concept (accounts,
/// transactions, reports, products, subscriptions, notifications), each behind
/// ``AdminMiddleware``, added to the collection before any route: no handler checks the admin
/// token itself. The answers are the rows of `KioskCore/API/AdminRows.swift`, which `kiosk admin`
/// decodes. What the collections share (the list filter, a product ID in the path, a
/// revocation's reason) is here.
enum AdminRoutes {
    /// Every admin collection, each relative to `/v1/admin`.
    static func collections(store: Store, adminToken: String) -> [RouteCollection<KioskRequestContext>] {
        let concepts: [@Sendable (RouteCollection<KioskRequestContext>) -> Void] = [
            AdminAccountRoutes(store: store).add, AdminTransactionRoutes(store: store).add, AdminReportRoutes(store: store).add,
            AdminProductRoutes(store: store).add, AdminSubscriptionRoutes(store: store).add, AdminCodeRoutes(store: store).add, AdminNotificationRoutes(store: store).add,
        ]
        return concepts.map { add in
            let routes = RouteCollection(context: KioskRequestContext.self)
            routes.add(middleware: AdminMiddleware(token: adminToken))
            add(routes)
            return routes
        }
    }

    /// The `{id}` of a product route, percent-decoded (`kiosk admin` encodes every dot of a product
    /// ID, so that none is read as a dot segment of the path) and checked as every identifier a
    /// caller sends is. (Transaction and account IDs have no dots: their routes take them as sent.)
    static func pathID(_ context: KioskRequestContext) throws -> String {
        let raw = try context.parameters.require("id")
        let id = raw.removingPercentEncoding ?? raw
        try RequestText.check(id, field: "the ID in the path")
        return id
    }

    /// The list filter of a request's query (`since`, `product`, `state`); a value that cannot be
    /// read, or a state on a list that has none, is a 400 naming it.
    static func filter(_ request: Request, states: Bool = true) throws -> ListFilter {
        let query = request.uri.queryParameters
        var filter = ListFilter()
        if let since = query.get("since") {
            do {
                filter.since = try ListFilter.date(since)
            } catch {
                throw APIFailure.badRequest(error.description)
            }
        }
        if let product = query.get("product") {
            try RequestText.check(product, field: "the product filter")
            filter.productId = product
        }
        if let state = query.get("state") {
            guard states else {
                throw APIFailure.badRequest("\(request.uri.path) takes no state filter; it lists one kind of row")
            }
            guard TransactionStatus(rawValue: state) != nil else {
                throw APIFailure.badRequest("state \"\(state)\" is not a transaction state: purchased, deferred, declined, cancelled or revoked")
            }
            filter.state = state
        }
        return filter
    }

    /// The reason of a revocation's body; an empty body is no reason (the store writes its own),
    /// a body that is not `{"reason": "…"}` is a 400 naming what is wrong with it.
    static func reason(_ request: Request) async throws -> String? {
        let body = try await request.body.collect(upTo: 64 << 10)
        guard body.readableBytes > 0 else { return nil }
        return try JSONBody.decode(RevocationRequest.self, from: Data(buffer: body)).reason
    }
}

/// The optional body of `POST /v1/admin/transactions/{id}/revoke` and `/refund`.
struct RevocationRequest: Decodable {
    var reason: String?
}
