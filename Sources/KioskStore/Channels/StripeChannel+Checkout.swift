import Foundation
import KioskCore
import SQLKit

/// The reader's side of the web channel: where to pay. `kiosk buy` asks for a checkout; the store
/// records a one-time purchase intent and answers the web shop's checkout URL with the product,
/// the account and the intent in it. The shop's Checkout Session carries them back in its event
/// (`client_reference_id`, `metadata.kiosk_product_id`, `metadata.kiosk_intent`), and the grant
/// reaches the reader's devices through the change feed.
struct CheckoutIntentRecord: Codable, Sendable {
    var id: String
    var accountId: String
    var productId: String
    var quantity: Int
    var createdAt: Date
    /// The Checkout Session that paid it; an intent is paid once.
    var session: String?
}

extension StripeChannel {
    /// The web shop's origin, where the reader is sent to pay; nil without `--checkout-url`.
    public var checkoutOrigin: String? { base.channels.checkout?.origin }

    /// A one-time purchase intent for `productId` and the URL where the reader pays it.
    /// - Throws: `web_not_configured` without `--checkout-url`; `unknown_product`, `off_sale`.
    public func startCheckout(_ request: CheckoutRequest, accountId: String) async throws -> Checkout {
        guard let template = base.channels.checkout else {
            throw StoreError.channelNotConfigured("web", flags: "--checkout-url (the web shop's checkout page)")
        }
        try RequestText.check(request.productId, field: "productId")
        let product = try await sellable(request.productId)
        if product.kind == .nonConsumable {
            // Paying again for a book the account has would take money for nothing.
            let owned = try await database.read { db in
                try await db.select().column("id").from("storeTransaction").where("accountId", .equal, accountId)
                    .where("productId", .equal, product.id).where("status", .equal, TransactionStatus.purchased.rawValue).first()
            }
            if owned != nil {
                throw StoreError(.wrongState, code: "already_owned", message: "the account owns \(product.id) already; nothing to pay (kiosk restore brings it back)")
            }
        }
        let quantity = request.quantity ?? 1
        guard (1...100).contains(quantity), quantity == 1 || product.kind == .consumable else {
            throw StoreError.invalidRequest("a quantity of \(quantity) of \(product.id) cannot be bought")
        }
        let intent = CheckoutIntentRecord(id: "ci_" + Store.randomHex(bytes: 16), accountId: accountId, productId: product.id,
                                          quantity: quantity, createdAt: clock.wallNow(), session: nil)
        try await database.write { db in try await db.insert(into: "checkoutIntent").model(intent).run() }
        return Checkout(intent: intent.id, productId: product.id, quantity: quantity,
                        url: template.url(product: product.id, account: accountId, intent: intent.id, quantity: quantity))
    }

    /// The products `accountId` started paying for on the web in the last day whose payment has
    /// not landed (no session has paid their intent), the newest first, each once: what the
    /// reader's library shows as waiting for the payment. An abandoned checkout stops showing a
    /// day later (a Checkout Session expires within one).
    public func waitingCheckouts(accountId: String) async throws -> [String] {
        struct Row: Decodable { var productId: String }
        let since = clock.wallNow().addingTimeInterval(-86_400)
        let rows = try await database.read { db in
            try await db.select().column("productId").from("checkoutIntent")
                .where("accountId", .equal, accountId).where("session", .is, SQLLiteral.null).where("createdAt", .greaterThanOrEqual, since)
                .orderBy("createdAt", .descending).all(decoding: Row.self)
        }
        var seen = Set<String>()
        return rows.map(\.productId).filter { seen.insert($0).inserted }
    }

    /// What a paid session's intent says, once it is this session's: the account and product it
    /// was made for, or why the session cannot be granted.
    func claimIntent(_ intentId: String, session: String, account: String?, product: String?) async throws -> Result<CheckoutIntentRecord, StoreError> {
        guard Self.isIdentifier(intentId) else { return .failure(.invalidRequest("metadata.kiosk_intent is not an intent Kiosk made")) }
        // Compare-and-set: the intent takes the first session that pays it, and only that one.
        let claimed = try await database.write { db in
            try await db.raw(#"""
                UPDATE "checkoutIntent" SET "session" = \#(bind: session)
                WHERE "id" = \#(bind: intentId) AND ("session" IS NULL OR "session" = \#(bind: session))
                RETURNING "id", "accountId", "productId", "quantity", "createdAt", "session"
                """#).first(decoding: CheckoutIntentRecord.self)
        }
        guard let intent = claimed else {
            let exists = try await database.read { db in
                try await db.select().column("session").from("checkoutIntent").where("id", .equal, intentId).first()
            }
            return .failure(.invalidRequest(exists == nil
                ? "metadata.kiosk_intent \(intentId) is no intent this store made"
                : "intent \(intentId) was already paid by another Checkout Session"))
        }
        if let account, account != intent.accountId {
            return .failure(.invalidRequest("client_reference_id \(account.prefix(100)) is not the account intent \(intentId) was made for"))
        }
        if let product, product != intent.productId {
            return .failure(.invalidRequest("metadata.kiosk_product_id \(product.prefix(100)) is not the product intent \(intentId) was made for"))
        }
        return .success(intent)
    }
}
