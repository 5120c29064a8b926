import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// `POST /v1/appstore/notifications`: where the App Store sends its Server Notifications V2
/// (`{"signedPayload": "<JWS>"}`), configured as the app's production or sandbox server URL.
///
/// The signed payload is the credential: it needs no token. A refused one is answered 401 with its
/// reason (the App Store retries, so a notification signed by a chain Kiosk cannot check yet is
/// not lost); a resent one is answered 200 without being applied again.
struct AppStoreRoutes: Sendable {
    let store: Store

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.post("v1/appstore/notifications", use: notification)
        return routes
    }

    private struct NotificationBody: Decodable {
        var signedPayload: String
    }

    @Sendable func notification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 20)
        guard let decoded = try? JSONDecoder().decode(NotificationBody.self, from: Data(buffer: body)) else {
            throw APIFailure(.badRequest, code: "bad_request", message: "the body must be {\"signedPayload\": \"<JWS>\"}, as App Store Server Notifications V2 send it")
        }
        do {
            return try JSONBody.response(try await store.appStore.receiveAppStoreNotification(signedPayload: decoded.signedPayload))
        } catch let refusal as ReceiptRefusal {
            throw refusal.apiFailure
        }
    }
}
