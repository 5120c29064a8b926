import Foundation
import GRDB
import KioskCore
import KioskTransfer

/// An installed product, and whether the catalog has a newer version.
public struct LibraryEntry: Sendable {
    public var item: LibraryItem
    public var title: String?
    public var updateAvailable: Bool
}

extension KioskClient {
    func downloadQueue(server: String, concurrency: Int = 3) -> DownloadQueue {
        DownloadQueue(database: database, home: home, server: server, logger: logger, concurrency: concurrency)
    }

    /// Runs due downloads (all, or only `products`), then finishes the transactions they delivered.
    public func runDownloads(
        server: String, only products: Set<String>? = nil, concurrency: Int = 3,
        progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }
    ) async throws -> DownloadRunReport {
        let report = try await downloadQueue(server: server, concurrency: concurrency).runDue(only: products, progress: progress)
        if !report.installed.isEmpty {
            _ = try await paymentQueue(server: server).finishDelivered()
        }
        return report
    }

    /// Queues the issues active subscriptions cover and the new versions of installed products,
    /// and puts paused downloads back in the queue. Returns the product IDs newly queued.
    @discardableResult
    public func queueNewContent(server: String, includingUpdates: Bool) async throws -> [String] {
        let queue = downloadQueue(server: server)
        var queued = try await SubscriptionIssues(database: database, downloads: queue).queueCoveredIssues()
        if includingUpdates {
            try await queue.unpauseAll()
            for entry in try await library() where entry.updateAvailable {
                let (download, product) = try await database.pool.read { db in
                    (try DownloadRecord.fetchOne(db, key: entry.item.productId),
                     try CachedProduct.fetchOne(db, key: entry.item.productId).flatMap { try? JSONDecoder.kiosk.decode(Product.self, from: $0.json) })
                }
                if let download, let product {
                    try await queue.enqueue(product, receipt: download.receipt)
                    queued.append(product.id)
                }
            }
        }
        return queued
    }

    /// Every download, in product order.
    public func downloads() async throws -> [DownloadRecord] {
        try await database.pool.read { try DownloadRecord.order(DownloadRecord.Columns.productId).fetchAll($0) }
    }

    /// When the earliest waiting download is due.
    public func nextDownloadAttempt() async throws -> Date? {
        try await downloadQueue(server: "").nextAttempt()
    }

    public func pauseDownload(_ productId: String) async throws -> DownloadRecord {
        try await downloadQueue(server: "").pause(productId)
    }

    public func cancelDownload(_ productId: String) async throws -> DownloadRecord {
        try await downloadQueue(server: "").cancel(productId)
    }

    /// Installed products; `updateAvailable` when the cached catalog has another content version.
    public func library() async throws -> [LibraryEntry] {
        try await database.pool.read { db in
            try LibraryItem.order(Column("productId")).fetchAll(db).map { item in
                let product = try CachedProduct.fetchOne(db, key: item.productId).flatMap { try? JSONDecoder.kiosk.decode(Product.self, from: $0.json) }
                let latest = product?.content?.version
                return LibraryEntry(item: item, title: product?.title, updateAvailable: latest != nil && latest != item.version)
            }
        }
    }
}
