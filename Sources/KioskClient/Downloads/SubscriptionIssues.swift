import Foundation
import KioskCore

/// Queues the issues a subscription covers, as a newsstand does.
///
/// A subscription period covers the issue of its series that was current when it was bought and
/// every issue published before it expires; the server applies the same rule when it checks the
/// receipt. An expired period still covers what was published while it ran.
struct SubscriptionIssues {
    let database: ClientDatabase

    /// Queues every covered issue that has no download yet; returns their IDs.
    /// - Parameter requeueStopped: also queue covered issues whose download was cancelled or
    ///   failed for good (what `kiosk restore` asks for); otherwise an issue with any download is left alone.
    func queueCoveredIssues(requeueStopped: Bool = false) async throws -> [String] {
        let subscriptions = try database.payments().filter {
            $0.kind == .subscription && PaymentState.owning.contains($0.state) && $0.receipt != nil
        }
        // Without a subscription there is nothing to queue: skip reading the catalog.
        guard !subscriptions.isEmpty else { return [] }
        let queued = Set(try database.downloads().filter { !requeueStopped || ($0.state != .cancelled && $0.state != .failed) }.map(\.productId))
        let accountId = try database.account()?.id
        var covering: [(receipt: String, claims: ReceiptClaims, expires: Date, series: String)] = []
        for subscription in subscriptions.reversed() {
            guard let receipt = subscription.receipt,
                  let claims = try? await ReceiptCheck(database: database).verify(receipt, accountId: accountId, fetchKeys: nil),
                  let expires = claims.expires,
                  let series = try database.cachedProduct(claims.productId)?.series
            else { continue }
            covering.append((receipt, claims, expires, series))
        }
        // The issues of the subscribed series only, read a product at a time: a catalog of
        // 100,000 products is not held to find a few dozen issues.
        let subscribed = Set(covering.map(\.series))
        var issuesOf: [String: [Product]] = [:]
        try database.forEachCachedProduct { product in
            guard let series = product.series, subscribed.contains(series), product.kind == .nonConsumable, product.publicationDate != nil else { return }
            issuesOf[series, default: []].append(product)
        }
        var added: [String] = []
        for (receipt, claims, expires, series) in covering {
            let issues = issuesOf[series] ?? []
            let boughtDay = Self.day(claims.purchased)
            let current = issues.compactMap(\.publicationDate).filter { $0 <= boughtDay }.max() ?? boughtDay
            for issue in issues where !queued.contains(issue.id) && !added.contains(issue.id) {
                guard let published = issue.publicationDate, published >= current, published <= Self.day(expires),
                      let content = issue.content else { continue }
                if try database.enqueueDownload(productId: issue.id, content: content, receipt: receipt, transactionId: claims.transactionId) {
                    added.append(issue.id)
                }
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
