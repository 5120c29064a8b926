import Foundation
import KioskCore
import KioskStore

/// The files of the content store a store's records name: each product's archive, its manifest
/// and its cover, every one named by its SHA-256 (content-addressed), as the database's list of
/// published products (``PublishedProducts``) last knew them. What a backup of the database needs
/// of `<data>/content/` to resume, and what `kiosk admin check` holds the files to.
public struct ContentInventory: Sendable {
    /// One file the records name, relative to the content folder.
    public struct Entry: Codable, Sendable, Equatable {
        public var file: String
        public var size: Int64?
        public var sha256: String
        /// The product that names it.
        public var productId: String
    }

    public let entries: [Entry]

    /// The files `registry`'s products name; a product the operator removed names none.
    public init(registry: PublishedProducts.Registry) {
        var entries: [Entry] = []
        for (id, product) in registry.products.sorted(by: { $0.key < $1.key }) where !registry.removed.contains(id) {
            if let content = product.content {
                entries.append(Entry(file: "\(content.sha256).\(content.format.fileExtension)", size: content.size, sha256: content.sha256, productId: id))
                if let manifest = content.manifestSha256 {
                    entries.append(Entry(file: ContentStore.manifestName(content.sha256), size: nil, sha256: manifest, productId: id))
                }
            }
            if let cover = product.cover {
                entries.append(Entry(file: ContentStore.coverName(cover), size: cover.size, sha256: cover.sha256, productId: id))
            }
        }
        // Two editions or products may share a file: listed once.
        var seen: Set<String> = []
        self.entries = entries.filter { seen.insert($0.file).inserted }
    }

    /// Holds every file to its bytes: there, of its size, of its SHA-256.
    /// - Returns: one fault per file missing or different, naming the product.
    public func verify(in folder: URL) -> [StoreAudit.Fault] {
        entries.compactMap { entry in
            let url = folder.appendingPathComponent(entry.file)
            let subject = "\(url.path) (of \(entry.productId))"
            guard let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int64 else {
                return StoreAudit.Fault(check: "files", subject: subject, detail: "is missing; restore it from the content backup")
            }
            if let expected = entry.size, size != expected {
                return StoreAudit.Fault(check: "files", subject: subject, detail: "is \(size) bytes, not the \(expected) its product names")
            }
            guard let digest = try? FileDigest.sha256(of: url) else {
                return StoreAudit.Fault(check: "files", subject: subject, detail: "cannot be read")
            }
            guard digest == entry.sha256 else {
                return StoreAudit.Fault(check: "files", subject: subject, detail: "has SHA-256 \(digest), not the \(entry.sha256) its product names")
            }
            return nil
        }
    }
}
