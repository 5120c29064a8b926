import Foundation
import HTTPTypes
import Hummingbird
import KioskCore

/// The routes of accounts, payments, transactions, receipts and the admin calls of the sandbox.
struct StoreController {
    let store: Store
    let signer: ReceiptSigner
    let adminToken: String

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get(".well-known/jwks.json") { _, _ in
            try JSONBody.response(signer.jwks)
        }
        router.post("v1/accounts") { _, _ in
            try JSONBody.response(try await store.createAccount(), status: .created)
        }
        router.get("v1/account") { request, _ in
            let account = try await store.account(bearer: JSONBody.bearerToken(request))
            return try JSONBody.response(try await store.summary(of: account.id))
        }
        router.post("v1/payments") { request, _ in
            let account = try await store.account(bearer: JSONBody.bearerToken(request))
            let payment = try await JSONBody.decode(PaymentRequest.self, from: request)
            return try JSONBody.response(try await store.pay(payment, account: account))
        }
        router.post("v1/redemptions") { request, _ in
            let account = try await store.account(bearer: JSONBody.bearerToken(request))
            let redemption = try await JSONBody.decode(RedemptionRequest.self, from: request)
            return try JSONBody.response(try await store.redeem(redemption, account: account))
        }
        router.get("v1/transactions") { request, _ in
            let account = try await store.account(bearer: JSONBody.bearerToken(request))
            let after = request.uri.queryParameters.get("after")
            return try JSONBody.response(try await store.transactions(account: account, after: after))
        }
        router.post("v1/transactions/:id/finish") { request, context in
            let account = try await store.account(bearer: JSONBody.bearerToken(request))
            let id = try context.parameters.require("id")
            return try JSONBody.response(try await store.finish(transactionId: id, account: account))
        }
        router.post("verifyReceipt") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            // A token is optional here; when present, another account's receipt is not honoured.
            let presenter = try? await store.account(bearer: JSONBody.bearerToken(request))
            return try JSONBody.response(await store.verifyReceipt(body: Data(buffer: body), presentedBy: presenter))
        }
        addAdminRoutes(to: router)
    }

    private func addAdminRoutes(to router: Router<BasicRequestContext>) {
        let admin = router.group("v1/admin")
        admin.post("transactions/:id/approve") { request, context in
            try requireAdmin(request)
            return try JSONBody.response(try await store.approve(transactionId: context.parameters.require("id")))
        }
        admin.post("transactions/:id/decline") { request, context in
            try requireAdmin(request)
            return try JSONBody.response(try await store.decline(transactionId: context.parameters.require("id")))
        }
        admin.post("transactions/:id/revoke") { request, context in
            try requireAdmin(request)
            let body = try await request.body.collect(upTo: 64 << 10)
            let reason = (try? JSONDecoder().decode(RevocationRequest.self, from: Data(buffer: body)))?.reason
            return try JSONBody.response(try await store.revoke(transactionId: context.parameters.require("id"), reason: reason))
        }
        admin.get("accounts/:id") { request, context in
            try requireAdmin(request)
            let id = try context.parameters.require("id")
            let summary = try await store.summary(of: id)
            let charges = try await store.charges(accountId: id).map {
                AdminAccountView.Charge(transactionId: $0.transactionId, amountCents: $0.amountCents, currency: $0.currency)
            }
            return try JSONBody.response(AdminAccountView(summary: summary, charges: charges))
        }
    }

    private func requireAdmin(_ request: Request) throws {
        guard JSONBody.bearerToken(request) == adminToken else {
            throw APIFailure.unauthorized("admin calls need Authorization: Bearer <the token in the server's data folder, admin-token>")
        }
    }
}

/// The optional body of `POST /v1/admin/transactions/{id}/revoke`.
struct RevocationRequest: Decodable {
    var reason: String?
}

/// `GET /v1/admin/accounts/{id}`: an account as the store's operator sees it, charges included.
public struct AdminAccountView: Codable, Sendable {
    public struct Charge: Codable, Sendable {
        public var transactionId: String
        public var amountCents: Int
        public var currency: String
    }

    public var summary: AccountSummary
    public var charges: [Charge]
}
