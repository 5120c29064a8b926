import Foundation
import KioskArchive
import KioskCore
import KioskStore
import Logging

/// Owned is forever: a product that leaves the catalog files stays deliverable to the readers who
/// own it (restore, a new device, a repair, an update) until the operator removes it on purpose.
///
/// The store remembers the last published form of every product it published
/// (``PublishedProducts/Registry``): `kiosk serve` in its database (``PublishedProducts``),
/// `kiosk publish` in its folder's `OUT/.kiosk/published-products.json` (``PublishedProductsFile``).
/// Each new catalog carries the ones missing from the files as off sale (`"forSale": false`), with
/// the archive they had, which the content store therefore keeps. Nothing is sold of them;
/// everything else works as before. This type only computes; its callers load and save the registry.
struct WithdrawnProducts: Sendable {
    typealias Registry = PublishedProducts.Registry
    let contentStore: ContentStore

    /// `catalog` (built from the files) plus every product published before and missing from it
    /// now, off sale, with its archive when that is still there; and the registry remembering
    /// `catalog`'s products.
    func carryForward(into catalog: PublishedCatalog, registry before: Registry, logger: Logger) throws -> (catalog: PublishedCatalog, registry: Registry) {
        // Empty, while the store packed products that are no longer in the files: those are not
        // carried to their owners, and saying so is all that can be done here.
        if before.products.isEmpty,
           let packed = try? FileManager.default.contentsOfDirectory(atPath: contentStore.records.path) {
            let missing = packed.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.filter { catalog.products[$0] == nil }.sorted()
            if !missing.isEmpty {
                logger.warning("the list of published products is empty: products packed before and gone from the catalog files are not delivered to their owners; restore the database from a backup, or put them back in the files",
                               metadata: ["products": "\(missing.prefix(10).joined(separator: ", "))"])
            }
        }
        var registry = before
        var products = catalog.products
        var archives = catalog.archives
        var covers = catalog.covers
        // Credits are spent, never owned: a pack gone from the files is simply gone.
        for (id, last) in registry.products where products[id] == nil && !registry.removed.contains(id) && last.kind != .consumable {
            var withdrawn = last
            withdrawn.forSale = false
            if let content = last.content {
                let archive = contentStore.archive(content.sha256, content.format)
                let size = (try? FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int64) ?? nil
                // Its archive is gone (removed by hand): nothing left to deliver, so not listed.
                guard size == content.size else { continue }
                archives[id] = PackedContent(file: archive, size: content.size, sha256: content.sha256,
                                             manifestFile: content.manifestSha256 == nil ? nil : contentStore.manifestFile(content.sha256),
                                             manifestSha256: content.manifestSha256)
            }
            // Its cover is kept beside the archives by its SHA-256, as long as the archive is.
            if let cover = last.cover {
                let file = contentStore.coverFile(cover)
                if (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) == cover.size {
                    covers[id] = file
                } else {
                    withdrawn.cover = nil
                }
            }
            products[id] = withdrawn
        }
        for (id, product) in catalog.products where product.kind != .consumable {
            registry.products[id] = product
            registry.removed.remove(id)
        }
        guard products.count != catalog.products.count else { return (catalog, registry) }
        let body = try JSONEncoder.kiosk.encode(CatalogDocument(products: Array(products.values)))
        return (try PublishedCatalog(products: products, archives: archives, body: body, covers: covers), registry)
    }

    /// The operator removes a withdrawn product on purpose: the next catalog no longer carries it.
    /// - Throws: ``StoreError`` when `id` is not a withdrawn product (unknown, or still in the files).
    static func remove(_ id: String, stillInFiles: Bool, from registry: Registry) throws -> Registry {
        guard registry.products[id] != nil, !registry.removed.contains(id) else {
            throw StoreError.notWithdrawn(id, reason: "it is no product this store published and then took out of its catalog files (or it was removed already; credit packs are never kept)")
        }
        guard !stillInFiles else {
            throw StoreError.notWithdrawn(id, reason: "it is still in the catalog files (one marked \"forSale\": false there stays deliverable to its owners); take it out of them and reload first")
        }
        var registry = registry
        registry.removed.insert(id)
        return registry
    }
}

/// The registry of a folder `kiosk publish` makes (`OUT/.kiosk/published-products.json`), which
/// has no database: the folder is the artifact the operator keeps. Also the file `kiosk serve`
/// kept before its database held the registry, read once into it.
struct PublishedProductsFile: Sendable {
    let file: URL

    init(stateDirectory: URL) { file = stateDirectory.appendingPathComponent("published-products.json") }

    var exists: Bool { FileManager.default.fileExists(atPath: file.path) }

    /// The registry; empty when there is no file.
    /// - Throws: ``ContentStoreError`` for a file that cannot be read: carrying on without it
    ///   would take withdrawn products away from their owners.
    func load() throws -> PublishedProducts.Registry {
        guard exists else { return PublishedProducts.Registry() }
        do {
            return try JSONDecoder.kiosk.decode(PublishedProducts.Registry.self, from: Data(contentsOf: file))
        } catch {
            throw ContentStoreError(path: file.path, message: "cannot be read as the list of published products (\(error)); restore it from a backup or fix it")
        }
    }

    func save(_ registry: PublishedProducts.Registry) throws {
        let folder = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let temporary = folder.appendingPathComponent("published-products-\(UUID().uuidString).json")
        try JSONEncoder.kiosk.encode(registry).write(to: temporary)
        guard rename(temporary.path, file.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ContentStoreError(path: file.path, message: reason)
        }
    }
}
