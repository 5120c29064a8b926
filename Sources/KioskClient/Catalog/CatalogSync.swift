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

    /// Fetches the catalog (conditionally after the first time) and makes the cache equal to it
    /// in one transaction.
    ///
    /// The document is read as it arrives, a product at a time (``CatalogStream``), and set aside
    /// (``CatalogStaging``): a catalog of any size costs the memory of a batch, and the cache is
    /// replaced only once the whole document has read well. A document wrong anywhere, an unsafe
    /// product ID or an ID named twice leaves the cache as it was.
    func sync() async throws -> SyncReport {
        let url = server + "/v1/catalog"
        let etag = try database.setting(Setting.Key.catalogETag)
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let etag { headers.append(("If-None-Match", etag)) }

        let intake = CatalogIntake(staging: CatalogStaging(database: database), url: url)
        defer { intake.staging.discard() }
        do {
            let response = try await http.send(HTTPRequest(url: url, headers: headers, maxResponseBytes: maxBytes), consumingSuccessfulBody: intake.receive)
            if response.status == 304 {
                try database.markCatalogFresh(at: Date())
                return SyncReport(notModified: true)
            }
            guard response.status == 200 else {
                throw StoreAPI.error(from: response, url: url)
            }
            try intake.finish()
            return try intake.staging.commit(etag: response.headers["etag"], syncedAt: Date())
        } catch let error as TransferError where error.kind == .tooLarge {
            throw ClientError.badResponse(url: url, detail: "\(error.message); the catalog was refused and the local one kept")
        } catch let error as TransferError {
            throw ClientError.serverUnreachable(url: url, detail: error.message)
        } catch let error as CatalogReadError {
            throw ClientError.badResponse(url: url, detail: "\(error); the local catalog was kept")
        } catch let error as CatalogStaging.DuplicateProduct {
            throw ClientError.badResponse(url: url, detail: "the catalog names \(error.id) twice; the local catalog was kept")
        }
    }
}

/// Reads the catalog as libcurl delivers it and sets each product aside.
///
/// `@unchecked Sendable`: the transfer's thread calls ``receive(_:)`` while `sync` awaits the
/// transfer, and `sync` uses it only after the transfer has ended; never two threads at once.
private final class CatalogIntake: @unchecked Sendable {
    let staging: CatalogStaging
    let url: String
    private var stream = CatalogStream()

    init(staging: CatalogStaging, url: String) {
        self.staging = staging
        self.url = url
    }

    func receive(_ piece: UnsafeRawBufferPointer) throws {
        try stream.read(piece) { product, json in
            guard ProductID.isValid(product.id) else {
                throw ClientError.unsafeProductID(product.id, source: "the catalog from \(url)")
            }
            try staging.add(product, json: json)
        }
    }

    /// The body has ended: it must have been a whole catalog.
    func finish() throws {
        try stream.finish()
    }
}
