import Foundation
import KioskArchive
import KioskCore
import Logging

/// Holds the catalog being served and replaces it on reload, keeping the last good one on error.
///
/// Loading and packing run on a thread of their own, off the actor and off Swift's cooperative
/// pool, so every route keeps answering from the last good catalog while a reload works; a new
/// catalog is published only once all its archives exist. Reloads run one at a time.
public actor CatalogService {
    /// Where catalogs come from: the catalog and content folders, packed here, or a folder
    /// `kiosk publish` packed once for every instance.
    enum Source: Sendable {
        case folders(CatalogLoader, ContentStore, CatalogSnapshot)
        case published(PublishedFolder)
    }

    /// Where the catalog being served was read from.
    public enum Origin: String, Sendable {
        /// Validated, packed and encoded from the catalog and content folders.
        case folders
        /// The snapshot of the last build from the same, unchanged folders (see ``CatalogSnapshot``).
        case snapshot
        /// A folder `kiosk publish` made.
        case published
    }

    private let source: Source
    private let logger: Logger
    private var published: PublishedCatalog?
    /// Where the catalog being served came from.
    public private(set) var origin: Origin?
    /// Per product, the archive a reload replaced and when: it still serves resumes in flight for
    /// ``ContentStore/gracePeriod``. Kept per product, not as the whole catalog a reload replaced,
    /// so that a reload that changes nothing of a product (a second SIGHUP, or another product's
    /// edit) does not forget the version its readers are still resuming.
    private var previous: [String: (archive: PackedContent, replacedAt: Date)] = [:]
    private var lastReload: Task<Bool, Never>?

    /// Prepares the service; nothing is loaded until ``load()``.
    public init(configuration: ServerConfiguration, logger: Logger) {
        if let published = configuration.publishedDirectory {
            source = .published(PublishedFolder(published))
        } else {
            source = .folders(
                CatalogLoader(catalogDirectory: configuration.catalogDirectory, contentDirectory: configuration.contentDirectory),
                ContentStore(dataDirectory: configuration.dataDirectory, logger: logger),
                CatalogSnapshot(dataDirectory: configuration.dataDirectory, logger: logger))
        }
        self.logger = logger
    }

    /// The catalog being served.
    /// - Throws: 503 while the first catalog is still being packed.
    public var current: PublishedCatalog {
        get throws {
            guard let published else {
                throw APIFailure(.serviceUnavailable, code: "starting", message: "the store is starting; try again in a few seconds")
            }
            return published
        }
    }

    /// The archive the previous catalog published for `productId` under `etag`, if that is what a
    /// resume's If-Range names: it is finished from the bytes it started with.
    public func previousArchive(_ productId: String, etag: String, now: Date = Date()) -> PackedContent? {
        guard let replaced = previous[productId], "\"\(replaced.archive.sha256)\"" == etag,
              now.timeIntervalSince(replaced.replacedAt) <= ContentStore.gracePeriod,
              FileManager.default.fileExists(atPath: replaced.archive.file.path) else { return nil }
        return replaced.archive
    }

    /// Loads the first catalog.
    /// - Throws: ``CatalogError`` or a packing error: a server must not start on a bad catalog.
    public func load() async throws {
        let (first, origin) = try await build()
        published = first
        self.origin = origin
        logger.info("catalog loaded", metadata: ["products": "\(first.products.count)", "from": "\(origin.rawValue)"])
    }

    /// Loads the catalog again; on error logs it and keeps serving the last good catalog.
    /// - Returns: true when the new catalog replaced the old one.
    @discardableResult
    public func reload() async -> Bool {
        let previous = lastReload
        let task = Task<Bool, Never> {
            _ = await previous?.value
            return await self.reloadNow()
        }
        lastReload = task
        return await task.value
    }

    private func reloadNow() async -> Bool {
        do {
            let (next, origin) = try await build()
            let replaced = published
            published = next
            if let replaced { rememberReplaced(replaced, by: next) }
            self.origin = origin
            if case .folders(_, let contentStore, _) = source {
                contentStore.collectGarbage(keeping: [next] + (replaced.map { [$0] } ?? []))
            }
            logger.info("catalog reloaded", metadata: ["products": "\(next.products.count)"])
            return true
        } catch {
            logger.error("catalog reload refused; still serving the last good catalog", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Records, for each product whose archive `next` changes, the archive it replaces; a product
    /// whose archive stays keeps the older version it already remembered.
    private func rememberReplaced(_ replaced: PublishedCatalog, by next: PublishedCatalog, now: Date = Date()) {
        for (productId, archive) in replaced.archives where next.archives[productId]?.sha256 != archive.sha256 {
            previous[productId] = (archive, now)
        }
        previous = previous.filter { now.timeIntervalSince($0.value.replacedAt) <= ContentStore.gracePeriod }
    }

    private func build() async throws -> (PublishedCatalog, Origin) {
        switch source {
        case .folders(let loader, let contentStore, let snapshot):
            return try await onOwnThread {
                // An unreadable folder has no digest: the loader then says what is wrong with it.
                let digest = try? loader.digest()
                if let digest, let saved = snapshot.load(catalogDigest: digest, contentStore: contentStore) {
                    return (saved, .snapshot)
                }
                let entries = try loader.load()
                let built = try PublishedCatalog(entries: entries, contentStore: contentStore)
                // Saved only if the files did not change while they were read (else the key
                // would name files the document was not built from).
                if let digest, (try? loader.digest()) == digest {
                    snapshot.save(built, entries: entries, catalogDigest: digest)
                }
                return (built, .folders)
            }
        case .published(let folder):
            return try await onOwnThread { (try folder.load(), .published) }
        }
    }
}

/// Runs blocking work (packing, hashing) on a thread of its own, so the cooperative pool stays free.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "kiosk-packing"
        thread.start()
    }
}
