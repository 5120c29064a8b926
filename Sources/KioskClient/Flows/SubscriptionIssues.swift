import Foundation
import KioskCore

/// Queues the issues a subscription covers, as a newsstand does.
///
/// Which issues a period covers is ``SubscriptionCoverage``'s rule, the same one the store applies
/// when it checks the receipt.
struct SubscriptionIssues {
    let database: ClientDatabase
    /// Where the covered issues are queued: the library's own rows are written by it alone.
    let library: Library
    /// Asked for the store's grace windows (``Purchases/graceWindows()``), only when an issue is
    /// left that no paid period covers.
    let purchases: Purchases

    /// Queues every covered issue that has no download yet; returns their IDs.
    /// - Parameter requeueStopped: also queue covered issues whose download was cancelled or
    ///   failed for good (what `kiosk restore` asks for); otherwise an issue with any download is left alone.
    func queueCoveredIssues(requeueStopped: Bool = false) async throws -> [String] {
        let subscriptions = try purchases.all().filter {
            $0.kind == .subscription && PaymentState.owning.contains($0.state) && $0.receipt != nil
        }
        // Without a subscription there is nothing to queue: skip reading the catalog.
        guard !subscriptions.isEmpty else { return [] }
        let queued = Set(try library.downloads().filter { !requeueStopped || ($0.state != .cancelled && $0.state != .failed) }.map(\.productId))
        var covering: [(receipt: String, claims: ReceiptClaims, expires: Date, series: String)] = []
        for subscription in subscriptions.reversed() {
            guard let receipt = subscription.receipt,
                  let claims = try? await ReceiptCheck(database: database).verifiedReceipt(receipt, of: ReceiptSubject(transactionId: subscription.transactionId), keysFrom: nil),
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
        // Issues of a subscribed series published after a period began that no period covers: a
        // billing grace window may (below).
        var uncovered: [(issue: Product, receipt: String, claims: ReceiptClaims, dates: [String])] = []
        for (receipt, claims, expires, series) in covering {
            let issues = issuesOf[series] ?? []
            let period = SubscriptionCoverage(purchased: claims.purchased, expires: expires)
            let dates = issues.compactMap(\.publicationDate)
            for issue in issues where !queued.contains(issue.id) && !added.contains(issue.id) {
                guard let published = issue.publicationDate, let content = issue.content else { continue }
                if period.covers(published, seriesIssueDates: dates) {
                    if try library.enqueue(issue.id, content: content, receipt: receipt, transactionId: claims.transactionId) {
                        added.append(issue.id)
                    }
                } else if published >= SubscriptionCoverage.day(claims.purchased) {
                    uncovered.append((issue, receipt, claims, dates))
                }
            }
        }
        uncovered.removeAll { added.contains($0.issue.id) }
        // A billing grace window entitles what was published in it, as a paid period does; the
        // store keeps the windows, no receipt carries them, so the store is asked (only when an
        // issue is left to cover). Any standing receipt of the series is the proof: the store
        // checks the account's windows.
        guard !uncovered.isEmpty, let windows = await purchases.graceWindows() else { return added }
        for (issue, receipt, claims, dates) in uncovered where !added.contains(issue.id) {
            let graces = SeriesCoverage(periods: [], graceWindows: (windows[claims.productId] ?? []).map { SubscriptionCoverage(purchased: $0.startsAt, expires: $0.endsAt) })
            guard let published = issue.publicationDate, let content = issue.content,
                  graces.covers(published, seriesIssueDates: dates) else { continue }
            if try library.enqueue(issue.id, content: content, receipt: receipt, transactionId: claims.transactionId) {
                added.append(issue.id)
            }
        }
        return added
    }


    /// A standing subscription period of this device that covers issue `productId` (by the one
    /// coverage rule), as the receipt and transaction its download can be presented with; nil when
    /// none does. (Grace windows are not asked for: a revocation keeps what a paid period covers.)
    func coveringReceipt(for productId: String) async throws -> (receipt: String, transactionId: String)? {
        guard let issue = try database.cachedProduct(productId), let series = issue.series, let published = issue.publicationDate else { return nil }
        let periods = try purchases.all().filter { $0.kind == .subscription && PaymentState.owning.contains($0.state) && $0.receipt != nil }
        guard !periods.isEmpty else { return nil }
        var dates: [String] = []
        try database.forEachCachedProduct { product in
            if product.series == series, product.kind == .nonConsumable, let date = product.publicationDate { dates.append(date) }
        }
        for period in periods {
            guard let receipt = period.receipt,
                  let claims = try? await ReceiptCheck(database: database).verifiedReceipt(receipt, of: ReceiptSubject(transactionId: period.transactionId), keysFrom: nil),
                  let expires = claims.expires, try database.cachedProduct(claims.productId)?.series == series,
                  SubscriptionCoverage(purchased: claims.purchased, expires: expires).covers(published, seriesIssueDates: dates) else { continue }
            return (receipt, claims.transactionId)
        }
        return nil
    }
}
