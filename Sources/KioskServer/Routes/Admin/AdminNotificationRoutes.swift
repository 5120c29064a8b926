import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for the publisher's endpoints and the notifications sent to them, under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminNotificationRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.get("webhooks", use: webhooks)
        routes.post("webhooks", use: addWebhook)
        routes.delete("webhooks", use: removeWebhook)
        routes.get("notifications", use: notifications)
        routes.post("notifications/test", use: testNotification)
        routes.post("notifications/:id/resend", use: resendNotification)
    }

    /// `GET /v1/admin/webhooks`: ``AdminWebhookRow`` per endpoint.
    @Sendable func webhooks(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.notifications.webhooks())
    }

    /// `POST /v1/admin/webhooks`, body ``AdminWebhookRequest``.
    @Sendable func addWebhook(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await JSONBody.decode(AdminWebhookRequest.self, from: request)
        return try JSONBody.response(try await store.notifications.addWebhook(body.url), status: .created)
    }

    /// `DELETE /v1/admin/webhooks`, body ``AdminWebhookRequest``.
    @Sendable func removeWebhook(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await JSONBody.decode(AdminWebhookRequest.self, from: request)
        return try JSONBody.response(try await store.notifications.removeWebhook(body.url))
    }

    /// `GET /v1/admin/notifications[?failed=true]`: ``AdminNotificationRow`` per notification and endpoint.
    @Sendable func notifications(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let failed = request.uri.queryParameters.get("failed").map { $0 == "true" || $0 == "1" } ?? false
        return try JSONBody.response(try await store.notifications.list(failed: failed))
    }

    /// `POST /v1/admin/notifications/test`: a `TEST` notification to every endpoint; `{"notificationUUID": "…"}`.
    @Sendable func testNotification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(["notificationUUID": try await store.notifications.testNotification()])
    }

    /// `POST /v1/admin/notifications/{uuid}/resend`: ``AdminNotificationRow`` per endpoint.
    @Sendable func resendNotification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.notifications.resendNotification(context.parameters.require("id")))
    }
}
