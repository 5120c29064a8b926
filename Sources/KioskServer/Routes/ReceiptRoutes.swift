import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The routes anyone checking a receipt uses: the store's public keys and `verifyReceipt`.
struct ReceiptRoutes: Sendable {
    let store: Store
    let keys: SigningKeys

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get(".well-known/jwks.json", use: jwks)
        routes.post("verifyReceipt", use: verifyReceipt)
        return routes
    }

    /// `GET /.well-known/jwks.json`: every key a valid receipt may be signed with.
    @Sendable func jwks(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try JSONBody.response(try await keys.jwks())
    }

    /// `POST /verifyReceipt`, in the App Store's shape. A token is optional here; when present,
    /// another account's receipt is not honoured.
    @Sendable func verifyReceipt(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 20)
        return try JSONBody.response(await store.receipts.verifyReceipt(body: Data(buffer: body), presentedBy: try context.presentedAccount()))
    }
}
