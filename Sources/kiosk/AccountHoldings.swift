import Foundation
import KioskClient
import KioskCore

/// What this device knows the account holds, from its own database (offline): books and issues
/// with a standing purchase or installed in the library (a subscription's issues), and each
/// subscription's end, from its latest verified receipt.
struct AccountHoldings {
    /// Books and issues owned.
    private(set) var owned: Set<String> = []
    /// Each subscription's latest end.
    private(set) var subscriptions: [String: Date] = [:]

    /// The transactions whose receipts verify, and the library's entries.
    /// - Parameter removed: products whose files the newsstand or the reader removed: still owned.
    init(transactions: [TransactionView], library: [LibraryEntry], removed: [String] = []) {
        let standing: Set<PaymentState> = [.purchased, .delivering, .finished, .restored]
        for view in transactions where standing.contains(view.record.state) {
            guard let claims = view.claims else { continue }
            switch view.record.kind {
            case .subscription:
                if let end = claims.expires, end > (subscriptions[claims.productId] ?? .distantPast) {
                    subscriptions[claims.productId] = end
                }
            case .nonConsumable:
                owned.insert(claims.productId)
            case .consumable:
                break
            }
        }
        for entry in library { owned.insert(entry.item.productId) }
        owned.formUnion(removed)
    }

    /// Reads the client's transactions and library.
    static func load(_ client: KioskClient) async throws -> AccountHoldings {
        AccountHoldings(transactions: try await client.transactions(), library: try client.libraryEntries(),
                        removed: try client.downloads().filter { $0.state == .removed }.map(\.productId))
    }

    /// `owned`, `subscribed until 2026-12-24 13:05`, `expired 2026-…`, or nil for what is not held.
    func mark(_ productId: String, now: Date = Date()) -> String? {
        if let end = subscriptions[productId] {
            return end > now ? "subscribed until \(ListFilter.shown(end))" : "expired \(ListFilter.shown(end))"
        }
        return owned.contains(productId) ? "owned" : nil
    }

    /// One entry per held product for `kiosk products --json`, in product order.
    var rows: [HeldProduct] {
        let books = owned.map { HeldProduct(productId: $0, expiresAt: nil) }
        let subscribed = subscriptions.map { HeldProduct(productId: $0.key, expiresAt: $0.value) }
        return (books + subscribed).sorted { $0.productId < $1.productId }
    }
}

/// A product the account holds, as `kiosk products --json` lists it under `owned`.
struct HeldProduct: Encodable {
    var productId: String
    /// A subscription's end (past for an expired one); nil for a book or an issue.
    var expiresAt: Date?
}
