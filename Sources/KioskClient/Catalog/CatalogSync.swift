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
    let server: StoreServer
    /// Where the body waits while it arrives (the kiosk home).
    let spoolFolder: URL
    /// The largest catalog accepted, after decompression.
    var maxBytes = 64 << 20

    /// A product of the cached catalog, nil when the last sync did not list it.
    func cachedProduct(_ id: String) throws -> Product? {
        try database.cachedProduct(id)
    }

    /// Fetches the catalog (conditionally after the first time) and replaces the cache in one
    /// transaction.
    ///
    /// The body goes to a ``CatalogSpool`` as it arrives (no lock on the database while the server
    /// sends, and no memory its size); then, in the cache's transaction, it is stored a product at
    /// a time while ``CatalogReadAhead`` reads the next ones back through ``CatalogStream`` on
    /// another core. A document wrong anywhere, an unsafe product ID or an ID named twice leaves
    /// the cache as it was.
    func sync() async throws -> SyncReport {
        let url = try server.base() + "/v1/catalog"
        let etag = try database.settings.value(Setting.Key.catalogETag)
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let etag { headers.append(("If-None-Match", etag)) }

        let spool = try CatalogSpool(in: spoolFolder)
        let response: HTTPResponse
        do {
            response = try await http.send(HTTPRequest(url: url, headers: headers, maxResponseBytes: maxBytes), consumingSuccessfulBody: spool.append)
        } catch let error as TransferError where error.kind == .tooLarge {
            throw ClientError.badResponse(url: url, detail: "\(error.message); the catalog was refused and the local one kept")
        } catch let error as TransferError {
            throw ClientError.serverUnreachable(url: url, detail: error.message)
        }
        if response.status == 304 {
            try database.markCatalogFresh(at: Date())
            server.answered()
            return SyncReport(notModified: true)
        }
        guard response.status == 200 else {
            throw StoreAPI.error(from: response, url: url)
        }
        if response.headers["content-type"]?.lowercased().contains("html") == true {
            throw ClientError.notAStore(url: url, status: response.status, what: "a web page")
        }
        let report: SyncReport
        do {
            // A product is at least ~100 bytes: the ID table is sized so 100,000 IDs are not rehashed as it grows.
            report = try database.replaceCatalog(etag: response.headers["etag"], syncedAt: Date(), expectedProducts: min(spool.size / 100, 1 << 20)) { store in
                try CatalogReadAhead(spool: spool, source: "the catalog from \(url)").forEachProduct { id, json in
                    guard try store(id, json) else {
                        throw ClientError.badResponse(url: url, detail: "the catalog names \(id) twice; the local catalog was kept")
                    }
                }
            }
        } catch let error as CatalogReadError {
            if spool.size > 0, spool.startsWithMarkup() {
                throw ClientError.notAStore(url: url, status: response.status, what: "a web page")
            }
            throw ClientError.badResponse(url: url, detail: "\(error); the local catalog was kept")
        }
        server.answered()
        return report
    }
}
