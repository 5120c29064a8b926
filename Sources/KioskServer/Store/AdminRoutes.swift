import Foundation
import Hummingbird
import KioskCore

/// The store operator's routes, under `/v1/admin`: the reports and the decisions on transactions.
///
/// Every one of them is behind ``AdminMiddleware``, added once to the collection before any
/// route: no handler checks the admin token itself. The answers are the rows of
/// `KioskCore/API/AdminRows.swift`, which `kiosk admin` decodes.
struct AdminRoutes: Sendable {
    let store: Store
    let adminToken: String

    /// The routes, relative to `/v1/admin`.
    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.add(middleware: AdminMiddleware(token: adminToken))
        routes.get("accounts", use: accounts)
        routes.get("accounts/:id", use: account)
        routes.get("transactions", use: transactions)
        routes.get("pending", use: pending)
        routes.get("sales", use: sales)
        routes.get("downloads", use: downloads)
        routes.get("appstore/notifications", use: appStoreNotifications)
        routes.post("transactions/:id/approve", use: approve)
        routes.post("transactions/:id/decline", use: decline)
        routes.post("transactions/:id/revoke", use: revoke)
        routes.post("transactions/:id/refund", use: refund)
        routes.post("accounts/:id/sandbox", use: sandbox)
        routes.post("renewals/run", use: runRenewals)
        routes.get("products/:id/owners", use: productOwners)
        routes.delete("products/:id", use: removeProduct)
        routes.get("webhooks", use: webhooks)
        routes.post("webhooks", use: addWebhook)
        routes.delete("webhooks", use: removeWebhook)
        routes.get("notifications", use: notifications)
        routes.post("notifications/test", use: testNotification)
        routes.post("notifications/:id/resend", use: resendNotification)
        return routes
    }

    /// `POST /v1/admin/accounts/{id}/sandbox`, body ``SandboxAccountSettings``: ``SandboxAccountState``.
    @Sendable func sandbox(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let settings = try await JSONBody.decode(SandboxAccountSettings.self, from: request)
        return try JSONBody.response(try await store.setSandbox(accountId: context.parameters.require("id"), settings))
    }

    /// `GET /v1/admin/products/{id}/owners`: `{"productId", "owners"}`, the accounts that own it.
    @Sendable func productOwners(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try Self.pathID(context)
        return try JSONBody.response(AdminProductOwners(productId: id, owners: try await store.owners(of: id)))
    }

    /// `DELETE /v1/admin/products/{id}[?force=true]`: removes a withdrawn product on purpose;
    /// refused while accounts own it unless forced. `{"productId", "owners", "removed": true}`.
    @Sendable func removeProduct(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let id = try Self.pathID(context)
        let force = request.uri.queryParameters.get("force").map { $0 == "true" || $0 == "1" } ?? false
        let owners = try await store.removeWithdrawn(id, force: force)
        return try JSONBody.response(AdminProductOwners(productId: id, owners: owners, removed: true))
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

    /// `POST /v1/admin/renewals/run`: one renewal pass now, as the worker makes every second; `{"steps": N}`.
    @Sendable func runRenewals(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard store.environment == .sandbox else { throw StoreError.sandboxOnly("a renewal pass on demand") }
        return try JSONBody.response(["steps": try await store.renewDue()])
    }

    /// `GET /v1/admin/webhooks`: ``AdminWebhookRow`` per endpoint.
    @Sendable func webhooks(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.webhooks())
    }

    /// `POST /v1/admin/webhooks`, body ``AdminWebhookRequest``.
    @Sendable func addWebhook(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await JSONBody.decode(AdminWebhookRequest.self, from: request)
        return try JSONBody.response(try await store.addWebhook(body.url), status: .created)
    }

    /// `DELETE /v1/admin/webhooks`, body ``AdminWebhookRequest``.
    @Sendable func removeWebhook(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await JSONBody.decode(AdminWebhookRequest.self, from: request)
        return try JSONBody.response(try await store.removeWebhook(body.url))
    }

    /// `GET /v1/admin/notifications[?failed=true]`: ``AdminNotificationRow`` per notification and endpoint.
    @Sendable func notifications(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let failed = request.uri.queryParameters.get("failed").map { $0 == "true" || $0 == "1" } ?? false
        return try JSONBody.response(try await store.notifications(failed: failed))
    }

    /// `POST /v1/admin/notifications/test`: a `TEST` notification to every endpoint; `{"notificationUUID": "…"}`.
    @Sendable func testNotification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(["notificationUUID": try await store.testNotification()])
    }

    /// `POST /v1/admin/notifications/{uuid}/resend`: ``AdminNotificationRow`` per endpoint.
    @Sendable func resendNotification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.resendNotification(context.parameters.require("id")))
    }

    /// `GET /v1/admin/accounts`: ``AdminAccountRow`` per account.
    /// `GET /v1/admin/accounts?since=&product=&state=`: ``AdminAccountRow`` per account created since,
    /// holding a transaction of that product in that state.
    @Sendable func accounts(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.accounts(try Self.filter(request)))
    }

    /// `GET /v1/admin/transactions?since=&product=&state=`: every ``AdminTransactionRow``, oldest first.
    @Sendable func transactions(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.adminTransactions(try Self.filter(request)))
    }

    /// `GET /v1/admin/accounts/{id}`: ``AdminAccountView``.
    @Sendable func account(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.adminAccount(context.parameters.require("id")))
    }

    /// `GET /v1/admin/pending`: Ask to Buy requests waiting, as ``AdminTransactionRow``.
    @Sendable func pending(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.pendingRequests(try Self.filter(request, states: false)))
    }

    /// `GET /v1/admin/sales`: ``AdminSalesRow`` per day, product and currency.
    @Sendable func sales(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.sales(try Self.filter(request)))
    }

    /// `GET /v1/admin/downloads`: ``AdminDownloadRow`` per product and day.
    @Sendable func downloads(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.downloadStats(try Self.filter(request, states: false)))
    }

    /// `GET /v1/admin/appstore/notifications`: ``AdminAppStoreNotificationRow`` per notification, newest first.
    @Sendable func appStoreNotifications(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.appStoreNotifications())
    }

    /// `POST /v1/admin/transactions/{id}/approve`: the Ask to Buy is charged and signed.
    @Sendable func approve(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.approve(transactionId: context.parameters.require("id")))
    }

    /// `POST /v1/admin/transactions/{id}/decline`: nothing is charged.
    @Sendable func decline(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.decline(transactionId: context.parameters.require("id")))
    }

    /// `POST /v1/admin/transactions/{id}/revoke`, body `{"reason": "…"}` or none.
    @Sendable func revoke(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await Self.reason(request)
        return try JSONBody.response(try await store.revoke(transactionId: context.parameters.require("id"), reason: reason))
    }

    /// `POST /v1/admin/transactions/{id}/refund`, body `{"reason": "…"}` or none.
    @Sendable func refund(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reason = try await Self.reason(request)
        return try JSONBody.response(try await store.revoke(transactionId: context.parameters.require("id"), reason: reason, refund: true))
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
