import Foundation
import GRDB
import KioskCore
import Synchronization

/// The products of a catalog sync in progress, set aside until the whole document has arrived
/// and read well; then ``commit(etag:syncedAt:)`` makes the cache equal to them in one short
/// transaction, and anything else leaves the cache as it was.
///
/// Why a temporary table: products are written as they arrive, a batch at a time, so even a
/// 100,000-product catalog is never held in memory; and a temporary table belongs to the
/// writer's connection alone, so filling it takes no lock on `kiosk.sqlite` — another kiosk
/// process saving a receipt while the server is still sending is not kept waiting. Only the
/// commit takes the write lock, for a merge SQLite does in a few set-wise statements. Each sync
/// has a table of its own, so two syncs in one process do not mix; the table goes with the
/// connection if the process dies.
///
/// Batches are written on the database's writer queue while the caller reads on (the reading and
/// the writing each keep one core busy), at most ``batchesInFlight`` at a time so memory stays
/// flat when SQLite is the slower. The queue is first in, first out, so the commit runs after
/// every batch; a batch's error comes back from the next ``add(_:json:)`` or from the commit.
/// One thread uses a staging at a time.
final class CatalogStaging {
    /// A product ID the document names more than once.
    struct DuplicateProduct: Error {
        var id: String
    }

    private struct Row: Sendable {
        var id: String
        var kind: String
        var title: String
        var json: Data
    }

    private let database: ClientDatabase
    private let table = "catalog_staging_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    private var batch: [Row] = []
    /// The first error a batch met (a duplicate ID, a full disk), shared with the writer's queue.
    private final class Failure: Sendable {
        let first = Mutex<(any Error)?>(nil)
    }

    private let failure = Failure()
    private let inFlight: DispatchSemaphore
    /// Products written to the table per short transaction.
    static let batchSize = 1_000
    static let batchesInFlight = 2

    init(database: ClientDatabase) {
        self.database = database
        inFlight = DispatchSemaphore(value: Self.batchesInFlight)
        batch.reserveCapacity(Self.batchSize)
    }

    /// Sets a product aside with the bytes it was sent as.
    /// - Throws: ``DuplicateProduct`` when the ID was set aside before, or what writing a batch
    ///   met (found a batch or two later).
    func add(_ product: Product, json: Data) throws {
        try checkFailure()
        batch.append(Row(id: product.id, kind: product.kind.rawValue, title: product.title, json: json))
        if batch.count >= Self.batchSize { flush() }
    }

    /// Makes the cache equal to the products set aside, remembers the ETag and the time, and
    /// reports what changed: added and changed in the order sent, removed by ID.
    func commit(etag: String?, syncedAt: Date) throws -> SyncReport {
        flush()
        let staged = "temp.\(table)"
        return try database.write { db in
            // Every batch has been written by now (the queue is in order).
            try checkFailure()
            try db.execute(sql: Self.createTable(staged))
            var report = SyncReport()
            report.added = try String.fetchAll(db, sql: """
                SELECT s.id FROM \(staged) s WHERE NOT EXISTS (SELECT 1 FROM product p WHERE p.id = s.id) ORDER BY s.seq
                """)
            report.changed = try String.fetchAll(db, sql: """
                SELECT s.id FROM \(staged) s JOIN product p ON p.id = s.id WHERE p.json IS NOT s.json ORDER BY s.seq
                """)
            report.removed = try String.fetchAll(db, sql: "SELECT id FROM product WHERE id NOT IN (SELECT id FROM \(staged)) ORDER BY id")
            try db.execute(sql: "DELETE FROM product WHERE id NOT IN (SELECT id FROM \(staged))")
            // `WHERE true` tells SQLite's parser the ON CONFLICT belongs to the INSERT. A row
            // whose bytes are already the ones sent is left as it is.
            try db.execute(sql: """
                INSERT INTO product (id, kind, title, json) SELECT id, kind, title, json FROM \(staged) WHERE true
                ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, title = excluded.title, json = excluded.json
                WHERE product.json IS NOT excluded.json
                """)
            try db.execute(sql: "DROP TABLE \(staged)")
            if let etag { try Setting.set(Setting.Key.catalogETag, to: etag, in: db) }
            try Setting.set(Setting.Key.catalogSyncedAt, to: syncedAt.formatted(.iso8601), in: db)
            return report
        }
    }

    /// Forgets what was set aside (the sync failed, or it was committed); the cache is as it was.
    func discard() {
        batch.removeAll()
        try? database.writeTemporary { db in try db.execute(sql: "DROP TABLE IF EXISTS temp.\(table)") }
    }

    // MARK: Parts

    private static func createTable(_ name: String) -> String {
        """
        CREATE TEMP TABLE IF NOT EXISTS \(name) (
            seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, title TEXT NOT NULL, json BLOB NOT NULL)
        """
    }

    private func checkFailure() throws {
        if let error = failure.first.withLock({ $0 }) { throw error }
    }

    /// Hands the batch to the writer's queue, waiting while ``batchesInFlight`` are still there.
    private func flush() {
        guard !batch.isEmpty else { return }
        let rows = batch
        batch.removeAll(keepingCapacity: true)
        let staged = "temp.\(table)"
        let failure = failure
        let inFlight = inFlight
        inFlight.wait()
        database.writeTemporaryLater({ db in
            guard failure.first.withLock({ $0 == nil }) else { return }
            try db.execute(sql: Self.createTable(staged))
            let insert = try db.cachedStatement(sql: "INSERT INTO \(staged) (id, kind, title, json) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
            for row in rows {
                try insert.execute(arguments: [row.id, row.kind, row.title, row.json])
                if db.changesCount == 0 { throw DuplicateProduct(id: row.id) }
            }
        }, done: { error in
            if let error { failure.first.withLock { $0 = $0 ?? error } }
            inFlight.signal()
        })
    }
}
