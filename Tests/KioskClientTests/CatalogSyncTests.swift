import Foundation
import GRDB
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

@Suite("Catalog sync against a live server")
struct CatalogSyncTests {
    static func configuration(_ store: SampleStore) -> ServerConfiguration {
        ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
    }

    @Test("the first sync adds every product; the next one is a 304 that changes nothing")
    func firstAndUnchangedSync() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        try await LiveServer.run(Self.configuration(store)) { _, url in
            let client = try KioskClient(home: home, server: url)
            let first = try await client.sync()
            #expect(first.added.count == 13)
            #expect(first.changed.isEmpty && first.removed.isEmpty && !first.notModified)

            let second = try await client.sync()
            #expect(second == SyncReport(notModified: true))
        }
        let (products, syncedAt) = try KioskClient(home: home).cachedCatalog()
        #expect(products.count == 13)
        #expect(products.map(\.id) == products.map(\.id).sorted())
        #expect(try #require(syncedAt).timeIntervalSinceNow > -60)
    }

    @Test("a product added, one changed and one removed between syncs are each reported")
    func addedChangedRemoved() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        try await LiveServer.run(Self.configuration(store)) { server, url in
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()

            try store.editCatalog("credits.json") { products in
                products.removeAll { ($0["id"] as? String) == "com.kiosk.credits.pack-10" }
                var pack = products[0]
                pack["id"] = "com.kiosk.credits.pack-25"
                pack["credits"] = 25
                products.append(pack)
            }
            try store.editCatalog("books.json") { products in products[0]["price"] = "5.99" }
            #expect(await server.catalog.reload())

            let report = try await client.sync()
            #expect(report.added == ["com.kiosk.credits.pack-25"])
            #expect(report.changed == ["com.kiosk.books.lighthouse-keeper"])
            #expect(report.removed == ["com.kiosk.credits.pack-10"])
        }
        let products = try KioskClient(home: home).cachedCatalog().products
        #expect(products.first { $0.id == "com.kiosk.books.lighthouse-keeper" }?.price.amount == "5.99")
        #expect(!products.contains { $0.id == "com.kiosk.credits.pack-10" })
    }

    @Test("new content in a folder shows as a changed product with a new version")
    func changedContent() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        try await LiveServer.run(Self.configuration(store)) { server, url in
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()
            let before = try client.cachedCatalog().products.first { $0.id == "com.kiosk.magazines.harbor-monthly.issue-03" }
            try Data("<p>Corrected edition.</p>\n".utf8)
                .write(to: store.content.appendingPathComponent("magazines/harbor-monthly/issue-03/errata.html"))
            #expect(await server.catalog.reload())
            let report = try await client.sync()
            #expect(report.changed == ["com.kiosk.magazines.harbor-monthly.issue-03"])
            let after = try client.cachedCatalog().products.first { $0.id == "com.kiosk.magazines.harbor-monthly.issue-03" }
            #expect(before?.content?.version != after?.content?.version)
        }
    }

    @Test("an unreachable server is named in the error and leaves the cache as it was")
    func unreachableServer() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        let deadURL = try await LiveServer.run(Self.configuration(store)) { _, url in
            _ = try await KioskClient(home: home, server: url).sync()
            return url
        }
        let client = try KioskClient(home: home)
        let before = try client.cachedCatalog()
        let error = await #expect(throws: ClientError.self) { try await client.sync() }
        #expect(error?.description.contains(deadURL + "/v1/catalog") == true)
        let after = try client.cachedCatalog()
        #expect(after.products == before.products)
        #expect(after.syncedAt == before.syncedAt)
    }

    @Test("the server URL is remembered after first use, once it answered as a Kiosk store: not after a failed request, never an ftp:// URL")
    func serverRemembered() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        #expect(throws: ClientError.noServer) { try KioskClient(home: home).server() }
        let mistyped = try KioskClient(home: home, server: "http://127.0.0.1:9/")
        #expect(try mistyped.server() == "http://127.0.0.1:9")
        await #expect(throws: ClientError.self) { try await mistyped.sync() }
        #expect(throws: ClientError.noServer) { try KioskClient(home: home).server() }
        #expect(throws: ClientError.self) { try KioskClient(home: home, server: "ftp://127.0.0.1/") }

        let answered = try await LiveServer.run(Self.configuration(store)) { _, url in
            _ = try await KioskClient(home: home, server: url + "/").sync()
            return url
        }
        #expect(try KioskClient(home: home).server() == answered)
        #expect(try KioskClient(home: home).setting(.server) == answered)
    }

    @Test("KIOSK_HOME resolves from the flag, then the environment, then XDG_DATA_HOME")
    func homeResolution() {
        #expect(KioskHome.resolve(flag: "/a", environment: ["KIOSK_HOME": "/b"]).root.path == "/a")
        #expect(KioskHome.resolve(flag: nil, environment: ["KIOSK_HOME": "/b", "XDG_DATA_HOME": "/c"]).root.path == "/b")
        #expect(KioskHome.resolve(flag: nil, environment: ["XDG_DATA_HOME": "/c"]).root.path == "/c/kiosk")
        #expect(KioskHome.resolve(flag: nil, environment: ["HOME": "/home/r"]).root.path == "/home/r/.local/share/kiosk")
    }
}

@Suite("Catalog sync while the catalog is still arriving")
struct CatalogSyncInFlightTests {
    static func catalog(_ count: Int, title: String) -> String {
        let products = (0..<count).map { index in
            #"{"id":"com.example.p\#(index)","kind":"consumable","title":"\#(title) \#(index)","summary":"s","price":{"amount":"1.00","currency":"USD"},"credits":1}"#
        }
        return #"{"products":[\#(products.joined(separator: ","))]}"#
    }

    /// A home synced once with 3 products titled "old" from a hostile server, for `body` to sync again.
    static func withOldCatalog(_ body: @Sendable (HostileServer, KioskClient, KioskHome) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let home = KioskHome(root: directory.path("home"))
        try await HostileServer.run { server, url in
            server.catalog = .json(Self.catalog(3, title: "old"))
            let client = try KioskClient(home: home, server: url)
            #expect(try await client.sync().added.count == 3)
            try await body(server, client, home)
        }
    }

    @Test("while a slow server sends 3,000 products, another engine on the same home writes at once and still reads the old catalog; then the new one lands whole")
    func otherEngineWritesDuringSync() async throws {
        try await Self.withOldCatalog { server, syncing, home async throws in
            // 30 chunks 100 ms apart: about 3 s of sending, which the sync spools to a file as it comes.
            server.catalog = .slowJSON(Self.catalog(3_000, title: "new"), chunks: 30, pause: .milliseconds(100))
            let sent = server.chunksSent
            let sync = Task { try await syncing.sync() }
            // Well into the body (1,400 products), well before its last chunk.
            while server.chunksSent < sent + 14 { try await Task.sleep(for: .milliseconds(10)) }

            let other = try KioskClient(home: home)
            let clock = ContinuousClock()
            let start = clock.now
            try other.setPaymentsEnabled(false)
            let waited = clock.now - start
            // A sync holding the write lock to its end would make this write wait until the last
            // chunk (the count below shows it) or the 10 s busy timeout; idle it takes milliseconds,
            // the bound leaves room for a loaded machine's fsync.
            #expect(waited < .seconds(3), "the other engine waited \(waited) to write")
            #expect(server.chunksSent < sent + 30, "the catalog was already all sent; the test proves nothing")
            let during = try other.cachedCatalog().products
            #expect(during.count == 3 && during.allSatisfy { $0.title.hasPrefix("old") })

            let report = try await sync.value
            #expect(report.added.count == 2_997 && report.changed.count == 3 && report.removed.isEmpty)
            let after = try other.cachedCatalog().products
            #expect(after.count == 3_000 && after.allSatisfy { $0.title.hasPrefix("new") })
            #expect(try other.paymentsEnabled() == false)
        }
    }

    @Test("two engines on one home sync 5,000 products at once: both succeed, one adds them, the cache holds each once")
    func twoSyncsAtOnce() async throws {
        try await Self.withOldCatalog { server, first, home async throws in
            server.catalog = .json(Self.catalog(5_000, title: "new"))
            let second = try KioskClient(home: home)
            async let one = first.sync()
            async let two = second.sync()
            let reports = try await [one, two]
            // The transactions take turns: whichever stores second finds everything already there.
            #expect(reports.map(\.added.count).sorted() == [0, 4_997])
            #expect(reports.map(\.changed.count).sorted() == [0, 3])
            let products = try first.cachedCatalog().products
            #expect(products.count == 5_000 && Set(products.map(\.id)).count == 5_000 && products.allSatisfy { $0.title.hasPrefix("new") })
        }
    }

    @Test("an ID named again 2,000 products later is refused naming it; the cache keeps the last good catalog")
    func duplicateInLaterBatch() async throws {
        try await Self.withOldCatalog { server, client, _ async throws in
            let products = Self.catalog(2_500, title: "new")
            server.catalog = .json(products.replacingOccurrences(of: #""id":"com.example.p2400""#, with: #""id":"com.example.p5""#))
            let error = await #expect(throws: ClientError.self) { try await client.sync() }
            #expect(error.map { "\($0)" }?.contains("names com.example.p5 twice; the local catalog was kept") == true, "\(error.map { "\($0)" } ?? "")")
            #expect(try client.cachedCatalog().products.map(\.title) == ["old 0", "old 1", "old 2"])
        }
    }

    @Test("titles are cached exactly: empty, with a NUL, with non-ASCII; the bytes sent are kept as sent")
    func exactColumns() async throws {
        let directory = try TemporaryDirectory()
        let home = KioskHome(root: directory.path("home"))
        let products = [("com.example.empty", ""), ("com.example.nul", #"a\u0000b"#), ("com.example.utf8", "Été 😀")].map { id, title in
            #"{"id":"\#(id)","kind":"consumable","title":"\#(title)","summary":"s","price":{"amount":"1.00","currency":"USD"}}"#
        }
        try await HostileServer.run { server, url in
            server.catalog = .json(#"{"products":[\#(products.joined(separator: ","))]}"#)
            let client = try KioskClient(home: home, server: url)
            #expect(try await client.sync().added.count == 3)
            #expect(try client.cachedCatalog().products.map(\.title) == ["", "a\u{0}b", "Été 😀"])
        }
        let database = try DatabaseQueue(path: home.database.path)
        let rows = try await database.read { db in try Row.fetchAll(db, sql: "SELECT json FROM product ORDER BY id") }
        #expect(rows.map { String(decoding: $0["json"] as Data, as: UTF8.self) } == products)
    }

    @Test("a catalog that stops half-way (the server goes away) leaves the cache as it was and the next sync lands whole")
    func cutOffMidway() async throws {
        try await Self.withOldCatalog { server, client, home async throws in
            // 2,500 products' worth of a 5,000-product document, then the end of the body.
            let whole = Self.catalog(5_000, title: "new")
            server.catalog = .json(String(whole.prefix(whole.utf8.count / 2)))
            await #expect(throws: ClientError.self) { try await client.sync() }
            #expect(try client.cachedCatalog().products.map(\.title).allSatisfy { $0.hasPrefix("old") })

            server.catalog = .json(whole)
            let report = try await client.sync()
            #expect(report.added.count == 4_997 && report.changed.count == 3)
            #expect(try client.cachedCatalog().products.count == 5_000)
            // The spool has no name from the start: nothing is left in the home, failed sync or not.
            let left = try FileManager.default.contentsOfDirectory(atPath: home.root.path).filter { $0.hasPrefix(".catalog-") }
            #expect(left.isEmpty, "\(left)")
        }
    }
}
