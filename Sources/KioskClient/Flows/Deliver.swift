import Foundation
import KioskCore
import KioskTransfer
import Logging

// Delivering: from a paid purchase to the installed folder, and finishing it.
extension Flows {
    /// Delivers a purchased or restored transaction and finishes it once delivered.
    ///
    /// A book or an issue has its download queued and waits in `delivering` until it is
    /// installed, unless the reader asked to download later: then it finishes now and the
    /// download stays queued. Credits have nothing to download; a subscription queues the issues
    /// it covers. Delivery never depends on an earlier sync: a product missing from the cached
    /// catalog is looked up by syncing it.
    /// - Parameter receiptVerified: the receipt came from the store in this very send and
    ///   ``Purchases/send(_:whileTheReaderWaits:)`` verified it before storing it; a row read back
    ///   from the database (replay, restore, resume) is checked again before anything is delivered.
    func deliver(_ record: PaymentRecord, _ mode: DeliveryMode, receiptVerified: Bool = false) async throws -> (PaymentRecord, DownloadRunReport?) {
        switch record.kind {
        case .consumable:
            return (try await purchases.finish(record), nil)
        case .subscription:
            // The issues it covers now are its content: with `.now` they are downloaded before
            // the purchase returns, as a book's are.
            _ = try await deliverableProduct(record.productId)
            if !receiptVerified, let refused = try await purchases.refuseUnverifiedReceipt(of: record) { return (refused, nil) }
            let issues = try await subscriptions.queueCoveredIssues()
            let finished = try await purchases.finish(record)
            guard mode == .now, !issues.isEmpty else { return (finished, nil) }
            return (finished, try await runDownloads(only: Set(issues)))
        case .nonConsumable:
            guard let receipt = record.receipt else { return (record, nil) }
            guard let product = try await deliverableProduct(record.productId) else {
                throw ClientError.invalidRequest("\(record.productId) is no longer in the store's catalog, so its content cannot be downloaded; the receipt is kept")
            }
            // A row of this device's database is no proof by itself (an altered or copied row may
            // carry another account's receipt): nothing is delivered on a receipt that does not
            // verify now, and the purchase fails with why rather than being tried again for ever.
            if !receiptVerified, let refused = try await purchases.refuseUnverifiedReceipt(of: record) { return (refused, nil) }
            guard let content = product.content else { return (try await purchases.finish(record), nil) }
            try library.enqueue(record.productId, content: content, receipt: receipt, transactionId: record.transactionId)
            if mode == .finishNow { return (try await purchases.finish(record), nil) }
            var current = try purchases.markDelivering(record)
            // Already installed (by a restore, or an earlier purchase of the same content): done.
            if try deliveryIsOver(current) { return (try await purchases.finish(current), nil) }
            guard mode == .now else { return (current, nil) }
            let report = try await runDownloads(only: [record.productId])
            if let latest = try current.id.flatMap(purchases.record), latest.state == .finished {
                current = latest
            }
            return (current, report)
        }
    }

    /// Runs due downloads (all, or only `products`), then finishes the purchases they delivered.
    /// A download the store refused as outdated (412: a catalog reload replaced its version) is
    /// brought up to the version the catalog now names and fetched at once. A download another
    /// process is running is waited for, not fetched twice.
    func runDownloads(only products: Set<String>? = nil, keepingFree: Int64 = 0, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        var report = try await library.run(only: products, waitForOthers: true, keepingFree: keepingFree, progress: progress)
        if !report.outdated.isEmpty, try await queueCurrentVersions(of: report.outdated) {
            let again = try await library.run(only: Set(report.outdated), waitForOthers: true, progress: progress)
            report.absorb(again)
        }
        if !report.installed.isEmpty || !report.installedElsewhere.isEmpty || !report.cancelled.isEmpty {
            _ = try? await finishDelivered()
        }
        return report
    }

    /// Syncs the catalog and queues the version it now names for each of `products` whose download
    /// the store refused as outdated. Returns true when any was queued.
    func queueCurrentVersions(of products: [String]) async throws -> Bool {
        _ = try await refreshCatalog()
        return try products.contains { try library.download($0)?.state == .queued }
    }

    /// Finishes every `delivering` transaction whose delivery is over.
    func finishDelivered() async throws -> Int {
        var finished = 0
        for record in try purchases.unfinished() where record.state == .delivering {
            guard try deliveryIsOver(record) else { continue }
            if try await purchases.finish(record).state == .finished { finished += 1 }
        }
        return finished
    }

    /// A delivery is over when its content is installed, or was cancelled by the reader (who can
    /// download it again with `kiosk buy`, which charges nothing), or there is nothing to download.
    func deliveryIsOver(_ record: PaymentRecord) throws -> Bool {
        guard let download = try library.download(record.productId) else { return true }
        return download.state == .installed || download.state == .cancelled
    }
}
