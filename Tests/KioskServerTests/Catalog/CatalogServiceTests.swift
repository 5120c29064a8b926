import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import KioskCore
import KioskServer
import KioskTestSupport
import Logging
import NIOCore
import Testing

@Suite("The catalog service over real sockets")
struct CatalogServiceTests: LargeBookSuite {
    /// A server over a private copy of the sample store, on port 0.
    struct Fixture {
        let directory: TemporaryDirectory
        let store: SampleStore
        let server: KioskServer

        init() async throws {
            directory = try TemporaryDirectory()
            store = try SampleStore(in: directory)
            server = try await Self.makeServer(store)
        }

        static func makeServer(_ store: SampleStore) async throws -> KioskServer {
            var logger = Logger(label: "kiosk.test")
            logger.logLevel = .critical
            let configuration = ServerConfiguration(
                catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data, port: 0)
            let server = try await KioskServer(configuration: configuration, logger: logger)
            try await server.loadCatalog()
            return server
        }
    }

    static func catalog(_ response: TestResponse) throws -> CatalogDocument {
        try JSONDecoder.kiosk.decode(CatalogDocument.self, from: Data(buffer: response.body))
    }

    @Test("GET /v1/catalog lists every product with its content's size, digest and version")
    func catalogLists() async throws {
        let fixture = try await Fixture()
        try await fixture.server.makeApplication().test(.live) { client in
            try await client.execute(uri: "/v1/catalog", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "application/json")
                let document = try Self.catalog(response)
                #expect(document.products.count == 13)
                let book = try #require(document.products.first { $0.id == "com.kiosk.books.river-of-maps" })
                #expect(book.price == Price(amount: "7.99", currency: "USD"))
                let content = try #require(book.content)
                #expect(content.format == .zip)
                #expect(content.sha256.count == 64)
                #expect(content.version == String(content.sha256.prefix(12)))
                let packed = fixture.store.data.appendingPathComponent("content/\(content.sha256).zip")
                #expect(try FileDigest.sha256(of: packed) == content.sha256)
                #expect(Int64(try Data(contentsOf: packed).count) == content.size)
                let issue = try #require(document.products.first { $0.id == "com.kiosk.magazines.harbor-monthly.issue-02" })
                #expect(issue.publicationDate == "2026-10-01")
                #expect(issue.content?.format == .tarGz)
                let pack = try #require(document.products.first { $0.id == "com.kiosk.credits.pack-10" })
                #expect(pack.credits == 10)
                #expect(pack.content == nil)
            }
        }
    }

    @Test("a matching If-None-Match gets 304 with no body; a stale one gets the catalog")
    func conditionalGet() async throws {
        let fixture = try await Fixture()
        try await fixture.server.makeApplication().test(.live) { client in
            let etag = try await client.execute(uri: "/v1/catalog", method: .get) { response in
                try #require(response.headers[.eTag])
            }
            #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
            try await client.execute(uri: "/v1/catalog", method: .get, headers: [.ifNoneMatch: etag]) { response in
                #expect(response.status == .notModified)
                #expect(response.body.readableBytes == 0)
                #expect(response.headers[.eTag] == etag)
            }
            try await client.execute(uri: "/v1/catalog", method: .get, headers: [.ifNoneMatch: "\"stale\""]) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes > 0)
            }
        }
    }

    @Test("gzip is sent when asked for and decodes to the same catalog")
    func gzipWhenAsked() async throws {
        let fixture = try await Fixture()
        try await fixture.server.makeApplication().test(.live) { client in
            let plain = try await client.execute(uri: "/v1/catalog", method: .get) { Data(buffer: $0.body) }
            try await client.execute(uri: "/v1/catalog", method: .get, headers: [.acceptEncoding: "gzip, deflate"]) { response in
                #expect(response.headers[.contentEncoding] == "gzip")
                #expect(response.headers[.vary] == "Accept-Encoding")
                #expect(response.body.readableBytes < plain.count)
                let published = try await fixture.server.catalog.current
                #expect(Data(buffer: response.body) == published.gzippedBody)
            }
            try await client.execute(uri: "/v1/catalog", method: .get, headers: [.acceptEncoding: "gzip;q=0"]) { response in
                #expect(response.headers[.contentEncoding] == nil)
            }
        }
    }

    @Test("the same folders give the same ETag after a restart")
    func etagSurvivesRestart() async throws {
        let fixture = try await Fixture()
        let first = try await fixture.server.catalog.current.etag
        try FileManager.default.removeItem(at: fixture.store.data)
        let restarted = try await Fixture.makeServer(fixture.store)
        #expect(try await restarted.catalog.current.etag == first)
    }

    @Test("a restart with nothing changed serves the snapshot of the last build: the same bytes, ETags and archives")
    func restartFromSnapshot() async throws {
        let fixture = try await Fixture()
        #expect(await fixture.server.catalog.origin == .folders)
        let first = try await fixture.server.catalog.current
        let restarted = try await Fixture.makeServer(fixture.store)
        #expect(await restarted.catalog.origin == .snapshot)
        let again = try await restarted.catalog.current
        #expect(again.body == first.body && again.gzippedBody == first.gzippedBody)
        #expect(again.etag == first.etag && again.gzipETag == first.gzipETag)
        #expect(again.products == first.products)
        #expect(again.archives.mapValues(\.file) == first.archives.mapValues(\.file))
        #expect(again.archives.mapValues(\.sha256) == first.archives.mapValues(\.sha256))
    }

    /// One change the snapshot must notice, and how the restarted catalog shows it was noticed.
    struct Change: Sendable, CustomTestStringConvertible {
        var name: String
        var make: @Sendable (SampleStore) throws -> Void
        var check: @Sendable (PublishedCatalog, PublishedCatalog) -> Bool
        var testDescription: String { name }
    }

    static let changes: [Change] = [
        Change(name: "a product added to the catalog", make: { store in
            try store.editCatalog("credits.json") { products in
                var pack = products[0]
                pack["id"] = "com.kiosk.credits.pack-20"
                products.append(pack)
            }
        }, check: { _, after in after.products["com.kiosk.credits.pack-20"] != nil }),
        Change(name: "a file added to a book's content folder", make: { store in
            try Data("a new chapter\n".utf8).write(to: store.content.appendingPathComponent("books/river-of-maps/chapter-9.md"))
        }, check: { before, after in
            let id = "com.kiosk.books.river-of-maps"
            return after.archives[id]?.sha256 != before.archives[id]?.sha256 && after.products[id]?.content?.sha256 == after.archives[id]?.sha256
        }),
        Change(name: "the snapshot's document cut short", make: { store in
            let file = store.data.appendingPathComponent("catalog-snapshot/catalog.json")
            try Data(try Data(contentsOf: file).prefix(100)).write(to: file)
        }, check: { before, after in after.body == before.body }),
        Change(name: "the snapshot's key from another format", make: { store in
            let file = store.data.appendingPathComponent("catalog-snapshot/key.json")
            let key = try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: #""format":3"#, with: #""format":0"#)
            try key.write(to: file, atomically: true, encoding: .utf8)
        }, check: { before, after in after.body == before.body }),
    ]

    @Test("a restart after a change builds from the folders, not the snapshot", arguments: changes)
    func snapshotNotUsedAfterChange(_ change: Change) async throws {
        let fixture = try await Fixture()
        let before = try await fixture.server.catalog.current
        try change.make(fixture.store)
        let restarted = try await Fixture.makeServer(fixture.store)
        #expect(await restarted.catalog.origin == .folders)
        #expect(change.check(before, try await restarted.catalog.current))
        // The build wrote a fresh snapshot, which the next start uses.
        let third = try await Fixture.makeServer(fixture.store)
        #expect(await third.catalog.origin == .snapshot)
        #expect(try await third.catalog.current.body == (try await restarted.catalog.current.body))
    }

    @Test("two servers starting at once on one data folder both build; the snapshot they leave serves the next start")
    func concurrentStarts() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        async let one = Fixture.makeServer(store)
        async let two = Fixture.makeServer(store)
        let (first, second) = try await (one, two)
        let body = try await first.catalog.current.body
        #expect(try await second.catalog.current.body == body)
        let third = try await Fixture.makeServer(store)
        #expect(await third.catalog.origin == .snapshot)
        #expect(try await third.catalog.current.body == body)
    }

    @Test("GET /healthz answers ok")
    func health() async throws {
        let fixture = try await Fixture()
        try await fixture.server.makeApplication().test(.live) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "ok")
            }
        }
    }

    @Test("a reload picks up a new product; a bad reload keeps the last good catalog serving")
    func reload() async throws {
        let fixture = try await Fixture()
        try fixture.store.editCatalog("credits.json") { products in
            var pack = products[0]
            pack["id"] = "com.kiosk.credits.pack-20"
            pack["credits"] = 20
            products.append(pack)
        }
        #expect(await fixture.server.catalog.reload())
        #expect(try await fixture.server.catalog.current.products["com.kiosk.credits.pack-20"]?.credits == 20)

        try fixture.store.editCatalog("credits.json") { products in products[0]["kind"] = "rental" }
        #expect(await fixture.server.catalog.reload() == false)
        try await fixture.server.makeApplication().test(.live) { client in
            try await client.execute(uri: "/v1/catalog", method: .get) { response in
                #expect(response.status == .ok)
                let products = try Self.catalog(response).products
                #expect(products.contains { $0.id == "com.kiosk.credits.pack-20" })
            }
        }
    }

    @Test("a bad catalog stops the server from starting, naming the file, the product and the field")
    func refusesToStart() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("books.json") { products in products[1]["price"] = "free" }
        let error = try await #require(throws: CatalogError.self) { try await Fixture.makeServer(store) }
        #expect(error.description == "Catalog/books.json: product \"com.kiosk.books.river-of-maps\": field \"price\": \"free\" is not a decimal amount like 4.99")
    }

    @Test("while a slow reload packs, the catalog and payments keep answering from the last good catalog")
    func requestsDuringSlowReload() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            let account = try await http.createAccount()
            try store.addLargeBook(Self.large, megabytes: 48)
            let reload = Task { await server.catalog.reload() }
            try await Task.sleep(for: .milliseconds(200))
            var slowest = Duration.zero
            for _ in 0..<5 {
                let started = ContinuousClock.now
                #expect(try await http.send("GET", "/v1/catalog").status == 200)
                #expect(try await http.pay("com.kiosk.credits.pack-5", token: account.token).status == 200)
                slowest = max(slowest, ContinuousClock.now - started)
            }
            let catalogBefore = try await http.send("GET", "/v1/catalog").decode(CatalogDocument.self)
            #expect(!catalogBefore.products.contains { $0.id == Self.large }, "the reload had already finished; the test proves nothing")
            #expect(slowest < .milliseconds(500), "a request waited \(slowest) for the reload")
            #expect(await reload.value)
            #expect(try await http.send("GET", "/v1/catalog").decode(CatalogDocument.self).products.contains { $0.id == Self.large })
        }
    }
}
