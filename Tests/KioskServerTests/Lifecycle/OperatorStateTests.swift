import Foundation
import Hummingbird
import HummingbirdTesting
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// What the store needs to resume lives in its database (issue 66): the list of published
/// products, which carries withdrawn books to their owners, and the readiness a balancer asks.
@Suite("The store's state in its database, and its readiness")
struct OperatorStateTests: StoreSuite {
    static let gone = "com.kiosk.books.gone-from-the-files"

    @Test("a store upgraded from the file-kept list reads it into the database once: a product only the file knew is carried, off sale; the file is left for a rollback", arguments: TestEngine.all)
    func legacyListReadIn(engine: TestEngine) async throws {
        let data = try TemporaryDirectory()
        let database = try await engine.freshDatabase()
        let legacy = data.url.appendingPathComponent("content/published-products.json")
        try await Self.withStore(database: database, data: data.url) { server, _, _ in
            var registry = try await server.store.publishedProducts.load()
            #expect(registry.products[Self.book] != nil && registry.removed.isEmpty)
            // As an earlier Kiosk kept it: in a file, which also knew a book since taken out of the files.
            var gone = try #require(registry.products[Self.book])
            gone.id = Self.gone
            gone.content = nil
            gone.cover = nil
            registry.products[Self.gone] = gone
            try JSONEncoder.kiosk.encode(registry).write(to: legacy)
            try await server.store.database.write { db in try await db.raw(#"DELETE FROM "publishedProduct""#).run() }
        }
        try await Self.withStore(database: database, data: data.url) { server, http, _ in
            let registry = try await server.store.publishedProducts.load()
            #expect(registry.products[Self.gone] != nil, "read in from the file")
            let products = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: try await http.send("GET", "/v1/catalog").body).products
            #expect(products.first { $0.id == Self.gone }?.forSale == false)
        }
        #expect(FileManager.default.fileExists(atPath: legacy.path), "left for a rollback")
        // Read in once: the file no longer speaks once the database holds the list.
        try FileManager.default.removeItem(at: legacy)
        try await Self.withStore(database: database, data: data.url) { server, _, _ in
            let registry = try await server.store.publishedProducts.load()
            #expect(registry.products[Self.gone] != nil)
        }
    }

    @Test("two instances writing the list at once (each its catalog, one removing a product) lose neither's rows", arguments: TestEngine.all)
    func listWritesDoNotLoseEachOther(engine: TestEngine) async throws {
        let database = try await engine.freshDatabase()
        try await Self.withStore(database: database) { server, _, _ in
            let published = server.store.publishedProducts
            let before = try await published.load()
            var first = before, second = before
            var extra = try #require(before.products[Self.book])
            extra.id = Self.gone
            first.products[Self.gone] = extra
            second.removed.insert(Self.issue)
            async let one: Void = published.record(first, replacing: before)
            async let two: Void = published.record(second, replacing: before)
            _ = try await (one, two)
            let after = try await published.load()
            #expect(after.products[Self.gone] != nil && after.removed == [Self.issue])
        }
    }

    @Test("/healthz is 503 naming what is missing until the catalog is loaded, then ok; /livez is ok throughout")
    func readiness() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        let server = try await KioskServer(configuration: configuration, logger: Logger(label: "test"))
        try await server.makeApplication().test(.live) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(String(buffer: response.body).contains("catalog not loaded"), "\(String(buffer: response.body))")
            }
            try await client.execute(uri: "/livez", method: .get) { response in #expect(response.status == .ok) }
            try await server.loadCatalog()
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok && String(buffer: response.body) == "ok")
            }
        }
        await server.shutdown()
    }
}
