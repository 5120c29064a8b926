import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// Owned is forever: a product taken off sale, or gone from the catalog files, is no longer
/// offered or sold, and stays deliverable to everyone who owns it until the operator removes it.
@Suite("off sale and withdrawn products stay with their owners")
struct WithdrawnProductTests {
    static let book = "com.kiosk.books.small-engines"
    static let other = "com.kiosk.books.lighthouse-keeper"

    @Test("a bought book taken out of the catalog files: a new device restores and installs it, it shows off sale, nobody can buy it, it survives a restart, and the operator removes it knowing its owners", arguments: TestEngine.all)
    func withdrawnBookStaysDeliverable(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        var server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        func admin(_ arguments: String...) async throws -> KioskCommand.Result {
            try await KioskCommand.run(["admin"] + arguments + ["--server", server.url, "--data", store.data.path])
        }
        let phone = ["KIOSK_HOME": directory.path("phone").path]
        #expect(try await KioskCommand.run(["buy", Self.book, "--server", server.url], environment: phone).status == 0)
        let shown = try await KioskCommand.run(["account", "--show-token"], environment: phone).stdout
        let token = try #require(shown.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(while: \.isHexDigit)) })

        // Out of the files, and the other book explicitly off sale.
        try store.editCatalog("books.json") { products in
            products.removeAll { $0["id"] as? String == Self.book }
            for index in products.indices where products[index]["id"] as? String == Self.other { products[index]["forSale"] = false }
        }
        server.signal(SIGHUP)
        let http = StoreHTTP(baseURL: server.url)
        func catalog() async throws -> [Product] {
            try JSONDecoder.kiosk.decode(CatalogDocument.self, from: try await http.send("GET", "/v1/catalog").body).products
        }
        var offSale: [String] = []
        for _ in 0..<100 where offSale.count < 2 {
            try await Task.sleep(for: .milliseconds(100))
            offSale = try await catalog().filter { $0.forSale == false }.map(\.id).sorted()
        }
        #expect(offSale == [Self.other, Self.book].sorted(), "\(server.log)")

        // A new device of the owner: restored, downloaded, installed.
        let tablet = ["KIOSK_HOME": directory.path("tablet").path]
        #expect(try await KioskCommand.run(["account", "link", token, "--server", server.url], environment: tablet).status == 0)
        let restored = try await KioskCommand.run(["restore"], environment: tablet)
        #expect(restored.status == 0 && !restored.stdout.contains("no content to download"), "\(restored)")
        #expect(FileManager.default.fileExists(atPath: directory.path("tablet/Library/\(Self.book)").path), "\(restored)")
        let listed = try await KioskCommand.run(["products"], environment: tablet).stdout
        let line = try #require(listed.split(separator: "\n").first { $0.contains(Self.book) }, "\(listed)")
        #expect(line.contains("off sale") && line.contains("[owned]"), "\(line)")

        // Nobody else is offered or sold it.
        let stranger = ["KIOSK_HOME": directory.path("stranger").path]
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: stranger).status == 0)
        let offered = try await KioskCommand.run(["products"], environment: stranger).stdout
        #expect(!offered.contains(Self.book) && !offered.contains(Self.other), "\(offered)")
        let refused = try await KioskCommand.run(["buy", Self.other], environment: stranger)
        #expect(refused.status != 0 && refused.stderr.contains("no longer for sale"), "\(refused)")
        let account = try await http.createAccount()
        for id in [Self.book, Self.other] {
            let paid = try await http.pay(id, token: account.token)
            #expect(paid.status == 409 && String(decoding: paid.body, as: UTF8.self).contains("off_sale"), "\(id): \(paid.status)")
        }

        // It survives a restart.
        _ = await server.stop()
        server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server-again.log"))
        #expect(try await StoreHTTP(baseURL: server.url).send("GET", "/v1/catalog").body.count > 0)
        let again = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: try await StoreHTTP(baseURL: server.url).send("GET", "/v1/catalog").body).products
        #expect(again.first { $0.id == Self.book }?.forSale == false, "withdrawn book lost at restart")

        // The operator removes it on purpose, told how many own it.
        let owners = try await admin("products", "owners", Self.book)
        #expect(owners.stdout == "\(Self.book): owned by 1 account(s)\n", "\(owners)")
        let careful = try await admin("products", "remove", Self.book)
        #expect(careful.status != 0 && careful.stderr.contains("owned by 1 account(s)") && careful.stderr.contains("--force"), "\(careful)")
        let stillThere = try await admin("products", "remove", Self.other, "--force")
        #expect(stillThere.status != 0 && stillThere.stderr.contains("still in the catalog files"), "\(stillThere)")
        let removed = try await admin("products", "remove", Self.book, "--force")
        #expect(removed.status == 0 && removed.stdout.contains("1 account(s) owned it"), "\(removed)")
        let after = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: try await StoreHTTP(baseURL: server.url).send("GET", "/v1/catalog").body).products
        #expect(!after.contains { $0.id == Self.book })
        _ = await server.stop()
    }

    @Test("off sale: a payment sent again with its key answers the transaction it got (a lost answer is not turned into a refusal); an Ask to Buy waiting for approval cannot be approved any more", arguments: TestEngine.all)
    func offSaleKeepsWhatWasPaid(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        let first = try await http.pay(Self.other, token: account.token, key: "paid-once")
        #expect(first.status == 200)
        let asked = try await http.pay(Self.book, token: account.token, method: .defer, key: "asked-once")
        let request = try asked.decode(PaymentResponse.self).transaction.transactionId
        try store.editCatalog("books.json") { products in
            for index in products.indices where [Self.other, Self.book].contains(products[index]["id"] as? String) { products[index]["forSale"] = false }
        }
        server.signal(SIGHUP)
        var offSale = false
        for _ in 0..<100 where !offSale {
            try await Task.sleep(for: .milliseconds(100))
            offSale = try await http.pay(Self.other, token: account.token, key: "new-\(UUID())").status == 409
        }
        #expect(offSale, "\(server.log)")
        let again = try await http.pay(Self.other, token: account.token, key: "paid-once")
        #expect(again.status == 200, "\(again.status) \(String(decoding: again.body, as: UTF8.self))")
        #expect(try again.decode(PaymentResponse.self).transaction.transactionId == first.decode(PaymentResponse.self).transaction.transactionId)
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let approved = try await http.send("POST", "/v1/admin/transactions/\(request)/approve", token: adminToken)
        #expect(approved.status == 409 && String(decoding: approved.body, as: UTF8.self).contains("off_sale"), "\(approved.status)")
        #expect(try await http.charges(accountId: account.accountId, adminToken: adminToken).count == 1)
        _ = await server.stop()
    }

    @Test("kiosk publish carries a product gone from the files into the published catalog, off sale, until --remove-withdrawn")
    func publishCarriesWithdrawn() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let out = directory.path("published").path
        let first = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out])
        #expect(first.status == 0, "\(first)")
        try store.editCatalog("books.json") { products in products.removeAll { $0["id"] as? String == Self.book } }
        let second = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out])
        #expect(second.status == 0 && second.stdout.contains("1 of them off sale"), "\(second)")
        let document = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: Data(contentsOf: URL(fileURLWithPath: out + "/catalog.json")))
        let kept = try #require(document.products.first { $0.id == Self.book })
        #expect(kept.forSale == false && kept.content != nil)
        let archive = try #require(kept.content)
        #expect(FileManager.default.fileExists(atPath: out + "/archives/\(archive.sha256).\(archive.format.fileExtension)"))
        let third = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out, "--remove-withdrawn", Self.book])
        #expect(third.status == 0 && third.stdout.contains("removed \(Self.book)"), "\(third)")
        let last = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: Data(contentsOf: URL(fileURLWithPath: out + "/catalog.json")))
        #expect(!last.products.contains { $0.id == Self.book })
    }
}
