import Foundation
import KioskCore
import SQLKit

/// Where each reader is in each book, as the devices that read it say: KOReader's progress sync
/// (kosync) writes and reads it. One row per account and document, the newest write standing,
/// with the device that wrote it; the one writer of `readingProgress` and `documentAlias`.
///
/// A document is the store's product when the store delivered that file (``KOReaderDigest``, in
/// the catalog served now or remembered from an earlier edition in `documentAlias`, so an update
/// of the book keeps the reader's place), else the digest as the device sent it: a book from
/// elsewhere syncs too, as on any kosync server.
public struct ReadingProgress: StoreOwner {
    let base: StoreBase

    /// One stored position, as kosync answers it.
    public struct Position: Codable, Sendable, Equatable {
        public var document: String
        public var progress: String
        public var percentage: Double
        public var device: String
        public var deviceId: String
        /// When the store took it, in whole seconds since 1970 (kosync's `timestamp`).
        public var timestamp: Int64
        /// An OPDS Progression app's own references into the publication, as it sent them, and
        /// its title of the place; nil from KOReader, whose place is `progress`.
        public var references: [String]?
        public var title: String?

        public init(document: String, progress: String, percentage: Double, device: String, deviceId: String, timestamp: Int64,
                    references: [String]? = nil, title: String? = nil) {
            (self.document, self.progress, self.percentage, self.device, self.deviceId, self.timestamp) = (document, progress, percentage, device, deviceId, timestamp)
            (self.references, self.title) = (references, title)
        }
    }

    /// A stored row: the references kept as a JSON list.
    private struct Row: Decodable {
        var progress: String
        var percentage: Double
        var device: String
        var deviceId: String
        var timestamp: Int64
        var references: String?
        var title: String?

        func position(_ document: String) -> Position {
            Position(document: document, progress: progress, percentage: percentage, device: device, deviceId: deviceId, timestamp: timestamp,
                     references: references.flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) }, title: title)
        }
    }

    /// Keeps `documents` (KOReader digest → product) as aliases that outlive the catalog: a
    /// device holding last month's edition still names the book. Idempotent; every instance may.
    public func remember(documents: [String: String]) async throws {
        guard !documents.isEmpty else { return }
        try await database.write { db in
            for (document, productId) in documents.sorted(by: { $0.key < $1.key }) {
                try await db.raw(#"""
                    INSERT INTO "documentAlias" ("document", "productId") VALUES (\#(bind: document), \#(bind: productId))
                    ON CONFLICT ("document") DO NOTHING
                    """#).run()
            }
        }
    }

    /// The key a document is kept under for an account: `product:ID` for a file the store
    /// delivered (now or in an earlier edition), else the digest itself.
    public func key(of document: String, current: [String: String]) async throws -> String {
        if let productId = current[document] { return "product:" + productId }
        struct Alias: Decodable { var productId: String }
        let alias = try await database.read { db in
            try await db.raw(#"SELECT "productId" FROM "documentAlias" WHERE "document" = \#(bind: document)"#).first(decoding: Alias.self)
        }
        return alias.map { "product:" + $0.productId } ?? document
    }

    /// Records a position; the newest write stands. Returns it as stored, with the store's time.
    public func record(accountId: String, key: String, document: String, progress: String, percentage: Double,
                       device: String, deviceId: String) async throws -> Position {
        let timestamp = Int64(clock.wallNow().timeIntervalSince1970)
        let position = Position(document: document, progress: progress, percentage: percentage, device: device, deviceId: deviceId, timestamp: timestamp)
        _ = try await write(position, accountId: accountId, key: key, unlessNewer: false)
        return position
    }

    /// Records a position a reading app dated itself (OPDS Progression's `modified`), unless the
    /// one kept is newer: then that one is returned and nothing changes (the app's write is
    /// stale). A compare-and-set in one statement, so two apps writing at once cannot both win.
    /// - Returns: the position kept, and whether it is this one.
    public func recordDated(_ position: Position, accountId: String, key: String) async throws -> (kept: Position, stored: Bool) {
        try await write(position, accountId: accountId, key: key, unlessNewer: true)
    }

    private func write(_ position: Position, accountId: String, key: String, unlessNewer: Bool) async throws -> (kept: Position, stored: Bool) {
        let references = try position.references.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        return try await database.write { db in
            let condition: SQLQueryString = unlessNewer ? #" WHERE "readingProgress"."timestamp" <= excluded."timestamp""# : ""
            try await db.raw(#"""
                INSERT INTO "readingProgress" ("accountId", "document", "progress", "percentage", "device", "deviceId", "timestamp", "references", "title")
                VALUES (\#(bind: accountId), \#(bind: key), \#(bind: position.progress), \#(bind: position.percentage), \#(bind: position.device),
                        \#(bind: position.deviceId), \#(bind: position.timestamp), \#(bind: references), \#(bind: position.title))
                ON CONFLICT ("accountId", "document") DO UPDATE SET "progress" = excluded."progress", "percentage" = excluded."percentage",
                    "device" = excluded."device", "deviceId" = excluded."deviceId", "timestamp" = excluded."timestamp",
                    "references" = excluded."references", "title" = excluded."title"
                """# + condition).run()
            guard unlessNewer else { return (position, true) }
            let row = try await db.raw(#"""
                SELECT "progress", "percentage", "device", "deviceId", "timestamp", "references", "title" FROM "readingProgress"
                WHERE "accountId" = \#(bind: accountId) AND "document" = \#(bind: key)
                """#).first(decoding: Row.self)
            guard let row else { return (position, true) }
            let kept = row.position(position.document)
            return (kept, kept == position)
        }
    }

    /// The position kept for the account and key, named as `document` (what the device asked by).
    public func position(accountId: String, key: String, document: String) async throws -> Position? {
        let row = try await database.read { db in
            try await db.raw(#"""
                SELECT "progress", "percentage", "device", "deviceId", "timestamp", "references", "title" FROM "readingProgress"
                WHERE "accountId" = \#(bind: accountId) AND "document" = \#(bind: key)
                """#).first(decoding: Row.self)
        }
        return row?.position(document)
    }

    /// The account's place in each of the store's books it has one in, by product ID (the
    /// library page's "continue at 42 %").
    public func percentages(accountId: String) async throws -> [String: Double] {
        struct Row: Decodable { var document: String; var percentage: Double }
        let rows = try await database.read { db in
            try await db.raw(#"""
                SELECT "document", "percentage" FROM "readingProgress" WHERE "accountId" = \#(bind: accountId) AND "document" LIKE 'product:%'
                """#).all(decoding: Row.self)
        }
        return Dictionary(rows.map { (String($0.document.dropFirst("product:".count)), $0.percentage) }) { first, _ in first }
    }

    /// Erases the account's positions, inside the deletion of the account (``Accounts/delete(_:password:)``).
    static func erase(_ accountId: String, in db: any SQLDatabase) async throws {
        try await db.delete(from: "readingProgress").where("accountId", .equal, accountId).run()
    }
}
