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
        try await flows.runDownloads(only: products, progress: progress)
    }

    /// Queues what is owed and runs the downloads; with a `deadline`, sleeps until the next
    /// waiting download is due and goes on until nothing is due before it. Cancelling the calling
    /// Task stops it at once (transfers keep their bytes).
    /// - Parameter step: told of each round as it ends and each wait as it begins.
    public func resume(until deadline: Date? = nil, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }, step: (ResumeStep) -> Void = { _ in }) async throws -> ResumeReport {
        try await flows.resume(until: deadline, progress: progress, step: step)
    }

    /// Queues the issues subscriptions cover and what is missing from the library, and (with
    /// `includingUpdates`) puts paused downloads back in the queue and queues the new versions of
    /// installed products. Returns the product IDs newly queued.
    @discardableResult
    public func queueNewContent(includingUpdates: Bool) async throws -> [String] {
        try await flows.queueNewContent(includingUpdates: includingUpdates)
    }

    /// Queues the download of `productId` with a StoreKit 2 signed transaction (the JWS an iOS app
    /// gets from `Transaction.jwsRepresentation`) as proof instead of a Kiosk receipt; run it with
    /// ``runDownloads(only:progress:)`` or ``resume(until:progress:step:)``.
    /// - Returns: false when that version is installed, queued or running already.
    /// - Throws: ``ClientError`` when the catalog has no downloadable product of that ID.
    @discardableResult
    public func queueDownload(_ productId: String, appStoreTransaction signedTransaction: String) async throws -> Bool {
        try await flows.queueAppStoreDownload(productId, signedTransaction: signedTransaction.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Every download, in product order.
    public func downloads() throws -> [DownloadRecord] {
        try library.downloads()
    }

    /// When the earliest waiting download is due.
    public func nextDownloadAttempt() throws -> Date? {
        try library.nextAttempt()
    }

    /// Pauses a download; a process running it stops at its next progress write (two a second) and keeps its bytes.
    public func pauseDownload(_ productId: String) throws -> DownloadRecord {
        try library.pause(productId)
    }

    /// Cancels a download and deletes its partial bytes; a process running it stops at its next progress write (two a second).
    public func cancelDownload(_ productId: String) throws -> DownloadRecord {
        try library.cancel(productId)
    }

    /// Installed products; `updateAvailable` when the cached catalog has another content version.
    public func libraryEntries() throws -> [LibraryEntry] {
        try library.entries()
    }

    // MARK: The newsstand

    /// Each title with an issue on this device: its issues (newest first) with their sizes, what is
    /// pinned or bought on its own, its keep rule, and what the rule frees next.
    public func newsstand(now: Date = Date()) throws -> [TitleShelf] {
        try newsstand.shelves(now: now)
    }

    /// The keep rules the reader set, by series; a title without one keeps its frequency's
    /// default (``KeepRule/standard(for:)``).
    public func keepRules() throws -> [String: KeepRule] {
        try newsstand.rules()
    }

    /// Sets a title's keep rule; nil goes back to its frequency's default.
    public func setKeepRule(_ rule: KeepRule?, forSeries series: String) throws {
        try newsstand.setRule(rule, for: series)
    }

    /// Frees the files of every issue the keep rules let go, oldest first (what the agent does
    /// after it installs); returns their IDs. Never a pinned issue, one bought on its own, a book,
    /// or a title's newest issue; each stays owned (``reinstate(_:)``), and ``ClientEvent/removed(_:)`` tells of each.
    @discardableResult
    public func tidy(now: Date = Date()) throws -> [String] {
        try newsstand.tidy(now: now)
    }

    /// Pins a product: no rule removes its files; pinning a removed one queues it again.
    public func pin(_ productId: String) throws -> DownloadRecord {
        try library.setPinned(productId, true)
    }

    public func unpin(_ productId: String) throws -> DownloadRecord {
        try library.setPinned(productId, false)
    }

    /// Frees an installed product's files at the reader's word (pinned or not); it stays owned.
    /// - Returns: false when it is not installed now.
    @discardableResult
    public func removeFromDevice(_ productId: String) throws -> Bool {
        try library.remove(productId, automatic: false)
    }

    /// Queues a removed product again (or a waiting one now, not at its next retry); run it with ``runDownloads(only:progress:)``.
    public func reinstate(_ productId: String) throws -> DownloadRecord {
        try library.reinstate(productId)
    }
}
