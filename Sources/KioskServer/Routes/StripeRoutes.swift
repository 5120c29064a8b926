import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// `POST /v1/stripe/webhook`: the web shop's payment service's signed events (Stripe's scheme),
/// configured as the endpoint of a Stripe webhook (`kiosk serve --stripe-webhook-secret`).
///
/// The `Stripe-Signature` header is checked against the body's exact bytes before the body is
/// read as JSON (``StripeSignature``): a bad or stale one is a 400 with its reason and grants
/// nothing. A verified event is answered 200 with what came of it (``StripeChannel``), including
/// one Kiosk could not match, which is kept for the operator: Stripe would otherwise send it
/// again for days.
struct StripeRoutes: Sendable {
    let store: Store
    let signature: StripeSignature?

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.post("v1/stripe/webhook", use: webhook)
        return routes
    }

    @Sendable func webhook(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let signature else {
            throw APIFailure(.notFound, code: "stripe_not_configured",
                             message: "this store takes no Stripe events; start kiosk serve with --stripe-webhook-secret")
        }
        let body = Data(buffer: try await JSONBody.body(of: request, upTo: 1 << 20))
        let header = HTTPField.Name("Stripe-Signature").flatMap { request.headers[$0] }
        do {
            try signature.verify(body: body, header: header, now: Date())
        } catch let refusal as StripeSignature.Refusal {
            throw APIFailure(.badRequest, code: "bad_signature", message: refusal.reason)
        }
        let event: StripeEvent
        do {
            event = try JSONDecoder().decode(StripeEvent.self, from: body)
        } catch {
            throw APIFailure(.badRequest, code: "bad_request", message: "the body is not a Stripe event (id, type, data.object)")
        }
        return try JSONBody.response(try await store.stripe.receive(event))
    }
}
