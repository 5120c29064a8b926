import Foundation
import GRDB
@testable import KioskClient
import KioskCore
import KioskTestSupport
import Testing

/// The catalog is read on one thread while the transaction stores it on another: the store must
/// see exactly what one thread reading alone would have handed it, and neither side may be left
/// waiting on the other.
@Suite("Catalog read ahead of the transaction", .timeLimit(.minutes(1)))
struct CatalogReadAheadTests {
    static func product(_ index: Int, price: String = #"{"amount":"1.00","currency":"USD"}"#, id: String? = nil) -> String {
        #"{"id":"\#(id ?? "com.example.p\(index)")","kind":"consumable","title":"T \#(index)","summary":"s","price":\#(price),"credits":1}"#
    }

    /// A spool holding `products` as one catalog document, sent in uneven pieces.
    static func spool(_ products: [String], in directory: TemporaryDirectory) throws -> CatalogSpool {
        let spool = try CatalogSpool(in: directory.url)
        let document = Array(#"{"products":[\#(products.joined(separator: ",\n"))]}"#.utf8)
        var start = 0
        var size = 1
        while start < document.count {
            let end = min(start + size, document.count)
            try document[start..<end].withUnsafeBytes { try spool.append($0) }
            start = end
            size = size * 3 + 7
        }
        return spool
    }

    static func readAll(_ spool: CatalogSpool, stopAt: Int? = nil) -> (products: [(String, String)], error: (any Error)?) {
        var products: [(String, String)] = []
        do {
            try CatalogReadAhead(spool: spool, source: "the test catalog").forEachProduct { id, json in
                if products.count == stopAt { throw CancellationError() }
                products.append((id, String(decoding: json, as: UTF8.self)))
            }
            return (products, nil)
        } catch {
            return (products, error)
        }
    }

    @Test("5,000 products cross in order with their bytes as sent, batch boundaries and all")
    func everyProductInOrder() throws {
        let directory = try TemporaryDirectory()
        let sent = (0..<5_000).map { Self.product($0) }
        let read = Self.readAll(try Self.spool(sent, in: directory))
        #expect(read.error == nil)
        #expect(read.products.map(\.0) == (0..<5_000).map { "com.example.p\($0)" })
        #expect(read.products.map(\.1) == sent)
    }

    @Test("a document wrong at product 2,500 hands over the 2,500 before it, then names the place")
    func errorAfterTheProductsBeforeIt() throws {
        let directory = try TemporaryDirectory()
        var sent = (0..<3_000).map { Self.product($0) }
        sent[2_500] = Self.product(2_500, price: #"{"amount":1,"currency":"USD"}"#)
        let read = Self.readAll(try Self.spool(sent, in: directory))
        #expect(read.products.count == 2_500)
        let error = try #require(read.error as? CatalogReadError)
        #expect(error.place == "products[2500].price.amount")
    }

    @Test("the store's own error about product 2,400 wins over the document's at 2,500, as reading alone")
    func earlierStoreErrorWins() throws {
        let directory = try TemporaryDirectory()
        var sent = (0..<3_000).map { Self.product($0) }
        sent[2_500] = Self.product(2_500, price: "null")
        let read = Self.readAll(try Self.spool(sent, in: directory), stopAt: 2_400)
        #expect(read.products.count == 2_400)
        #expect(read.error is CancellationError)
    }

    @Test("an unsafe ID is refused naming it, after the products before it")
    func unsafeID() throws {
        let directory = try TemporaryDirectory()
        var sent = (0..<2_000).map { Self.product($0) }
        sent[1_500] = Self.product(1_500, id: "com.example.../../escape")
        let read = Self.readAll(try Self.spool(sent, in: directory))
        #expect(read.products.count == 1_500)
        guard case .unsafeProductID(let id, let source)? = read.error as? ClientError else {
            Issue.record("expected an unsafe product ID, got \(String(describing: read.error))")
            return
        }
        #expect(id == "com.example.../../escape" && source == "the test catalog")
    }

    @Test("a store that refuses the 10th of 50,000 products stops the reader: the call returns at once")
    func storeErrorStopsTheReader() throws {
        let directory = try TemporaryDirectory()
        let spool = try Self.spool((0..<50_000).map { Self.product($0) }, in: directory)
        let start = ContinuousClock.now
        let read = Self.readAll(spool, stopAt: 10)
        #expect(read.products.count == 10)
        #expect(read.error is CancellationError)
        // Reading all 50,000 takes far longer; a reader left blocked would never return.
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test("a cache from before the ID-keyed table keeps its products through the migration")
    func migrationKeepsProducts() throws {
        let directory = try TemporaryDirectory()
        let url = directory.path("kiosk.sqlite")
        let json = Self.product(7)
        do {
            let queue = try DatabaseQueue(path: url.path)
            try ClientDatabase.migrator.migrate(queue, upTo: "v4-claims-retries-revocations")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO product (id, kind, title, json) VALUES (?, ?, ?, ?)",
                               arguments: ["com.example.p7", "consumable", "T 7", Data(json.utf8)])
            }
        }
        let database = try ClientDatabase(url: url)
        #expect(try database.cachedProduct("com.example.p7")?.title == "T 7")
        let columns = try database.read { db in try db.columns(in: "product").map(\.name) }
        #expect(columns == ["id", "json"])
    }
}
