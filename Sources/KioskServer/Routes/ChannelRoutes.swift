import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// The channels' routes a reader's device and Google call, beside Stripe's webhook
/// (``StripeRoutes``) and the App Store's notifications (``AppStoreRoutes``):
/// - `GET /v1/store`: the environment and the channels, so a client knows how to buy;
/// - `POST /v1/checkouts`: where the reader pays on the web shop (an account's);
/// - `POST /v1/play/purchases`: a Google Play purchase presented by the account it is for;
/// - `POST /v1/appstore/transactions`: an App Store transaction presented by its account;
/// - `POST /v1/play/notifications`: Play's Real-time developer notifications, pushed by Pub/Sub
///   with a Google-signed token, checked before the body is read.
struct ChannelRoutes: Sendable {
    let store: Store
    let limits: RateLimitGate
    let description: StoreDescription
    let playNotifications: PlayNotificationVerifier?

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("v1/store", use: storeDescription)
        routes.post("v1/checkouts", use: checkout)
        routes.post("v1/play/purchases", use: playPurchase)
        routes.post("v1/appstore/transactions", use: appStoreTransaction)
        routes.post("v1/play/notifications", use: playNotification)
        return routes
    }

    /// `GET /v1/store`, with its ``StoreDescription/entityTag``: a device that keeps this answer
    /// asks again only when a feed page names another tag, and then with `If-None-Match`.
    @Sendable func storeDescription(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let tag = description.entityTag
        var response: Response
        if let asked = request.headers[.ifNoneMatch], EntityTag.ifNoneMatch(asked, matchesAnyOf: [tag]) {
            response = Response(status: .notModified)
        } else {
            response = try JSONBody.response(description)
        }
        response.headers[.eTag] = tag
        response.headers[.cacheControl] = "public, max-age=60"
        return response
    }

    /// `POST /v1/checkouts` ``CheckoutRequest``: 201 ``Checkout``.
    @Sendable func checkout(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitPurchase(request, context: context, accountId: account)
        let asked = try await JSONBody.decode(CheckoutRequest.self, from: request)
        return try JSONBody.response(try await store.stripe.startCheckout(asked, accountId: account, origin: RequestOrigin.base(of: request)), status: .created)
    }

    /// `POST /v1/play/purchases` ``PlayPurchaseProof``: ``ChannelPurchaseAnswer``, 200 granted or 202 pending.
    @Sendable func playPurchase(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitPurchase(request, context: context, accountId: account)
        let proof = try await JSONBody.decode(PlayPurchaseProof.self, from: request)
        let answer = try await store.play.claim(proof, accountId: account)
        return try JSONBody.response(answer, status: answer.state == "pending" ? .accepted : .ok)
    }

    /// `POST /v1/appstore/transactions` ``AppStoreTransactionProof``: ``ChannelPurchaseAnswer``.
    @Sendable func appStoreTransaction(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitPurchase(request, context: context, accountId: account)
        let proof = try await JSONBody.decode(AppStoreTransactionProof.self, from: request)
        do {
            return try JSONBody.response(try await store.appStore.claim(proof, accountId: account))
        } catch let refusal as ReceiptRefusal {
            throw refusal.apiFailure
        }
    }

    /// `POST /v1/play/notifications`: the Pub/Sub push's token first, then the message. A refused
    /// token is a 401 (Pub/Sub retries); a verified message is answered 200 with what came of it.
    @Sendable func playNotification(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let playNotifications else {
            throw APIFailure(.notFound, code: "play_not_configured",
                             message: "this store takes no Play notifications; start kiosk serve with --play-notification-jwks and --play-notification-audience")
        }
        do {
            _ = try await playNotifications.verify(authorization: request.headers[.authorization], now: Date())
        } catch let refusal as PlayNotificationVerifier.Refusal {
            throw APIFailure(.unauthorized, code: refusal.code, message: refusal.reason)
        }
        let body = try await JSONBody.body(of: request, upTo: 1 << 18)
        let push: PlayPushMessage
        do {
            push = try JSONDecoder().decode(PlayPushMessage.self, from: Data(buffer: body))
        } catch {
            throw APIFailure(.badRequest, code: "bad_request", message: "the body is not a Pub/Sub push message ({\"message\": {\"data\", \"messageId\"}, \"subscription\"})")
        }
        return try JSONBody.response(try await store.play.receive(push))
    }
}
