import Foundation
import GRDB
import KioskCore

/// Queues the issues an active subscription covers, as a newsstand does.
///
/// A subscription covers the issue of its series that was current when it was bought and every
/// issue published before it expires; the server applies the same rule when it checks the receipt.
struct SubscriptionIssues {
    let database: ClientDatabase
    let downloads: DownloadQueue

    /// Queues every covered issue that has no download yet; returns their IDs.
    func queueCoveredIssues(now: Date = Date()) async throws -> [String] {
        let (subscriptions, products, queued, accountId) = try await database.pool.read { db in
            let subscriptions = try PaymentRecord
                .filter(Column("kind") == ProductKind.subscription.rawValue && Column("receipt") != nil)
                .fetchAll(db)
            // Without a subscription there is nothing to queue: skip decoding the whole catalog.
            guard !subscriptions.isEmpty else { return ([PaymentRecord](), [Product](), Set<String>(), String?.none) }
            let products = try CachedProduct.fetchAll(db).compactMap { try? JSONDecoder.kiosk.decode(Product.self, from: $0.json) }
            let queued = Set(try String.fetchAll(db, sql: "SELECT productId FROM download"))
            return (subscriptions, products, queued, try Setting.value(Setting.Key.accountID, in: db))
        }
        var added: [String] = []
        for subscription in subscriptions {
            guard let receipt = subscription.receipt,
                  let claims = try? await ReceiptCheck(database: database).verify(receipt, accountId: accountId, fetchKeys: nil),
                  let expires = claims.expires, expires > now,
                  let series = products.first(where: { $0.id == claims.productId })?.series
            else { continue }
            let issues = products.filter { $0.series == series && $0.kind == .nonConsumable && $0.publicationDate != nil }
            let boughtDay = Self.day(claims.purchased)
            let current = issues.compactMap(\.publicationDate).filter { $0 <= boughtDay }.max() ?? boughtDay
            for issue in issues where !queued.contains(issue.id) && !added.contains(issue.id) {
                guard let published = issue.publicationDate, published >= current, published <= Self.day(expires) else { continue }
                try await downloads.enqueue(issue, receipt: receipt)
                added.append(issue.id)
            }
        }
        return added
    }

    static func day(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
