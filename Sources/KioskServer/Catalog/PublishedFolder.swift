import Foundation
import KioskArchive
import KioskCore
import Logging

/// An origin folder made by `kiosk publish`: the store packed once, for every instance and any CDN.
///
/// ```
/// OUT/catalog.json                  the catalog document, byte for byte what GET /v1/catalog sends
/// OUT/catalog.json.gz               the same, gzipped (for nginx's gzip_static)
/// OUT/archives/<sha256>.<ext>       every archive, named by its SHA-256, never rewritten
/// OUT/.kiosk/                       what publish remembers to pack only what changed next time
/// ```
///
/// Archives are written first and the catalog last (renamed into place), so a reader of the folder
/// never sees a catalog that names an archive not there yet. Archives of earlier versions stay:
/// resumes and CDN caches may still ask for them.
public struct PublishedFolder: Sendable {
    public let url: URL

    public init(_ url: URL) { self.url = url }

    public var catalogFile: URL { url.appendingPathComponent("catalog.json") }
    /// The same document gzipped, for web servers that send it as it is (nginx's gzip_static).
    public var gzippedCatalogFile: URL { url.appendingPathComponent("catalog.json.gz") }
    public var archives: URL { url.appendingPathComponent("archives", isDirectory: true) }
    var state: URL { url.appendingPathComponent(".kiosk", isDirectory: true) }

    /// Packs the catalog and content folders into this folder.
    /// - Returns: what was published.
    /// - Throws: ``PublishedFolderError`` when this folder overlaps the catalog or the content
    ///   folder (nothing is written), ``KioskCore/CatalogError`` for a bad catalog (nothing is
    ///   published), or a packing error.
    /// - Parameter removing: withdrawn products the operator takes away from their owners on purpose.
    @discardableResult
    public func publish(catalog: URL, content: URL, removing: [String] = [], logger: Logger) throws -> PublishedCatalog {
        try refuseOverlap(with: catalog, named: "catalog")
        try refuseOverlap(with: content, named: "content")
        try FileManager.default.createDirectory(at: archives, withIntermediateDirectories: true)
        // The state folder also holds the catalog while it is written, even when nothing is packed.
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let entries = try CatalogLoader(catalogDirectory: catalog, contentDirectory: content).load()
        let store = ContentStore(archives: archives, state: state, logger: logger)
        let registryFile = PublishedProductsFile(stateDirectory: state)
        let loaded = try registryFile.load()
        var registry = loaded
        let fromFiles = Set(entries.map(\.product.id))
        for id in removing { registry = try WithdrawnProducts.remove(id, stillInFiles: fromFiles.contains(id), from: registry) }
        let (published, updated) = try WithdrawnProducts(contentStore: store)
            .carryForward(into: PublishedCatalog(entries: entries, contentStore: store), registry: registry, logger: logger)
        if updated != loaded || !registryFile.exists { try registryFile.save(updated) }
        // The gzip twin first, for nginx's gzip_static (deploy/nginx.conf answers GET /v1/catalog
        // from these files); each file is renamed into place whole, so every response is one
        // whole document, old or new.
        try replace(gzippedCatalogFile, with: published.gzippedBody)
        try replace(catalogFile, with: published.body)
        return published
    }

    /// Refuses an output folder that is, contains or lies inside `folder`: publishing into the
    /// catalog folder leaves a `catalog.json` that is not a product list, and inside the content
    /// folder an `archives/` folder that is not a product's content, so every later start fails.
    /// Both paths are compared with symlinks and `..` resolved, so no spelling slips past.
    private func refuseOverlap(with folder: URL, named role: String) throws {
        let out = Self.resolved(url)
        let other = Self.resolved(folder)
        let relation: String
        if out == other {
            relation = "is the \(role) folder"
        } else if out.hasPrefix(other.hasSuffix("/") ? other : other + "/") {
            relation = "is inside the \(role) folder \(other)"
        } else if other.hasPrefix(out.hasSuffix("/") ? out : out + "/") {
            relation = "contains the \(role) folder \(other)"
        } else {
            return
        }
        throw PublishedFolderError(path: out, problem: relation,
            action: "publish to a folder outside both the catalog and the content folders (--out)")
    }

    /// The absolute path of `url` with symlinks and `..` resolved, for a path that may not exist
    /// yet: the longest part that exists is resolved by the file system, the rest by its text.
    static func resolved(_ url: URL) -> String {
        var existing = url.absoluteURL.path
        var rest: [String] = []
        while !FileManager.default.fileExists(atPath: existing), existing != "/" {
            rest.insert((existing as NSString).lastPathComponent, at: 0)
            existing = (existing as NSString).deletingLastPathComponent
        }
        var components = (realpath(existing, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        } ?? existing).split(separator: "/").map(String.init)
        for component in rest where component != "." {
            if component == ".." { _ = components.popLast() } else { components.append(component) }
        }
        return "/" + components.joined(separator: "/")
    }

    private func replace(_ file: URL, with contents: Data) throws {
        let temporary = state.appendingPathComponent("\(file.lastPathComponent)-\(UUID().uuidString)")
        try contents.write(to: temporary)
        guard rename(temporary.path, file.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw ContentStoreError(path: file.path, message: reason)
        }
    }

    /// The published catalog, each archive it names checked to be there with its size (not
    /// re-hashed: publish named it by its SHA-256, and clients check the bytes anyway).
    /// - Throws: ``PublishedFolderError`` naming what is missing or unreadable.
    public func load() throws -> PublishedCatalog {
        let body: Data
        do {
            body = try Data(contentsOf: catalogFile)
        } catch {
            throw PublishedFolderError(path: catalogFile.path, problem: "cannot be read", action: "run kiosk publish --out \(url.path) first")
        }
        let read: [Product]
        do {
            read = try CatalogReader.products(in: body)
        } catch {
            throw PublishedFolderError(path: catalogFile.path, problem: "is not a catalog document (\(error))", action: "publish again with kiosk publish")
        }
        var products: [String: Product] = Dictionary(minimumCapacity: read.count)
        var packed: [String: PackedContent] = [:]
        var covers: [String: URL] = [:]
        for product in read {
            products[product.id] = product
            if let cover = product.cover {
                let file = archives.appendingPathComponent(ContentStore.coverName(cover))
                guard (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) == cover.size else {
                    throw PublishedFolderError(path: file.path, problem: "is missing or not the cover the catalog names for \(product.id)",
                                               action: "copy the whole published folder again, or run kiosk publish again")
                }
                covers[product.id] = file
            }
            guard let content = product.content else { continue }
            let file = archives.appendingPathComponent("\(content.sha256).\(content.format.fileExtension)")
            let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) ?? nil
            guard size == content.size else {
                throw PublishedFolderError(path: file.path, problem: size == nil ? "is missing (the catalog names it for \(product.id))" : "has \(size ?? 0) bytes, not the \(content.size) the catalog says",
                    action: "copy the whole published folder again, or run kiosk publish again")
            }
            let manifest = archives.appendingPathComponent(ContentStore.manifestName(content.sha256))
            packed[product.id] = PackedContent(file: file, size: content.size, sha256: content.sha256,
                                               manifestFile: content.manifestSha256 == nil ? nil : manifest, manifestSha256: content.manifestSha256)
        }
        return try PublishedCatalog(products: products, archives: packed, body: body, covers: covers)
    }
}

/// A published folder that cannot be served as it is.
public struct PublishedFolderError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String
    public var action: String
    public var description: String { "\(path): \(problem); \(action)" }
}
