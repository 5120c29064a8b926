import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The operator's routes for reports: sales, downloads and the App Store's notifications received, under `/v1/admin`, behind ``AdminMiddleware``.
struct AdminReportRoutes: Sendable {
    let store: Store

    /// Adds the routes to a collection that ``AdminRoutes`` put behind the admin middleware.
    func add(to routes: RouteCollection<KioskRequestContext>) {
        routes.get("sales", use: sales)
        routes.get("tax", use: tax)
        routes.get("downloads", use: downloads)
        routes.get("appstore/notifications", use: appStoreNotifications)
        routes.get("channel-events", use: channelEvents)
        routes.get("reinstatements", use: reinstatements)
    }

    /// `GET /v1/admin/reinstatements`: ``AdminReinstatementRow`` per receipt presented for a
    /// transaction a restore lost, newest first (what `kiosk admin lost` lists).
    @Sendable func reinstatements(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reinstatements.list())
    }

    /// `GET /v1/admin/sales`: ``AdminSalesRow`` per day, product and currency.
    @Sendable func sales(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.sales(try AdminRoutes.filter(request), byChannel: request.uri.queryParameters.get("by") == "channel"))
    }

    /// `GET /v1/admin/tax?quarter=2026Q4`: ``AdminTaxRow`` per country, rate and currency.
    @Sendable func tax(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let quarter = request.uri.queryParameters.get("quarter") else {
            throw StoreError.invalidRequest("give quarter, like ?quarter=2026Q4")
        }
        return try JSONBody.response(try await store.reports.tax(quarter: quarter))
    }

    /// `GET /v1/admin/downloads`: ``AdminDownloadRow`` per product and day.
    @Sendable func downloads(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.reports.downloadStats(try AdminRoutes.filter(request, states: false)))
    }

    /// `GET /v1/admin/appstore/notifications`: ``AdminAppStoreNotificationRow`` per notification, newest first.
    @Sendable func appStoreNotifications(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await store.appStore.appStoreNotifications())
    }

    /// `GET /v1/admin/channel-events[?unmatched=1]`: ``AdminChannelEventRow`` per event a payment
    /// channel sent, newest first; with `unmatched`, those the operator must look at.
    @Sendable func channelEvents(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let unmatched = request.uri.queryParameters.get("unmatched").map { $0 == "1" || $0 == "true" } ?? false
        return try JSONBody.response(try await store.reports.channelEvents(unmatchedOnly: unmatched))
    }
}
