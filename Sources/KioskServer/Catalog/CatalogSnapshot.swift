import Foundation
import KioskArchive
import KioskCore
import Logging

/// What a server packing the catalog and content folders keeps in its data folder so that
/// starting again with nothing changed skips validating, encoding and compressing the catalog
/// (4–5 s for 100,000 products): the document it last built, its gzip twin, and a key naming
/// what they were built from.
///
/// ```
/// DATA/catalog-snapshot/catalog.json      the document GET /v1/catalog sent
/// DATA/catalog-snapshot/catalog.json.gz   its gzip form
/// DATA/catalog-snapshot/key.json          the catalog folders' digest, both files' SHA-256,
///                                         and each product's content source
/// ```
///
/// The snapshot is used only when the key's format is this Kiosk's, the catalog files digest the
/// same, both documents match the SHA-256 the key names, and the content store finds every
/// archive's source unchanged. Anything else (an edited catalog, content changed in its folder, a
/// missing or torn file) builds from the folders as before and writes a new snapshot. The key is
/// written last and names the digests of the documents, so two servers writing at once or a crash
/// half-way leave at worst a snapshot the next start refuses.
///
/// **Performance layer.** Replaces validating, encoding and compressing the whole
/// catalog at every start. The figure (docs/benchmarks.md, 100,000 products, 2026-11-22): a start
/// with nothing changed 0.59 s, against 3.2–8.2 s before (a first start from the folders: 2.82 s).
struct CatalogSnapshot: Sendable {
    let directory: URL
    let logger: Logger

    /// Bumped whenever what the loader accepts or the document's shape changes, so a snapshot an
    /// older Kiosk wrote is never served by a newer one.
    /// 2: products carry their content's manifestSha256. 3: products carry their cover, and file
    /// publications a chunk manifest.
    static let format = 3

    struct Key: Codable {
        var format: Int
        /// ``KioskCore/CatalogLoader/digest()`` of the folders the document was built from.
        var catalog: String
        var body: String
        var gzip: String
        /// Where each product's content came from, for the content store to check it is unchanged.
        var sources: [String: Source]
        /// The cover file each product's catalog entry names, read again to check it is unchanged.
        var covers: [String: String]?
    }

    struct Source: Codable {
        var path: String
        var isFolder: Bool
        var format: ArchiveFormat
    }

    init(dataDirectory: URL, logger: Logger) {
        directory = dataDirectory.appendingPathComponent("catalog-snapshot", isDirectory: true)
        self.logger = logger
    }

    var bodyFile: URL { directory.appendingPathComponent("catalog.json") }
    var gzipFile: URL { directory.appendingPathComponent("catalog.json.gz") }
    var keyFile: URL { directory.appendingPathComponent("key.json") }

    /// The catalog saved for folders with digest `catalogDigest`, or nil when there is none or it
    /// is stale. Each archive is asked of the content store, which re-packs a changed source (and
    /// then the snapshot is stale: its document names the old archive).
    func load(catalogDigest: String, contentStore: ContentStore) -> PublishedCatalog? {
        guard let keyBytes = try? Data(contentsOf: keyFile) else { return nil }
        do {
            let key = try JSONDecoder().decode(Key.self, from: keyBytes)
            guard key.format == Self.format, key.catalog == catalogDigest else { throw Stale("the catalog folders changed") }
            let body = try Data(contentsOf: bodyFile)
            let gzip = try Data(contentsOf: gzipFile)
            guard FileDigest.sha256(of: body) == key.body, FileDigest.sha256(of: gzip) == key.gzip else {
                throw Stale("its documents are not the ones its key names")
            }
            var products: [String: Product] = [:]
            var archives: [String: PackedContent] = [:]
            var covers: [String: URL] = [:]
            try CatalogReader.forEachProduct(in: body) { product, _ in
                products[product.id] = product
                if let cover = product.cover {
                    if let source = key.covers?[product.id] {
                        // A cover file edited in place leaves the catalog's digest as it was.
                        guard (try? FileDigest.sha256(of: URL(fileURLWithPath: source))) == cover.sha256 else { throw Stale("the cover of \(product.id) changed") }
                    }
                    let file = contentStore.coverFile(cover)
                    guard (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) == cover.size else { throw Stale("the cover of \(product.id) is gone") }
                    covers[product.id] = file
                }
                guard let content = product.content else { return }
                guard let source = key.sources[product.id] else { throw Stale("\(product.id) has no content source") }
                let packed = try contentStore.prepare(
                    productID: product.id,
                    source: ContentSource(location: URL(fileURLWithPath: source.path), isFolder: source.isFolder, format: source.format)).packed
                guard packed.sha256 == content.sha256, packed.size == content.size, packed.manifestSha256 == content.manifestSha256 else { throw Stale("the content of \(product.id) changed") }
                archives[product.id] = packed
            }
            return try PublishedCatalog(products: products, archives: archives, body: body, gzippedBody: gzip, covers: covers)
        } catch {
            logger.info("catalog snapshot not used; building from the folders", metadata: ["reason": "\(error)"])
            return nil
        }
    }

    /// Keeps `catalog`, built from `entries` of folders with digest `catalogDigest`, for the next
    /// start. A snapshot only saves time: failing to write one is logged, never fatal.
    func save(_ catalog: PublishedCatalog, entries: [CatalogEntry], catalogDigest: String) {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var sources: [String: Source] = [:]
            for entry in entries {
                guard let content = entry.content else { continue }
                sources[entry.product.id] = Source(path: content.location.path, isFolder: content.isFolder, format: content.format)
            }
            let key = Key(
                format: Self.format, catalog: catalogDigest, body: FileDigest.sha256(of: catalog.body),
                gzip: FileDigest.sha256(of: catalog.gzippedBody), sources: sources,
                covers: Dictionary(entries.compactMap { entry in entry.cover.map { (entry.product.id, $0.path) } }) { first, _ in first })
            // Each file whole (written beside, renamed in), the key last.
            try catalog.gzippedBody.write(to: gzipFile, options: .atomic)
            try catalog.body.write(to: bodyFile, options: .atomic)
            try JSONEncoder.kiosk.encode(key).write(to: keyFile, options: .atomic)
        } catch {
            logger.warning("could not save the catalog snapshot; the next start builds from the folders again", metadata: ["error": "\(error)"])
        }
    }

    /// Why a snapshot was not used (logged, never shown as an error).
    struct Stale: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
