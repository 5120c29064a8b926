import Foundation
import KioskCore
import KioskTransfer

/// An installed product, and whether the catalog has a newer version.
public struct LibraryEntry: Sendable {
    public var item: LibraryItem
    public var title: String?
    public var updateAvailable: Bool
}

extension KioskClient {
    /// Runs due downloads (all, or only `products`), then finishes the purchases they delivered.
    /// A download another process is running is waited for, not fetched twice. Cancelling the
    /// calling Task stops the transfers at once; they keep their bytes.
    public func runDownloads(only products: Set<String>? = nil, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        var report = try await downloadQueue().run(only: products, waitForOthers: true, progress: progress)
        if !report.outdated.isEmpty, try await queueCurrentVersions(of: report.outdated) {
            // A catalog reload replaced the content mid-way: fetch the version the catalog now names.
            let again = try await downloadQueue().run(only: Set(report.outdated), waitForOthers: true, progress: progress)
            report.absorb(again)
        }
        if !report.installed.isEmpty || !report.installedElsewhere.isEmpty || !report.cancelled.isEmpty {
            _ = try? await paymentQueue.finishDelivered()
        }
        return report
    }

    /// Syncs the catalog and queues the version it now names for each of `products` whose download
    /// the server refused as outdated. Returns true when any was queued.
    private func queueCurrentVersions(of products: [String]) async throws -> Bool {
        _ = try await catalogSync().sync()
        try retargetDownloads(products)
        return try products.contains { try database.download($0)?.state == .queued }
    }

    /// Everything `kiosk resume` does before downloading: queues the issues subscriptions cover and
    /// the new versions of installed products, puts paused downloads back in the queue, and
    /// requeues whatever is missing from the library. Returns the product IDs newly queued.
    @discardableResult
    public func queueNewContent(includingUpdates: Bool) async throws -> [String] {
        var queued = try await subscriptionIssues().queueCoveredIssues()
        queued += try await checkLibrary()
        guard includingUpdates else { return queued }
        try database.unpauseAll()
        return queued + (try queueUpdates())
    }

    /// Queues the catalog's newer version of every installed product that has one. Returns their IDs.
    @discardableResult
    public func queueUpdates() throws -> [String] {
        var queued: [String] = []
        for entry in try library() where entry.updateAvailable {
            guard let download = try database.download(entry.item.productId),
                  let content = try database.cachedProduct(entry.item.productId)?.content else { continue }
            if try database.enqueueDownload(productId: download.productId, content: content, receipt: download.receipt, transactionId: download.transactionId) {
                queued.append(download.productId)
            }
        }
        return queued
    }

    /// Requeues every installed product whose folder is missing or no longer matches what was
    /// installed (a file deleted, added or truncated). Returns their IDs.
    @discardableResult
    public func checkLibrary(only products: Set<String>? = nil) async throws -> [String] {
        var requeued: [String] = []
        let installer = LibraryInstaller(library: home.library)
        installer.sweepLeftovers()
        PartialFile.sweepCopies(in: home.downloads)
        for item in try database.libraryItems() where products?.contains(item.productId) ?? true {
            guard try database.download(item.productId)?.state == .installed else { continue }
            let folder = try installer.installed(item.productId)
            let problem: String?
            if !FileManager.default.fileExists(atPath: folder.path) {
                problem = "the library folder is missing; downloading it again"
            } else if let expected = item.treeDigest, (try? LibraryInstaller.treeDigest(of: folder)) != expected {
                problem = "the library folder was changed or damaged; downloading it again"
            } else {
                problem = nil
            }
            if let problem {
                try database.requeueInstalled(item.productId, reason: problem)
                requeued.append(item.productId)
            }
        }
        return requeued
    }

    /// Takes the content a revoked transaction granted out of the library, unless another standing
    /// purchase of the same product still grants it.
    func removeContent(grantedBy revoked: PaymentRecord) throws {
        let installer = LibraryInstaller(library: home.library)
        for download in try database.downloads() where download.transactionId == revoked.transactionId || download.receipt == revoked.receipt {
            if let other = try database.owningPayment(productId: download.productId), let receipt = other.receipt {
                try database.represent(download.productId, receipt: receipt, transactionId: other.transactionId)
                continue
            }
            let partial = try home.partialFile(download.productId)
            let removed = try database.forgetContent(download.productId) {
                unlink(partial.path)
                return try installer.removeFromLibrary(download.productId, by: owner)
            }
            if let removed { installer.discard(removed) }
        }
    }

    /// Every download, in product order.
    public func downloads() throws -> [DownloadRecord] {
        try database.downloads()
    }

    /// When the earliest waiting download is due.
    public func nextDownloadAttempt() throws -> Date? {
        try database.nextDownloadAttempt()
    }

    /// Pauses a download; a process running it stops at its next progress write (two a second) and keeps its bytes.
    public func pauseDownload(_ productId: String) throws -> DownloadRecord {
        try database.pauseDownload(productId)
    }

    /// Cancels a download and deletes its partial bytes; a process running it stops at its next progress write (two a second).
    public func cancelDownload(_ productId: String) throws -> DownloadRecord {
        let partial = try home.partialFile(productId)
        // The bytes go first: on a full disk they are what frees the room the state change needs.
        try? FileManager.default.removeItem(at: partial)
        let record = try database.cancelDownload(productId)
        return record
    }

    /// Installed products; `updateAvailable` when the cached catalog has another content version.
    public func library() throws -> [LibraryEntry] {
        try database.libraryItems().map { item in
            let product = try database.cachedProduct(item.productId)
            let latest = product?.content?.version
            return LibraryEntry(item: item, title: product?.title, updateAvailable: latest != nil && latest != item.version)
        }
    }
}
