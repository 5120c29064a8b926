import Foundation
import GRDB

/// The client's one SQLite database (WAL), with named forward-only migrations.
public struct ClientDatabase: Sendable {
    public let pool: DatabasePool

    /// Opens (or creates) the database at `url` and migrates it to the current schema.
    public init(url: URL) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A stored receipt must survive a power cut: sync every commit to disk.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        pool = try DatabasePool(path: url.path, configuration: configuration)
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-settings-and-catalog") { db in
            try db.create(table: Setting.databaseTableName) { table in
                table.primaryKey("key", .text)
                table.column("value", .text).notNull()
            }
            try db.create(table: CachedProduct.databaseTableName) { table in
                table.primaryKey("id", .text)
                table.column("kind", .text).notNull()
                table.column("title", .text).notNull()
                table.column("json", .blob).notNull()
            }
        }
        migrator.registerMigration("v2-payments") { db in
            try db.create(table: PaymentRecord.databaseTableName) { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("idempotencyKey", .text).unique()
                table.column("productId", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("quantity", .integer).notNull()
                table.column("paymentMethod", .text).notNull()
                table.column("state", .text).notNull().indexed()
                table.column("transactionId", .text).unique()
                table.column("originalTransactionId", .text)
                table.column("receipt", .text)
                table.column("lastError", .text)
                table.column("createdAt", .datetime).notNull()
                table.column("updatedAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v3-downloads-and-library") { db in
            try db.create(table: DownloadRecord.databaseTableName) { table in
                table.primaryKey("productId", .text)
                table.column("state", .text).notNull().indexed()
                table.column("sha256", .text).notNull()
                table.column("size", .integer).notNull()
                table.column("version", .text).notNull()
                table.column("format", .text).notNull()
                table.column("receipt", .text).notNull()
                table.column("bytesDone", .integer).notNull().defaults(to: 0)
                table.column("partialETag", .text)
                table.column("attempts", .integer).notNull().defaults(to: 0)
                table.column("nextAttemptAt", .datetime)
                table.column("lastError", .text)
                table.column("mismatches", .integer).notNull().defaults(to: 0)
                table.column("createdAt", .datetime).notNull()
                table.column("updatedAt", .datetime).notNull()
            }
            try db.create(table: LibraryItem.databaseTableName) { table in
                table.primaryKey("productId", .text)
                table.column("version", .text).notNull()
                table.column("sha256", .text).notNull()
                table.column("path", .text).notNull()
                table.column("installedAt", .datetime).notNull()
            }
        }
        return migrator
    }
}

/// One remembered value: the server URL, the catalog's ETag, when it was last synced.
struct Setting: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "setting"
    var key: String
    var value: String

    enum Key {
        static let server = "server"
        static let catalogETag = "catalog.etag"
        static let catalogSyncedAt = "catalog.syncedAt"
        static let accountID = "account.id"
        static let accountToken = "account.token"
        static let jwks = "store.jwks"
        static let paymentsEnabled = "payments.enabled"
    }

    static func value(_ key: String, in db: Database) throws -> String? {
        try Setting.fetchOne(db, key: key)?.value
    }

    static func set(_ key: String, to value: String, in db: Database) throws {
        try Setting(key: key, value: value).save(db)
    }
}

/// A product of the last synced catalog, kept whole as the JSON the server sent.
struct CachedProduct: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "product"
    var id: String
    var kind: String
    var title: String
    var json: Data
}
