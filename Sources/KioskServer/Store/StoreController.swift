import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import KioskCore

/// The routes of accounts, payments, transactions, receipts and the store's operator.
struct StoreController {
    let store: Store
    let keys: SigningKeys
    let adminToken: String
    let limits: RateLimitGate

    func addRoutes(to router: Router<KioskRequestContext>) {
        router.get(".well-known/jwks.json") { _, _ in
            try JSONBody.response(try await keys.jwks())
        }
        router.post("v1/accounts") { request, context in
            try await limits.admitAccountCreation(request, context: context)
            return try JSONBody.response(try await store.createAccount(), status: .created)
        }
        router.get("v1/account") { _, context in
            try JSONBody.response(try await store.summary(of: context.requireAccount()))
        }
        router.post("v1/payments") { request, context in
            let account = try context.requireAccount()
            try await limits.admitPurchase(request, context: context, accountId: account)
            let payment = try await JSONBody.decode(PaymentRequest.self, from: request)
            return try JSONBody.response(try await store.pay(payment, accountId: account))
        }
        router.post("v1/redemptions") { request, context in
            let account = try context.requireAccount()
            try await limits.admitPurchase(request, context: context, accountId: account)
            let redemption = try await JSONBody.decode(RedemptionRequest.self, from: request)
            return try JSONBody.response(try await store.redeem(redemption, accountId: account))
        }
        router.get("v1/transactions") { request, context in
            let account = try context.requireAccount()
            let after = request.uri.queryParameters.get("after")
            return try JSONBody.response(try await store.transactions(accountId: account, after: after))
        }
        router.post("v1/transactions/:id/finish") { _, context in
            let account = try context.requireAccount()
            let id = try context.parameters.require("id")
            return try JSONBody.response(try await store.finish(transactionId: id, accountId: account))
        }
        router.post("verifyReceipt") { request, context in
            let body = try await request.body.collect(upTo: 1 << 20)
            // A token is optional here; when present, another account's receipt is not honoured.
            return try JSONBody.response(await store.verifyReceipt(body: Data(buffer: body), presentedBy: context.accountId))
        }
        addAdminRoutes(to: router)
    }

    private func addAdminRoutes(to router: Router<KioskRequestContext>) {
        let admin = router.group("v1/admin")
        admin.get("accounts") { request, _ in
            try requireAdmin(request)
            return try JSONBody.response(try await store.accounts())
        }
        admin.get("accounts/:id") { request, context in
            try requireAdmin(request)
            return try JSONBody.response(try await store.adminAccount(context.parameters.require("id")))
        }
        admin.get("pending") { request, _ in
            try requireAdmin(request)
            return try JSONBody.response(try await store.pendingRequests())
        }
        admin.get("sales") { request, _ in
            try requireAdmin(request)
            return try JSONBody.response(try await store.sales())
        }
        admin.get("downloads") { request, _ in
            try requireAdmin(request)
            return try JSONBody.response(try await store.downloadStats())
        }
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
            let reason = try await Self.reason(request)
            return try JSONBody.response(try await store.revoke(transactionId: context.parameters.require("id"), reason: reason))
        }
        admin.post("transactions/:id/refund") { request, context in
            try requireAdmin(request)
            let reason = try await Self.reason(request)
            return try JSONBody.response(try await store.revoke(transactionId: context.parameters.require("id"), reason: reason, refund: true))
        }
    }

    /// The reason of a revocation's body; an empty body is no reason (the store writes its own),
    /// a body that is not `{"reason": "…"}` is a 400 naming what is wrong with it.
    static func reason(_ request: Request) async throws -> String? {
        let body = try await request.body.collect(upTo: 64 << 10)
        guard body.readableBytes > 0 else { return nil }
        return try JSONBody.decode(RevocationRequest.self, from: Data(buffer: body)).reason
    }

    /// The admin token is compared in constant time: a comparison that stops at the first wrong
    /// byte would tell an attacker, by its timing, how much of a guess was right.
    private func requireAdmin(_ request: Request) throws {
        let presented = SHA256.hash(data: Data((JSONBody.bearerToken(request) ?? "").utf8))
        let expected = SHA256.hash(data: Data(adminToken.utf8))
        var difference: UInt8 = 0
        for (a, b) in zip(presented, expected) { difference |= a ^ b }
        guard difference == 0 else {
            throw APIFailure.unauthorized("admin calls need Authorization: Bearer <the token in the server's data folder, admin-token>")
        }
    }
}

/// The optional body of `POST /v1/admin/transactions/{id}/revoke` and `/refund`.
struct RevocationRequest: Decodable {
    var reason: String?
}

/// `GET /v1/admin/accounts/{id}`: an account as the store's operator sees it.
public struct AdminAccountView: Codable, Sendable {
    public struct Charge: Codable, Sendable {
        public var transactionId: String
        /// `charge` or `refund` (negative).
        public var kind: String
        public var amountCents: Int
        public var currency: String
        public var reason: String?
    }

    public var summary: AccountSummary
    /// The ledger: charges and refunds; it sums to what was really paid.
    public var charges: [Charge]
    public var transactions: [AdminTransactionRow]
}
