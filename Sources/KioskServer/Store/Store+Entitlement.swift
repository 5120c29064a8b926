import Foundation
import SQLKit
import KioskCore

extension Store {
    /// Whether a receipt's account may download a product.
    enum Entitlement: Equatable {
        case granted
        /// The receipt's own transaction was revoked (refunded) or is not known to this store.
        case revoked
        case notOwned
    }

    /// Checks that the receipt's transaction stands and that its account owns `product`, directly or
    /// through a subscription to the product's series.
    ///
    /// A subscription entitles the issue that was current when it was bought and every issue
    /// published before it expires.
    func entitlement(_ claims: ReceiptClaims, for product: Product) async throws -> Entitlement {
        let products = try await catalog.current.products
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
                let boughtDay = Self.day(bought)
                let current = issueDates.filter { $0 <= boughtDay }.max() ?? boughtDay
                if published >= current, published <= Self.day(expires) {
                    return .granted
                }
            }
            return .notOwned
        }
    }

    /// `yyyy-MM-dd` in UTC, comparable with catalog publication dates as text.
    static func day(_ date: Date) -> String {
        let components = Calendar.utc.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", components.year ?? 0, components.month ?? 0, components.day ?? 0)
    }
}
