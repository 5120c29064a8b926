import Foundation
import SQLKit
import KioskCore

extension Receipts {
    /// Whether a receipt's account may download a product.
    public enum Entitlement: Equatable, Sendable {
        case granted
        /// The receipt's own transaction was revoked (refunded) or is not known to this store.
        case revoked
        /// Withdrawn for the reason given (an App Store refund or revocation).
        case withdrawn(String)
        case notOwned
    }

    /// Whether a verified proof entitles `product`, by the record its kind of proof stands in:
    /// Kiosk's own transactions, or the App Store transactions this store has seen.
    public func entitlement(_ verified: VerifiedPurchase, for product: Product) async throws -> Entitlement {
        if verified.kind == .appStore {
            return try await AppStoreBridge(base: base).appStoreEntitlement(verified, for: product)
        }
        return try await entitlement(verified.claims, for: product)
    }

    /// Checks that the receipt's transaction stands and that its account owns `product`, directly or
    /// through a subscription to the product's series.
    ///
    /// Which issues a subscription period entitles is ``SubscriptionCoverage``'s rule, the same
    /// one the client applies when it queues them.
    public func entitlement(_ claims: ReceiptClaims, for product: Product) async throws -> Entitlement {
        let products = try await catalog.storeProducts().products
        return try await database.read { db in
            guard let presented = try await db.storeTransaction(claims.transactionId),
                  presented.accountId == claims.accountId, presented.status == .purchased
            else {
                return .revoked
            }
            let purchased = try await db.transactions {
                $0.where("accountId", .equal, claims.accountId).where("status", .equal, TransactionStatus.purchased.rawValue)
            }
            if purchased.contains(where: { $0.productId == product.id && $0.kind == .nonConsumable }) {
                return .granted
            }
            guard let series = product.series, let published = product.publicationDate else { return .notOwned }
            let issueDates = products.values.filter { $0.series == series && $0.kind == .nonConsumable }.compactMap(\.publicationDate)
            for subscription in purchased where subscription.kind == .subscription && products[subscription.productId]?.series == series {
                guard let bought = subscription.purchaseDate, let expires = subscription.expiresDate else { continue }
                if SubscriptionCoverage(purchased: bought, expires: expires).covers(published, seriesIssueDates: issueDates) {
                    return .granted
                }
            }
            // A billing grace period entitles what was published during it, as a paid period
            // does, by the same rule: the window from the unpaid period's end to grace's end
            // (or to the recovery or expiry that closed it).
            let graces = try await db.raw(#"""
                SELECT g."startsAt", g."endsAt", s."productId" FROM "subscriptionGrace" g
                JOIN "subscription" s ON s."originalTransactionId" = g."originalTransactionId"
                WHERE g."accountId" = \#(bind: claims.accountId)
                """#).all()
            for grace in graces where products[try grace.decode(column: "productId", as: String.self)]?.series == series {
                let window = SubscriptionCoverage(purchased: try grace.decode(column: "startsAt", as: Date.self), expires: try grace.decode(column: "endsAt", as: Date.self))
                if window.covers(published, seriesIssueDates: issueDates) { return .granted }
            }
            return .notOwned
        }
    }
}
