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
        return try await entitlement(verified.claims, receipt: verified.receipt, for: product)
    }

    /// Checks that the receipt's transaction stands and that its account owns `product`, directly or
    /// through a subscription to the product's series.
    ///
    /// Which issues a subscription period entitles is ``SubscriptionCoverage``'s rule, the same
    /// one the client applies when it queues them.
    ///
    /// An authentic receipt for a transaction the database does not hold (a restore lost it) is
    /// written again from its claims first (``Reinstatements``), never taken for a revocation.
    public func entitlement(_ claims: ReceiptClaims, receipt: String? = nil, for product: Product) async throws -> Entitlement {
        if let standing = try await standingEntitlement(claims, for: product) { return standing }
        guard let receipt, try await Reinstatements(base: base).reinstate(claims, receipt: receipt) else { return .revoked }
        return try await standingEntitlement(claims, for: product) ?? .revoked
    }

    /// The entitlement of a receipt whose transaction the database holds; nil when it holds none.
    private func standingEntitlement(_ claims: ReceiptClaims, for product: Product) async throws -> Entitlement? {
        let products = try await catalog.storeProducts().products
        return try await database.read { db in
            guard let presented = try await TransactionRows(db).find(claims.transactionId) else { return nil }
            guard presented.accountId == claims.accountId, presented.status == .purchased else { return .revoked }
            var holdings = try await Holdings(accountId: claims.accountId, db)
            return try await holdings.owns(product, products: products, db) ? .granted : .notOwned
        }
    }

    /// Whether account `accountId` owns `product` now, by a standing purchase or a subscription
    /// period (or grace window) that covers the issue: what a signed-in reader may download
    /// without presenting a receipt (the OPDS shelf and its acquisition links).
    public func accountOwns(_ accountId: String, _ product: Product) async throws -> Bool {
        try await ownedProducts(accountId, among: [product]).contains(product.id)
    }

    /// The products account `accountId` owns now among `candidates`: its standing purchases, and
    /// the issues its subscriptions cover, in one read.
    public func ownedProducts(_ accountId: String, among candidates: [Product]) async throws -> Set<String> {
        let products = try await catalog.storeProducts().products
        return try await database.read { db in
            var holdings = try await Holdings(accountId: accountId, db)
            holdings.graceWindows = try await GraceWindowRow.list(accountId: accountId, in: db)
            // Only what it bought, and issues of the series it subscribed to, can be owned.
            let bought = Set(holdings.purchased.map(\.productId))
            let series = Set((bought.compactMap { products[$0] } + (holdings.graceWindows ?? []).compactMap { products[$0.productId] })
                .filter { $0.kind == .subscription }.compactMap(\.series))
            var owned = Set<String>()
            for product in candidates where bought.contains(product.id) || product.series.map(series.contains) == true {
                guard try await holdings.owns(product, products: products, db) else { continue }
                owned.insert(product.id)
            }
            return owned
        }
    }

    /// An account's standing transactions, and its grace windows once a question needs them.
    private struct Holdings {
        let accountId: String
        let purchased: [TransactionRecord]
        var graceWindows: [GraceWindowRow]?

        init(accountId: String, _ db: any SQLDatabase) async throws {
            self.accountId = accountId
            purchased = try await TransactionRows(db).list {
                $0.where("accountId", .equal, accountId).where("status", .equal, TransactionStatus.purchased.rawValue)
            }
        }

        /// Bought outright, or an issue a subscription period (or grace window) of its series covers,
        /// by ``SubscriptionCoverage``'s rule, the same one the client applies when it queues them.
        mutating func owns(_ product: Product, products: [String: Product], _ db: any SQLDatabase) async throws -> Bool {
            if purchased.contains(where: { $0.productId == product.id && $0.kind == .nonConsumable }) {
                return true
            }
            guard let series = product.series, let published = product.publicationDate else { return false }
            let issueDates = products.values.filter { $0.series == series && $0.kind == .nonConsumable }.compactMap(\.publicationDate)
            let periods = purchased.filter { $0.kind == .subscription && products[$0.productId]?.series == series }
                .compactMap { period in period.purchaseDate.flatMap { bought in period.expiresDate.map { SubscriptionCoverage(purchased: bought, expires: $0) } } }
            var coverage = SeriesCoverage(periods: periods)
            // The grace windows are read only when no paid period covers the issue (the usual case
            // needs no second query).
            if !coverage.covers(published, seriesIssueDates: issueDates) {
                if graceWindows == nil { graceWindows = try await GraceWindowRow.list(accountId: accountId, in: db) }
                coverage.graceWindows = (graceWindows ?? []).filter { products[$0.productId]?.series == series }.map(\.window)
            }
            return coverage.covers(published, seriesIssueDates: issueDates)
        }
    }
}
