import Foundation
import KioskCore
import KioskTransfer

/// What a catalog sync changed in the local cache.
public struct SyncReport: Sendable, Equatable {
    public var added: [String] = []
    public var changed: [String] = []
    public var removed: [String] = []
    /// The server answered 304: the cache was already current.
    public var notModified = false
    /// Issues an active subscription covers, queued for download by this sync.
    public var queued: [String] = []

    public init(added: [String] = [], changed: [String] = [], removed: [String] = [], notModified: Bool = false, queued: [String] = []) {
        self.added = added
        self.changed = changed
        self.removed = removed
        self.notModified = notModified
        self.queued = queued
    }
}

/// Brings the local catalog cache up to date with `GET /v1/catalog`.
struct CatalogSync {
    let database: ClientDatabase
    let http: HTTPClient
    let server: String
    /// The largest catalog accepted, after decompression.
    var maxBytes = 64 << 20

    /// Fetches the catalog (conditionally after the first time) and replaces the cache in one transaction.
    func sync() async throws -> SyncReport {
        let url = server + "/v1/catalog"
        let etag = try database.setting(Setting.Key.catalogETag)
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let etag { headers.append(("If-None-Match", etag)) }

        let response: HTTPResponse
        do {
            response = try await http.send(HTTPRequest(url: url, headers: headers, maxResponseBytes: maxBytes))
        } catch let error as TransferError where error.kind == .tooLarge {
            throw ClientError.badResponse(url: url, detail: "\(error.message); the catalog was refused and the local one kept")
        } catch let error as TransferError {
            throw ClientError.serverUnreachable(url: url, detail: error.message)
        }
        if response.status == 304 {
            try database.markCatalogFresh(at: Date())
            return SyncReport(notModified: true)
        }
        guard response.status == 200 else {
            throw StoreAPI.error(from: response, url: url)
        }
        // Read and stored a product at a time, in the cache's transaction: a document wrong
        // anywhere (or naming an unsafe product ID) leaves the cache as it was.
        do {
            // Sized for the document (a product is at least ~100 bytes), so 100,000 IDs are not rehashed as the set grows.
            var seen = Set<String>(minimumCapacity: min(response.body.count / 100, 1 << 20))
            return try database.replaceCatalog(etag: response.headers["etag"], syncedAt: Date()) { store in
                try CatalogReader.forEachProduct(in: response.body) { product, json in
                    guard ProductID.isValid(product.id) else {
                        throw ClientError.unsafeProductID(product.id, source: "the catalog from \(url)")
                    }
                    guard seen.insert(product.id).inserted else {
                        throw ClientError.badResponse(url: url, detail: "the catalog names \(product.id) twice; the local catalog was kept")
                    }
                    try store(product, json)
                }
            }
        } catch let error as CatalogReadError {
            throw ClientError.badResponse(url: url, detail: "\(error); the local catalog was kept")
        }
    }
}
