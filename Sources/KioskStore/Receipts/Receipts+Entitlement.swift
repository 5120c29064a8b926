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
            let periods = purchased.filter { $0.kind == .subscription && products[$0.productId]?.series == series }
                .compactMap { period in period.purchaseDate.flatMap { bought in period.expiresDate.map { SubscriptionCoverage(purchased: bought, expires: $0) } } }
            var coverage = SeriesCoverage(periods: periods)
            // The grace windows are read only when no paid period covers the issue (the usual case
            // needs no second query).
            if !coverage.covers(published, seriesIssueDates: issueDates) {
                coverage.graceWindows = try await db.graceWindows(accountId: claims.accountId).filter { products[$0.productId]?.series == series }.map(\.window)
            }
            if coverage.covers(published, seriesIssueDates: issueDates) {
                return .granted
            }
            return .notOwned
        }
    }
}
