import Foundation
import KioskCore

/// Reads and checks a spooled catalog on a thread of its own, a few batches of products ahead of
/// the transaction that stores them.
///
/// Why: a full sync of 100,000 products is CPU on both sides of the hand-over — the strict reading
/// (about 3 µs a product) and SQLite's insert (about 4 µs) — and a device has more than one core.
/// Products cross between the threads as bytes, one buffer of IDs and JSON objects per batch, so
/// nothing made on one thread is freed on the other a product at a time, and at most
/// ``capacity`` batches (a few hundred KiB) wait between them.
///
/// The reading stops at the first error, and the products before it are still handed over first:
/// the transaction sees what a reading on its own thread would have seen, in the same order.
final class CatalogReadAhead: @unchecked Sendable {
    /// Products read and checked, in the order sent.
    struct Batch {
        var bytes: [UInt8] = []
        /// Where each product's ID and JSON object are in `bytes`.
        var products: [(id: Range<Int>, json: Range<Int>)] = []
    }

    private let spool: CatalogSpool
    private let source: String
    private let batchSize = 256
    private let capacity = 4

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var ready: [Batch] = []
    /// Set by the reader as its last act.
    private var outcome: Result<Void, any Error>?
    private var stopped = false

    /// - Parameter source: names the catalog in errors (`the catalog from <url>`).
    init(spool: CatalogSpool, source: String) {
        self.spool = spool
        self.source = source
    }

    /// Calls `body` with each product's ID and JSON object as sent, in order, while the next ones
    /// are read on another thread; once per read-ahead, which reads its spool once. Throws the
    /// first error, the reader's (``CatalogReadError``, an unsafe ID, a spool that cannot be read)
    /// or `body`'s, and returns only once the reader has stopped.
    func forEachProduct(_ body: (String, UnsafeRawBufferPointer) throws -> Void) throws {
        // A thread of its own, not a shared pool's: the transaction waits on it, and an app's
        // pool busy with other waits must not be able to leave it unstarted.
        let reader = Thread { self.read() }
        reader.name = "kiosk.catalog-read-ahead"
        reader.start()
        defer {
            // Stop the reader if it is still going, and return only once it has ended: it reads
            // the spool, which the caller closes after this.
            condition.withLock {
                stopped = true
                condition.broadcast()
                while outcome == nil { condition.wait() }
            }
        }
        while let batch = try next() {
            try batch.bytes.withUnsafeBytes { bytes in
                for product in batch.products {
                    // IDs were checked by `ProductID.isValid`: ASCII, so their bytes are the string.
                    try body(String(decoding: bytes[product.id], as: UTF8.self), UnsafeRawBufferPointer(rebasing: bytes[product.json]))
                }
            }
        }
    }

    // MARK: The reader's thread

    private struct Stopped: Error {}

    private func read() {
        var batch = Batch()
        let result = Result<Void, any Error> {
            var stream = CatalogStream()
            try spool.read { piece in
                try stream.read(piece) { product, json in
                    guard ProductID.isValid(product.id) else { throw ClientError.unsafeProductID(product.id, source: source) }
                    let idStart = batch.bytes.count
                    batch.bytes.append(contentsOf: product.id.utf8)
                    let jsonStart = batch.bytes.count
                    batch.bytes.append(contentsOf: json)
                    batch.products.append((idStart..<jsonStart, jsonStart..<batch.bytes.count))
                    if batch.products.count == batchSize {
                        try hand(batch)
                        batch = Batch()
                    }
                }
            }
            try stream.finish()
        }
        // The products read before an error still go first: the transaction may have its own
        // error to give about one of them (an ID named twice), as it would reading alone.
        if !batch.products.isEmpty { try? hand(batch) }
        condition.withLock {
            outcome = result
            condition.broadcast()
        }
    }

    /// Waits for room, then queues `batch`; throws when the transaction has stopped listening.
    private func hand(_ batch: Batch) throws {
        try condition.withLock {
            while ready.count >= capacity && !stopped { condition.wait() }
            guard !stopped else { throw Stopped() }
            ready.append(batch)
            condition.broadcast()
        }
    }

    // MARK: The transaction's thread

    /// The next batch; nil once the reader ended well; its error once it ended badly.
    private func next() throws -> Batch? {
        try condition.withLock {
            while ready.isEmpty && outcome == nil { condition.wait() }
            if !ready.isEmpty {
                condition.broadcast()
                return ready.removeFirst()
            }
            try outcome?.get()
            return nil
        }
    }
}
