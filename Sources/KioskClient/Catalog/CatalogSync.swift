import Foundation
import GRDB
import KioskCore
import KioskTransfer

/// What a catalog sync changed in the local cache.
public struct SyncReport: Sendable, Equatable {
    public var added: [String] = []
    public var changed: [String] = []
    public var removed: [String] = []
    /// The server answered 304: the cache was already current.
    public var notModified = false

    public init(added: [String] = [], changed: [String] = [], removed: [String] = [], notModified: Bool = false) {
        self.added = added
        self.changed = changed
        self.removed = removed
        self.notModified = notModified
    }
}

/// Brings the local catalog cache up to date with `GET /v1/catalog`.
struct CatalogSync {
    let database: ClientDatabase
    let http: HTTPClient
    let server: String

    /// Fetches the catalog (conditionally after the first time) and replaces the cache in one transaction.
    func sync() async throws -> SyncReport {
        let url = server + "/v1/catalog"
        let etag = try await database.pool.read { try Setting.value(Setting.Key.catalogETag, in: $0) }
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let etag { headers.append(("If-None-Match", etag)) }

        let response: HTTPResponse
        do {
            response = try await http.send(HTTPRequest(url: url, headers: headers))
        } catch let error as TransferError {
            throw ClientError.serverUnreachable(url: url, detail: error.message)
        }
        if response.status == 304 {
            try await database.pool.write { db in
                try Setting.set(Setting.Key.catalogSyncedAt, to: Self.now(), in: db)
            }
            return SyncReport(notModified: true)
        }
        guard response.status == 200 else {
            throw StoreAPI.error(from: response, url: url)
        }
        let document: CatalogDocument
        do {
            document = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: response.body)
        } catch {
            throw ClientError.badResponse(url: url, detail: "\(error)")
        }
        return try await database.pool.write { db in
            let report = try Self.replaceCache(with: document.products, in: db)
            if let newTag = response.headers["etag"] {
                try Setting.set(Setting.Key.catalogETag, to: newTag, in: db)
            }
            try Setting.set(Setting.Key.catalogSyncedAt, to: Self.now(), in: db)
            return report
        }
    }

    /// Writes the new product list and reports what differs from the old one.
    static func replaceCache(with products: [Product], in db: Database) throws -> SyncReport {
        var old: [String: Data] = [:]
        for row in try CachedProduct.fetchAll(db) { old[row.id] = row.json }
        var report = SyncReport()
        let encoder = JSONEncoder.kiosk
        var seen = Set<String>()
        for product in products {
            seen.insert(product.id)
            let json = try encoder.encode(product)
            switch old[product.id] {
            case nil: report.added.append(product.id)
            case json?: continue
            default: report.changed.append(product.id)
            }
            try CachedProduct(id: product.id, kind: product.kind.rawValue, title: product.title, json: json).save(db)
        }
        report.removed = old.keys.filter { !seen.contains($0) }.sorted()
        for id in report.removed {
            _ = try CachedProduct.deleteOne(db, key: id)
        }
        return report
    }

    static func now() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}
