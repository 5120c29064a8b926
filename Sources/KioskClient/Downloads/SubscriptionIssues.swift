import Foundation
import KioskCore

/// Queues the issues a subscription covers, as a newsstand does.
///
/// Which issues a period covers is ``SubscriptionCoverage``'s rule, the same one the store applies
/// when it checks the receipt.
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
            let coverage = SubscriptionCoverage(purchased: claims.purchased, expires: expires)
            let dates = issues.compactMap(\.publicationDate)
            for issue in issues where !queued.contains(issue.id) && !added.contains(issue.id) {
                guard let published = issue.publicationDate, coverage.covers(published, seriesIssueDates: dates),
                      let content = issue.content else { continue }
                if try database.enqueueDownload(productId: issue.id, content: content, receipt: receipt, transactionId: claims.transactionId) {
                    added.append(issue.id)
                }
            }
        }
        return added
    }

}
