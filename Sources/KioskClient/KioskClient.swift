import Foundation
import GRDB
import KioskCore
import KioskTransfer
import Logging

/// The client engine behind every `kiosk` command: one KIOSK_HOME, one server.
public struct KioskClient: Sendable {
    public let home: KioskHome
    let database: ClientDatabase
    let http = HTTPClient()
    let logger: Logger

    /// Opens the state in `home`, creating it on first use.
    public init(home: KioskHome, logger: Logger = Logger(label: "kiosk.client")) throws {
        try home.prepare()
        self.home = home
        self.database = try ClientDatabase(url: home.database)
        self.logger = logger
    }

    // MARK: Server

    /// The server URL to use: `explicit` (remembered for next time), else the remembered one.
    /// - Throws: ``ClientError/noServer`` when neither exists.
    public func server(explicit: String?) async throws -> String {
        if let explicit, !explicit.isEmpty {
            let url = explicit.hasSuffix("/") ? String(explicit.dropLast()) : explicit
            try await database.pool.write { try Setting.set(Setting.Key.server, to: url, in: $0) }
            return url
        }
        guard let remembered = try await database.pool.read({ try Setting.value(Setting.Key.server, in: $0) }) else {
            throw ClientError.noServer
        }
        return remembered
    }

    // MARK: Catalog

    /// Syncs the catalog cache with the server.
    public func syncCatalog(server: String) async throws -> SyncReport {
        try await CatalogSync(database: database, http: http, server: server).sync()
    }

    /// The cached catalog, sorted by product ID, and when it was last synced (nil: never).
    public func cachedCatalog() async throws -> (products: [Product], syncedAt: Date?) {
        try await database.pool.read { db in
            let decoder = JSONDecoder.kiosk
            let products = try CachedProduct.order(Column("id")).fetchAll(db).map {
                try decoder.decode(Product.self, from: $0.json)
            }
            let syncedAt = try Setting.value(Setting.Key.catalogSyncedAt, in: db)
                .flatMap { ISO8601DateFormatter().date(from: $0) }
            return (products, syncedAt)
        }
    }
}
