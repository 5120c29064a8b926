import Foundation
import KioskArchive
import KioskCore
import KioskStore
import Logging

/// Owned is forever: a product that leaves the catalog files stays deliverable to the readers who
/// own it (restore, a new device, a repair, an update) until the operator removes it on purpose.
///
/// The store remembers the last published form of every product it published, in its content
/// store's state folder (`<data>/content/published-products.json` for `kiosk serve`,
/// `OUT/.kiosk/published-products.json` for `kiosk publish`). Each new catalog carries the ones
/// missing from the files as off sale (`"forSale": false`), with the archive they had, which the
/// content store therefore keeps. Nothing is sold of them; everything else works as before.
struct WithdrawnProducts: Sendable {
    let contentStore: ContentStore

    var file: URL { contentStore.stateDirectory.appendingPathComponent("published-products.json") }

    /// What the file holds: every product published, as last published, and those the operator removed.
    struct Registry: Codable, Equatable {
        var products: [String: Product] = [:]
        var removed: Set<String> = []
    }

    /// The registry; empty before the first catalog.
    /// - Throws: ``ContentStoreError`` for a file that cannot be read: carrying on without it
    ///   would take withdrawn products away from their owners.
    func load() throws -> Registry {
        guard FileManager.default.fileExists(atPath: file.path) else { return Registry() }
        do {
            return try JSONDecoder.kiosk.decode(Registry.self, from: Data(contentsOf: file))
        } catch {
            throw ContentStoreError(path: file.path, message: "cannot be read as the list of published products (\(error)); restore it from a backup or fix it")
        }
    }

    /// `catalog` (built from the files) plus every product published before and missing from it
    /// now, off sale, with its archive when that is still there; remembers `catalog`'s products.
    func carryForward(into catalog: PublishedCatalog, logger: Logger) throws -> PublishedCatalog {
        // Gone, while the store packed products that are no longer in the files: those are not
        // carried to their owners, and saying so is all that can be done here.
        if !FileManager.default.fileExists(atPath: file.path),
           let packed = try? FileManager.default.contentsOfDirectory(atPath: contentStore.records.path) {
            let missing = packed.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.filter { catalog.products[$0] == nil }.sorted()
            if !missing.isEmpty {
                logger.warning("the list of published products is missing: products packed before and gone from the catalog files are not delivered to their owners; restore the file from a backup, or put them back in the files",
                               metadata: ["file": "\(file.path)", "products": "\(missing.prefix(10).joined(separator: ", "))"])
            }
        }
        var registry = try load()
        let before = registry
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
        if registry != before { try save(registry) }
        guard products.count != catalog.products.count else { return catalog }
        let body = try JSONEncoder.kiosk.encode(CatalogDocument(products: Array(products.values)))
        return try PublishedCatalog(products: products, archives: archives, body: body, covers: covers)
    }

    /// The operator removes a withdrawn product on purpose: the next catalog no longer carries it.
    /// - Throws: ``StoreError`` when `id` is not a withdrawn product (unknown, or still in the files).
    func remove(_ id: String, stillInFiles: Bool) throws {
        var registry = try load()
        guard registry.products[id] != nil, !registry.removed.contains(id) else {
            throw StoreError.notWithdrawn(id, reason: "it is no product this store published and then took out of its catalog files (or it was removed already; credit packs are never kept)")
        }
        guard !stillInFiles else {
            throw StoreError.notWithdrawn(id, reason: "it is still in the catalog files (one marked \"forSale\": false there stays deliverable to its owners); take it out of them and reload first")
        }
        registry.removed.insert(id)
        try save(registry)
    }

    private func save(_ registry: Registry) throws {
        try FileManager.default.createDirectory(at: contentStore.stateDirectory, withIntermediateDirectories: true)
        let temporary = contentStore.stateDirectory.appendingPathComponent("published-products-\(UUID().uuidString).json")
        try JSONEncoder.kiosk.encode(registry).write(to: temporary)
        guard rename(temporary.path, file.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ContentStoreError(path: file.path, message: reason)
        }
    }
}
