import Foundation
internal import GRDB
import KioskCore

/// The one owner of `kiosk.sqlite`: every read the engine needs and every state transition.
///
/// The writer is private. Each transition of a transaction or a download is one method that
/// checks the current state inside the same SQLite transaction (`UPDATE … WHERE id = ? AND
/// state IN (…)`) and throws ``IllegalTransition`` naming both states when the row is elsewhere,
/// so a flow working from a stale copy can never move another flow's row backwards. Committed
/// changes are published on ``events`` for apps that follow the engine.
final class ClientDatabase: Sendable {
    private let writer: DatabasePool
    let path: String
    let events = EventHub()

    /// A small file kept beside the database and given up when the disk is full, so that the
    /// state changes that free space (cancel) or stop work (pause) can still be committed.
    private let reserve: URL

    /// Opens (or creates) the database at `url` and migrates it to the current schema.
    /// - Throws: ``ClientError/local(path:problem:action:)`` naming the file and what to do.
    init(url: URL) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A stored receipt must survive a power cut: sync every commit to disk.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        path = url.path
        reserve = url.deletingLastPathComponent().appendingPathComponent(".kiosk-reserve")
        do {
            writer = try DatabasePool(path: url.path, configuration: configuration)
            try Self.migrator.migrate(writer)
        } catch let error as DatabaseError {
            throw Self.explain(error, path: url.path)
        }
        Self.keepReserve(at: reserve)
    }

    /// Runs `body` in one write transaction. Only the owner's extensions call it.
    /// - Parameter mayUseReserve: false for writes that can be skipped (progress, lease renewals):
    ///   the reserve is kept for the state changes that must land, after the transfers have stopped.
    func write<T>(mayUseReserve: Bool = true, _ body: (Database) throws -> T) throws -> T {
        do {
            return try writer.write(body)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL && mayUseReserve && FileManager.default.fileExists(atPath: reserve.path) {
            // The disk is full: give up the reserve and commit this change in the room it leaves.
            try? FileManager.default.removeItem(at: reserve)
            do {
                return try writer.write(body)
            } catch let error as DatabaseError {
                throw Self.explain(error, path: path)
            }
        } catch let error as DatabaseError {
            throw Self.explain(error, path: path)
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try writer.read(body)
        } catch let error as DatabaseError {
            throw Self.explain(error, path: path)
        }
    }

    /// SQLite's error as one line a person can act on, naming the file.
    static func explain(_ error: DatabaseError, path: String) -> ClientError {
        switch error.resultCode {
        case .SQLITE_FULL:
            return .local(path: path, problem: "the disk is full", action: "free some space, then run the command again; nothing was lost")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return .local(path: path, problem: "is damaged (\(error.message ?? "not a database"))",
                          action: "move it aside (mv \(path) \(path).damaged) and run kiosk restore to bring back every purchase from the store")
        case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            return .local(path: path, problem: "cannot be opened for writing (\(error.message ?? "read-only"))",
                          action: "make its folder writable, or choose another with --home or KIOSK_HOME")
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return .local(path: path, problem: "is busy in another kiosk process", action: "try again in a moment")
        case .SQLITE_IOERR:
            return .local(path: path, problem: "cannot be read or written (\(error.message ?? "I/O error"))",
                          action: "check the disk has free space and is writable, then run the command again")
        default:
            return .local(path: path, problem: "SQLite error \(error.resultCode.rawValue) (\(error.message ?? "unknown"))", action: "run the command again; if it persists, report it")
        }
    }

    /// Creates the reserve when it is missing and there is room for it.
    private static func keepReserve(at url: URL) {
        let size = 2 << 20
        guard !FileManager.default.fileExists(atPath: url.path),
              let available = DiskSpace.available(at: url.deletingLastPathComponent()), available > Int64(size) * 8 else { return }
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        if !Platform.reserve(descriptor, size: Int64(size)) {
            unlink(url.path)
        }
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
        migrator.registerMigration("v4-claims-retries-revocations") { db in
            try db.alter(table: PaymentRecord.databaseTableName) { table in
                table.add(column: "attempts", .integer).notNull().defaults(to: 0)
                table.add(column: "nextAttemptAt", .datetime)
                table.add(column: "revokedAt", .datetime)
                table.add(column: "revocationReason", .text)
            }
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                // Which process works on the download, and until when its claim holds unless renewed.
                table.add(column: "owner", .text)
                table.add(column: "leaseUntil", .datetime)
                // The transaction whose receipt is presented, so a revocation finds its content.
                table.add(column: "transactionId", .text)
            }
            try db.alter(table: LibraryItem.databaseTableName) { table in
                // Names and sizes of the installed files, to notice a damaged or missing folder.
                table.add(column: "treeDigest", .text)
            }
        }
        migrator.registerMigration("v5-catalog-by-id") { db in
            // Every read of the cache decodes the JSON; the kind and title columns were written
            // and never read. Keyed by ID alone (no rowid), a product is written to one B-tree,
            // not to a table and an index: 100,000 products take 26 MB, not 32 MB.
            try db.execute(sql: """
                CREATE TABLE product_by_id (id TEXT NOT NULL PRIMARY KEY, json BLOB NOT NULL) WITHOUT ROWID;
                INSERT INTO product_by_id (id, json) SELECT id, json FROM product;
                DROP TABLE product;
                ALTER TABLE product_by_id RENAME TO product;
                """)
        }
        migrator.registerMigration("v6-fenced-claims") { db in
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                // The claim's fence, and its lease on the monotonic clock instead of wall time.
                table.add(column: "claimGeneration", .integer).notNull().defaults(to: 0)
                table.add(column: "leaseBoot", .text)
                table.add(column: "leaseDeadline", .integer)
            }
        }
        migrator.registerMigration("v7-proof-kind") { db in
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                // The scheme the download's proof goes under: Kiosk's receipt (nil) or an App Store transaction.
                table.add(column: "proofKind", .text)
            }
        }
        // What an update by entries cost, for kiosk downloads ("update 1.2 MB of 212 MB (3 files changed)").
        migrator.registerMigration("v8-transfer-note") { db in
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                table.add(column: "transferNote", .text)
            }
        }
        // The store a purchase was made for (its URL, and the kids of its keys as this home knew
        // them then), and whether it was ever handed to the network: an unsent purchase is sent
        // only to its own store, and one never sent can be cancelled knowing nothing was charged.
        migrator.registerMigration("v9-purchase-store") { db in
            try db.alter(table: PaymentRecord.databaseTableName) { table in
                table.add(column: "storeURL", .text)
                table.add(column: "storeKeys", .text)
                table.add(column: "sentAt", .datetime)
            }
        }
        // A publication delivered as the file itself (issue 47): its name in the library.
        migrator.registerMigration("v10-publication-file") { db in
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                table.add(column: "fileName", .text)
            }
        }
        // The account a purchase was made for: a saved purchase is sent under no other (the
        // store's idempotency keys are each account's). One still waiting to be sent was made for
        // the account the home acts for now, since signing in or linking elsewhere was refused
        // while it waited; in a home with none (its device removed itself) it stays unbound, and
        // if it was sent it goes under no account.
        migrator.registerMigration("v11-purchase-account") { db in
            try db.alter(table: PaymentRecord.databaseTableName) { table in
                table.add(column: "accountId", .text)
            }
            try db.execute(sql: "UPDATE payment SET accountId = (SELECT value FROM setting WHERE key = ?) WHERE state = ?",
                           arguments: [Setting.Key.accountID, PaymentState.purchasing.rawValue])
        }
        // The store an account belongs to: until now the token went to whatever --server named.
        // An account saved before belongs to the store the home remembers.
        migrator.registerMigration("v12-account-store") { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO setting (key, value)
                SELECT ?, value FROM setting WHERE key = ? AND EXISTS (SELECT 1 FROM setting WHERE key = ?)
                """, arguments: [Setting.Key.accountStore, Setting.Key.server, Setting.Key.accountID])
        }
        // An offer code a purchase is sent with (issue 65).
        migrator.registerMigration("v13-purchase-offer-code") { db in
            try db.execute(sql: "ALTER TABLE payment ADD COLUMN offerCode TEXT")
        }
        migrator.registerMigration("v14-newsstand") { db in
            // A pin keeps a product's files whatever the keep rules say (``Newsstand``).
            try db.alter(table: DownloadRecord.databaseTableName) { table in
                table.add(column: "pinnedAt", .datetime)
            }
            // The reader's keep rule per title; a title without one keeps its frequency's default.
            try db.create(table: "keepRule") { table in
                table.primaryKey("series", .text)
                table.column("lastIssues", .integer)
                table.column("days", .integer)
                table.column("updatedAt", .datetime).notNull()
            }
        }
        return migrator
    }
}

/// A transition the row's current state does not allow; names both states.
public struct IllegalTransition: Error, Sendable, CustomStringConvertible {
    public var subject: String
    /// The state the row is in, or nil when there is no such row.
    public var current: String?
    public var target: String

    public var description: String {
        guard let current else { return "\(subject) does not exist, so it cannot become \(target)" }
        return "\(subject) is \(current) and cannot become \(target)"
    }
}

// MARK: The catalog cache, and the owners of the settings and the account

extension ClientDatabase {
    /// The home's settings; their one owner.
    var settings: HomeSettings { HomeSettings(database: self) }
    /// The account this home acts for; its one owner.
    var account: DeviceAccount { DeviceAccount(database: self) }

    func cachedProduct(_ id: String) throws -> Product? {
        try read { db in
            try CachedProduct.fetchOne(db, key: id).flatMap { try? CatalogReader.product(from: $0.json) }
        }
    }

    /// Calls `body` with each cached product in ID order, one decoded at a time (a catalog of
    /// 100,000 is never held whole); products that no longer decode are skipped.
    func forEachCachedProduct(_ body: (Product) throws -> Void) throws {
        try read { db in
            let rows = try Data.fetchCursor(db, sql: "SELECT json FROM product ORDER BY id")
            while let json = try rows.next() {
                if let product = try? CatalogReader.product(from: json) { try body(product) }
            }
        }
    }

    func cachedProductCount() throws -> Int {
        try read { db in try CachedProduct.fetchCount(db) }
    }

    func cachedProducts() throws -> [Product] {
        var products: [Product] = []
        try forEachCachedProduct { products.append($0) }
        return products
    }

    /// Replaces the catalog cache with the products `read` hands to its argument, one at a time
    /// with the bytes each was sent as, and remembers the ETag: all in one transaction, so an
    /// error anywhere (thrown by `read` too) leaves the cache as it was. The store function
    /// returns false, storing nothing, for an ID it was given before in this replacement.
    /// - Parameter expectedProducts: about how many products `read` will give (sizes the ID table).
    func replaceCatalog(etag: String?, syncedAt: Date, expectedProducts: Int = 0, read: (_ store: (_ id: String, _ json: UnsafeRawBufferPointer) throws -> Bool) throws -> Void) throws -> SyncReport {
        try write { db in
            // One statement a product (ProductUpsert), and one catalog in memory at a time
            // however large: the upsert tells a changed product from an unchanged one, and the IDs
            // cached before tell an added one. Comparing the bytes as sent spares encoding each
            // product again. One table of IDs, cached before or named now (the flag: named now),
            // tells added, removed and named twice: a second table would hold 100,000 IDs again.
            var report = SyncReport()
            var named = [String: Bool](minimumCapacity: expectedProducts)
            let cached = try String.fetchCursor(db, sql: "SELECT id FROM product")
            while let id = try cached.next() { named[id] = false }
            let upsert = try ProductUpsert(db)
            try read { id, json in
                let wasCached = named.updateValue(true, forKey: id)
                guard wasCached != true else { return false }
                let written = try upsert.run(id: id, json: json, in: db)
                if wasCached == nil {
                    report.added.append(id)
                } else if written {
                    report.changed.append(id)
                }
                return true
            }
            report.removed = named.compactMap { $0.value ? nil : $0.key }.sorted()
            let delete = try db.cachedStatement(sql: "DELETE FROM product WHERE id = ?")
            for id in report.removed {
                try delete.execute(arguments: [id])
            }
            if let etag { try Setting.set(Setting.Key.catalogETag, to: etag, in: db) }
            try Setting.set(Setting.Key.catalogSyncedAt, to: syncedAt.formatted(.iso8601), in: db)
            return report
        }
    }

    func markCatalogFresh(at date: Date) throws {
        try settings.set(Setting.Key.catalogSyncedAt, to: date.formatted(.iso8601))
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
        /// The email the account signs in with, when this device signed in with one.
        static let accountEmail = "account.email"
        static let jwks = "store.jwks"
        static let paymentsEnabled = "payments.enabled"
        /// The last change number of the account's change feed this home has seen (``BackgroundAgent``).
        static let feedCursor = "feed.cursor"
        /// The change number up to which replay has applied the store's view (revocations, Ask
        /// to Buy answers): the next replay reads only the changes after it.
        static let replayCursor = "replay.cursor"
        /// Both cursors count one account's changes: a new account starts them again.
        static let accountCursors = [feedCursor, replayCursor]
        /// How the store sells (`GET /v1/store`) with its entity tag, as ``KeptStoreDescription`` JSON.
        static let storeDescription = "store.description"
        /// The tag of `GET /v1/store` the store's change feed last named: the kept description
        /// is current while its tag is this one.
        static let storeTagNamed = "store.tagNamed"
        /// The store the account's token was issued by (its URL as this home last reached it):
        /// the token is sent to no other store.
        static let accountStore = "account.store"
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
    var json: Data
}
