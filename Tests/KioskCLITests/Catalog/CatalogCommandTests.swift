import Foundation
import KioskTestSupport
import Testing

@Suite("kiosk serve, sync and products, as a person runs them")
struct CatalogCommandTests {
    @Test("serve prints exactly one line, sync and products work, SIGTERM stops it cleanly")
    func serveSyncProducts() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        #expect(server.url.hasPrefix("http://127.0.0.1:"))

        let first = try await KioskCommand.run(["sync", "--home", home, "--server", server.url])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("catalog synced: 13 added, 0 changed, 0 removed"))

        // The server is remembered; the second sync is a 304.
        let second = try await KioskCommand.run(["sync"], environment: ["KIOSK_HOME": home])
        #expect(second.stdout == "catalog unchanged\n")

        let list = try await KioskCommand.run(["products", "--home", home])
        #expect(list.status == 0)
        #expect(list.stdout.hasPrefix("13 products, catalog synced "))
        #expect(list.stdout.contains("com.kiosk.books.small-engines  Small Engines, Big Ideas  (nonConsumable, 4.99 USD"))

        let json = try await KioskCommand.run(["products", "--home", home, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["products"] as? [Any])?.count == 13)

        #expect(await server.stop() == 0)
    }

    @Test("kiosk products shows a subscription's introductory offer beside its price, read from the synced catalog")
    func offerShown() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                products[index]["introductoryOffer"] = ["type": "freeTrial", "days": 14]
            }
        }
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        #expect(try await KioskCommand.run(["sync"], environment: home).status == 0)
        let listed = try await KioskCommand.run(["products"], environment: home)
        let line = listed.stdout.split(separator: "\n").first { $0.contains(SampleStore.harborMonthly) } ?? ""
        #expect(line.contains("2.49 USD") && line.contains("new subscribers: 14 days free, then 2.49 USD a month"), "\(listed.stdout)")
        _ = await server.stop()
    }

    @Test("products works offline, after the server is gone")
    func productsOffline() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        _ = try await KioskCommand.run(["sync", "--home", home, "--server", server.url])
        await server.stop()
        let list = try await KioskCommand.run(["products", "--home", home])
        #expect(list.status == 0)
        #expect(list.stdout.contains("com.kiosk.magazines.harbor-monthly.issue-01"))
    }

    @Test("an unreachable server: one line on stderr naming the URL, exit status 1, the cache kept")
    func unreachable() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        _ = try await KioskCommand.run(["sync", "--home", home, "--server", server.url])
        let url = server.url
        await server.stop()

        let result = try await KioskCommand.run(["sync", "--home", home])
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains("\(url)/v1/catalog") == true)
        let list = try await KioskCommand.run(["products", "--home", home])
        #expect(list.stdout.hasPrefix("13 products"))
    }

    @Test("SIGHUP reloads the catalog; a bad catalog on reload keeps the last good one serving")
    func hangUpReloads() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        _ = try await KioskCommand.run(["sync", "--home", home, "--server", server.url])

        try store.editCatalog("books.json") { products in products[2]["title"] = "Small Engines, Bigger Ideas" }
        server.signal(SIGHUP)
        var report = ""
        for _ in 0..<50 where !report.contains("changed") || report.contains("0 changed") {
            try await Task.sleep(for: .milliseconds(100))
            report = try await KioskCommand.run(["sync", "--home", home]).stdout
        }
        #expect(report.hasPrefix("catalog synced: 0 added, 1 changed, 0 removed"))

        try store.editCatalog("books.json") { products in products[0]["kind"] = "rental" }
        server.signal(SIGHUP)
        for _ in 0..<50 where !server.log.contains("reload refused") {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(server.log.contains("Catalog/books.json"))
        let afterBadReload = try await KioskCommand.run(["sync", "--home", home])
        #expect(afterBadReload.stdout == "catalog unchanged\n")
        #expect(await server.stop() == 0)
    }

    @Test("a sync of 60 products prints the counts and a hint rather than 60 lines; --json lists every one")
    func largeSyncSummary() async throws {
        let directory = try TemporaryDirectory()
        try await HostileServer.run { server, url in
            let products = (0..<60).map { #"{"id": "com.example.p\#($0)", "kind": "consumable", "title": "p", "summary": "s", "price": {"amount": "1.00", "currency": "USD"}, "credits": 1}"# }
            server.catalog = .json(#"{"products": [\#(products.joined(separator: ","))]}"#)
            let home = ["KIOSK_HOME": directory.path("home").path]
            let text = try await KioskCommand.run(["sync", "--server", url], environment: home)
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout == "catalog synced: 60 added, 0 changed, 0 removed\n  (60 changes; kiosk sync --json lists them, kiosk products shows the catalog)\n")
            try FileManager.default.removeItem(at: directory.path("home"))
            let json = try await KioskCommand.run(["sync", "--server", url, "--json"], environment: home)
            let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            #expect((object?["added"] as? [String])?.count == 60)
        }
    }

    @Test("products lists 30,000 products a product at a time: the peak is that of listing 3, and the list is whole and in order")
    func largeProductList() async throws {
        let directory = try TemporaryDirectory()
        @Sendable func catalog(_ count: Int) -> String {
            let products = (0..<count).map { #"{"id": "com.example.p\#(String(format: "%05d", $0))", "kind": "consumable", "title": "a title long enough to be stored \#($0)", "summary": "a summary of the product \#($0)", "price": {"amount": "1.00", "currency": "USD"}, "credits": 1}"# }
            return #"{"products": [\#(products.joined(separator: ","))]}"#
        }
        try await HostileServer.run { server, url in
            var peaks: [Int: Int] = [:]
            for count in [3, 30_000] {
                let home = directory.path("home-\(count)")
                server.catalog = .json(catalog(count))
                let environment = ["KIOSK_HOME": home.path]
                #expect(try await KioskCommand.run(["sync", "--server", url], environment: environment).status == 0)
                let (listed, peak) = try await KioskCommand.runMeasured(["products", "--json"], environment: environment, in: directory.url)
                #expect(listed.status == 0, "\(listed.stderr)")
                let object = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any]
                let ids = (object?["products"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
                #expect(ids.count == count && ids == ids.sorted() && object?["syncedAt"] is String)
                let text = try await KioskCommand.run(["products"], environment: environment)
                #expect(text.stdout.split(separator: "\n").count == count + 1 && text.stdout.hasPrefix("\(count) products, catalog synced"))
                peaks[count] = peak
            }
            // Holding 30,000 products and their encoding at once costs well over 10 MiB more.
            let growth = (peaks[30_000] ?? 0) - (peaks[3] ?? 0)
            #expect(growth < 6 << 20, "listing 30,000 products peaked \(growth >> 20) MiB above listing 3")
        }
    }
}
