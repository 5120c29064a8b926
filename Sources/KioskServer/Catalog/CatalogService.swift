import Foundation
import KioskArchive
import KioskCore
import KioskStore
import Logging
import Synchronization

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
    private var published: PublishedCatalog? {
        didSet { servedTags.withLock { $0 = published.map { ServedTags(plain: $0.etag, gzip: $0.gzipETag) } } }
    }
    /// The served catalog's entity tags, read without a hop onto this actor by the event loop's
    /// answer to a conditional GET (``CatalogNotModifiedResponder``).
    nonisolated let servedTags = Mutex<ServedTags?>(nil)

    /// The ETags of the catalog being served: of its JSON, and of its gzip encoding.
    struct ServedTags: Sendable, Equatable {
        let plain: String
        let gzip: String
    }
    /// Where the catalog being served came from.
    public private(set) var origin: Origin?
    /// Per product, the archive a reload replaced and when: it still serves resumes in flight for
    /// ``ContentStore/gracePeriod``. Kept per product, not as the whole catalog a reload replaced,
    /// so that a reload that changes nothing of a product (a second SIGHUP, or another product's
    /// edit) does not forget the version its readers are still resuming.
    private var previous: [String: (archive: PackedContent, replacedAt: Date)] = [:]
    private var lastReload: Task<Bool, Never>?
    /// The first catalog, read and checked by ``check()`` and waiting for ``load()`` to pack it.
    private var checked: Checked?
    /// The products the catalog files list, as last built (the others served are withdrawn ones).
    private var fileProducts: Set<String> = []
    /// Reloads refused since the start (a bad catalog; the last good one kept serving), for `/metrics`.
    public private(set) var failedReloads = 0
    /// Where the products published are remembered (``keep(publishedProducts:)``).
    private var registry: PublishedProducts?

    /// A catalog read and checked, with its archives not necessarily packed yet.
    enum Checked: Sendable {
        /// Every archive exists: a snapshot of an unchanged catalog, or a published folder.
        case ready(PublishedCatalog, Origin)
        /// Valid entries still to pack; `digest` names the files they were read from.
        case unpacked([CatalogEntry], digest: String?)
    }

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
    /// - Throws: ``StoreError`` `starting` while the first catalog is still being packed.
    public var current: PublishedCatalog {
        get throws {
            guard let published else {
                throw StoreError.starting
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

    /// Reads and checks the first catalog without packing anything, so that a bad one is refused
    /// before the server opens its database or its port; ``load()`` then packs what it read.
    /// - Throws: ``CatalogError`` for a bad catalog.
    public func check() async throws {
        checked = try await read()
    }

    /// Loads the first catalog (the one ``check()`` read, if it ran) and packs what needs packing.
    /// - Throws: ``CatalogError`` or a packing error: a server must not start on a bad catalog.
    public func load() async throws {
        let read: Checked
        if let checked {
            read = checked
            self.checked = nil
        } else {
            read = try await self.read()
        }
        let (first, origin) = try await pack(read)
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

    /// Loads the catalog again, as ``reload()``.
    /// - Returns: true when the catalog served now is another than before (its ETag changed).
    public func reloadReportingChange() async -> Bool {
        let before = published?.etag
        guard await reload() else { return false }
        return published?.etag != before
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
            failedReloads += 1
            return false
        }
    }

    /// Forgets the replaced archives whose grace period is over and, for a catalog packed here,
    /// deletes the archive files no catalog names any more (``ContentStore/collectGarbage``), so
    /// that they do not wait for the next reload to go.
    public func forgetExpiredArchives(now: Date = Date()) {
        previous = previous.filter { now.timeIntervalSince($0.value.replacedAt) <= ContentStore.gracePeriod }
        guard case .folders(_, let contentStore, _) = source, let published else { return }
        contentStore.collectGarbage(keeping: [published], archives: previous.values.map(\.archive), now: now)
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
        try await pack(try await read())
    }

    /// Reads the catalog: the snapshot of the same files if there is one, else the validated entries.
    private func read() async throws -> Checked {
        switch source {
        case .folders(let loader, let contentStore, let snapshot):
            return try await onOwnThread {
                // An unreadable folder has no digest: the loader then says what is wrong with it.
                let digest = try? loader.digest()
                if let digest, let saved = snapshot.load(catalogDigest: digest, contentStore: contentStore) {
                    return .ready(saved, .snapshot)
                }
                return .unpacked(try loader.load(), digest: digest)
            }
        case .published(let folder):
            return try await onOwnThread { .ready(try folder.load(), .published) }
        }
    }

    /// Packs what `read` left to pack, then carries the withdrawn products into it (a published
    /// folder has them already: `kiosk publish` carried them).
    private func pack(_ read: Checked) async throws -> (PublishedCatalog, Origin) {
        let (built, origin) = try await packFiles(read)
        guard case .folders(_, let contentStore, _) = source else { return (built, origin) }
        fileProducts = Set(built.products.keys)
        let registry = try await loadRegistry(contentStore)
        let withdrawn = WithdrawnProducts(contentStore: contentStore)
        let logger = logger
        let (carried, updated) = try await onOwnThread { try withdrawn.carryForward(into: built, registry: registry, logger: logger) }
        try await publishedProducts().record(updated, replacing: registry)
        return (carried, origin)
    }

    /// The store's record of what it published, which ``KioskServer`` hands over once the
    /// database is open (the catalog is checked before, and packed after).
    public func keep(publishedProducts: PublishedProducts) {
        self.registry = publishedProducts
    }

    private func publishedProducts() throws -> PublishedProducts {
        guard let registry else {
            throw StoreError.notWithdrawn("the catalog", reason: "no database holds the list of published products yet (KioskServer keeps it before loading)")
        }
        return registry
    }

    /// The registry from the database; on the first start after an upgrade, the file a Kiosk
    /// before schema 34 kept beside the archives, read into the database once (the file is left
    /// as it was, for a rollback).
    private func loadRegistry(_ contentStore: ContentStore) async throws -> PublishedProducts.Registry {
        let store = try publishedProducts()
        let registry = try await store.load()
        let legacy = PublishedProductsFile(stateDirectory: contentStore.stateDirectory)
        guard registry.products.isEmpty, legacy.exists else { return registry }
        let imported = try await onOwnThread { try legacy.load() }
        try await store.record(imported, replacing: registry)
        logger.notice("read the list of published products into the database", metadata: ["file": "\(legacy.file.path)", "products": "\(imported.products.count)"])
        return imported
    }

    /// Removes a withdrawn product on purpose (its owners can no longer download it) and reloads.
    /// - Throws: ``StoreError`` when it is not a withdrawn product, or the store serves a
    ///   published folder (`kiosk publish --remove-withdrawn` removes it there).
    public func removeWithdrawn(_ id: String) async throws {
        guard case .folders(_, let contentStore, _) = source else {
            throw StoreError.notWithdrawn(id, reason: "this store serves a folder kiosk publish made: remove it there with kiosk publish --remove-withdrawn \(id), then SIGHUP every instance")
        }
        let store = try publishedProducts()
        let registry = try await loadRegistry(contentStore)
        try await store.record(try WithdrawnProducts.remove(id, stillInFiles: fileProducts.contains(id), from: registry), replacing: registry)
        guard await reload() else {
            throw StoreError.notWithdrawn(id, reason: "it was removed from the list, but the catalog could not be reloaded (see the log); the next reload drops it")
        }
    }

    /// Packs what `read` left to pack.
    private func packFiles(_ read: Checked) async throws -> (PublishedCatalog, Origin) {
        switch (read, source) {
        case (.ready(let catalog, let origin), _):
            return (catalog, origin)
        case (.unpacked(let entries, let digest), .folders(let loader, let contentStore, let snapshot)):
            return try await onOwnThread {
                let built = try PublishedCatalog(entries: entries, contentStore: contentStore)
                // Saved only if the files did not change while they were read (else the key
                // would name files the document was not built from).
                if let digest, (try? loader.digest()) == digest {
                    snapshot.save(built, entries: entries, catalogDigest: digest)
                }
                return (built, .folders)
            }
        case (.unpacked, .published(let folder)):
            // Not made: a published folder is read whole.
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

extension CatalogService: StoreCatalog {
    public func storeProducts() async throws -> CatalogProducts {
        let published = try current
        return CatalogProducts(products: published.products, productsByAppStoreID: published.productsByAppStoreID, productsByPlayID: published.productsByPlayID, etag: published.etag)
    }
}
