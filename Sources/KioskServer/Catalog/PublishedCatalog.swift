import Foundation
import KioskArchive
import KioskCore

/// One loaded catalog, ready to serve: the products, the response bodies and where each archive is.
public struct PublishedCatalog: Sendable {
    public let products: [String: Product]
    public let archives: [String: PackedContent]
    /// Each product's cover image file, by product ID (products without one have a drawn card).
    public let covers: [String: URL]
    /// Kiosk's product ID by the App Store product ID its catalog entry names (`appStoreProductId`).
    public let productsByAppStoreID: [String: String]
    /// Kiosk's product ID by the Play product ID its catalog entry names (`playProductId`).
    public let productsByPlayID: [String: String]
    /// The JSON body of `GET /v1/catalog`, and its gzip form.
    public let body: Data
    public let gzippedBody: Data
    /// Quoted strong entity tags of the identity and gzip bodies.
    public let etag: String
    public let gzipETag: String
    /// The product each delivered file is, by the name KOReader gives it (``KOReaderDigest``):
    /// what a device syncing its reading progress calls the book.
    public let productsByDocument: [String: String]

    /// Packs what needs packing and builds the response bodies.
    public init(entries: [CatalogEntry], contentStore: ContentStore) throws {
        var products: [String: Product] = [:]
        var archives: [String: PackedContent] = [:]
        var covers: [String: URL] = [:]
        for entry in entries {
            var product = entry.product
            // An EPUB's package document, read once when its content is checked.
            var epub: EPUBPackage?
            if let source = entry.content {
                let packed: PackedContent
                do {
                    (packed, epub) = try contentStore.prepare(productID: product.id, source: source)
                } catch let error as UndeliverableContent {
                    throw CatalogError(.badContent, file: entry.file, productID: product.id, field: "content.format",
                                       message: "\(error); fix the file or give its real format, so that nothing undeliverable is sold")
                }
                product.content = ContentDescriptor(
                    format: source.format, size: packed.size, sha256: packed.sha256,
                    version: String(packed.sha256.prefix(12)), manifestSha256: packed.manifestSha256,
                    fileName: source.format.deliveredAsFile ? source.location.lastPathComponent : nil)
                archives[product.id] = packed
                // An EPUB says who wrote it: what the catalog file leaves out comes from its package document.
                if let own = epub?.metadata, !own.isEmpty {
                    let merged = (product.metadata ?? PublicationMetadata()).filled(from: own)
                    product.metadata = merged.isEmpty ? nil : merged
                }
            }
            if let bytes = try Self.coverBytes(of: entry, epub: epub), let stored = try contentStore.storeCover(bytes) {
                product.cover = stored.cover
                covers[product.id] = stored.file
            }
            products[product.id] = product
        }
        let body = try JSONEncoder.kiosk.encode(CatalogDocument(products: Array(products.values)))
        try self.init(products: products, archives: archives, body: body, covers: covers)
    }

    /// The cover the catalog names (refused when it is no image or too large), else the cover
    /// image an EPUB names (left out, for a drawn card, when it is either).
    static func coverBytes(of entry: CatalogEntry, epub: EPUBPackage?) throws -> Data? {
        guard let file = entry.cover else {
            guard let source = entry.content, let bytes = epub?.cover(in: source.location) else { return nil }
            return CoverImage.mediaType(of: bytes) == nil ? nil : bytes
        }
        func refusal(_ message: String) -> CatalogError {
            CatalogError(.badContent, file: entry.file, productID: entry.product.id, field: "cover", message: message)
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? nil
        guard let size else { throw refusal("\(file.path) cannot be read; check the path and its permissions") }
        guard size <= CoverImage.maxBytes else {
            throw refusal("\(file.path) is \(size) bytes; a cover may be at most \(CoverImage.maxBytes >> 20) MiB, so make it smaller")
        }
        let bytes: Data
        do {
            bytes = try Data(contentsOf: file)
        } catch {
            throw refusal("\(file.path) cannot be read (\(error)); check its permissions")
        }
        guard CoverImage.mediaType(of: bytes) != nil else {
            throw refusal("\(file.path) is not a JPEG, PNG, GIF or WebP image; give the cover as one of those")
        }
        return bytes
    }

    /// A catalog whose document is already made: `kiosk publish`'s `catalog.json`, served byte for
    /// byte so that every instance gives it the same ETag; with its gzip form when that was kept too.
    init(products: [String: Product], archives: [String: PackedContent], body: Data, gzippedBody: Data? = nil, covers: [String: URL] = [:]) throws {
        let digest = FileDigest.sha256(of: body)
        self.products = products
        self.archives = archives
        self.covers = covers
        self.productsByAppStoreID = Dictionary(
            products.values.compactMap { product in product.appStoreProductId.map { ($0, product.id) } },
            uniquingKeysWith: { first, _ in first })
        self.productsByPlayID = Dictionary(
            products.values.compactMap { product in product.playProductId.map { ($0, product.id) } },
            uniquingKeysWith: { first, _ in first })
        self.body = body
        self.gzippedBody = try gzippedBody ?? Gzip.compress(body)
        // The gzip body is a different representation, so it gets a different strong tag.
        self.etag = "\"\(digest)\""
        self.gzipETag = "\"\(digest)-gzip\""
        // Twelve small reads a file, once a load: EPUB, PDF and CBZ, the files a reading app opens.
        // Two products selling the same file are one name: the first by ID, the same on every instance.
        var byDocument: [String: String] = [:]
        for (id, packed) in archives.sorted(by: { $0.key < $1.key }) where products[id]?.content?.format.deliveredAsFile == true {
            if let document = try? KOReaderDigest.of(packed.file), byDocument[document] == nil { byDocument[document] = id }
        }
        self.productsByDocument = byDocument
    }
}
