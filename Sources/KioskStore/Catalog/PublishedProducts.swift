import Foundation
import KioskCore
import SQLKit

/// Every product the store published, as last published, and those the operator removed: what
/// carries a product gone from the catalog files to the readers who own it (``Registry``). The one
/// writer of `publishedProduct`.
///
/// Kept in the database, not in a file beside the archives, so a backup of the database restores
/// it with the sales it stands for: a restored store delivers its withdrawn books as before.
public struct PublishedProducts: StoreOwner {
    let base: StoreBase

    /// Every product published, as last published, and those removed on purpose.
    public struct Registry: Codable, Equatable, Sendable {
        public var products: [String: Product] = [:]
        public var removed: Set<String> = []

        public init(products: [String: Product] = [:], removed: Set<String> = []) {
            (self.products, self.removed) = (products, removed)
        }
    }

    private struct Row: Decodable {
        var productId: String
        var product: String
        var removedAt: Date?
    }

    /// The registry as the database holds it; empty before the first catalog.
    /// - Throws: ``StoreError`` for a row that no longer reads as a product: carrying on without
    ///   it would take a withdrawn product away from its owners.
    public func load() async throws -> Registry {
        let rows = try await database.read { db in
            try await db.raw(#"SELECT "productId", "product", "removedAt" FROM "publishedProduct""#).all(decoding: Row.self)
        }
        var registry = Registry()
        for row in rows {
            do {
                registry.products[row.productId] = try JSONDecoder.kiosk.decode(Product.self, from: Data(row.product.utf8))
            } catch {
                throw StoreError.unreadableRecord(what: "published product \(row.productId)", reason: "\(error)")
            }
            if row.removedAt != nil { registry.removed.insert(row.productId) }
        }
        return registry
    }

    /// Writes what changed from `old` to `updated`, in one transaction: each product published
    /// anew or changed (and no longer removed, as it is in the files again), and each one removed.
    /// Every instance may: the same catalog writes the same rows.
    public func record(_ updated: Registry, replacing old: Registry) async throws {
        let changed = updated.products.filter { old.products[$0.key] != $0.value || (old.removed.contains($0.key) && !updated.removed.contains($0.key)) }
        let removed = updated.removed.subtracting(old.removed)
        guard !changed.isEmpty || !removed.isEmpty else { return }
        let encoded = try changed.sorted { $0.key < $1.key }.map { ($0.key, String(decoding: try JSONEncoder.kiosk.encode($0.value), as: UTF8.self)) }
        let now = clock.wallNow()
        try await database.write { db in
            for (id, product) in encoded {
                try await db.raw(#"""
                    INSERT INTO "publishedProduct" ("productId", "product", "removedAt") VALUES (\#(bind: id), \#(bind: product), NULL)
                    ON CONFLICT ("productId") DO UPDATE SET "product" = excluded."product", "removedAt" = NULL
                    """#).run()
            }
            for id in removed.sorted() {
                try await db.raw(#"UPDATE "publishedProduct" SET "removedAt" = \#(bind: now) WHERE "productId" = \#(bind: id) AND "removedAt" IS NULL"#).run()
            }
        }
    }
}
