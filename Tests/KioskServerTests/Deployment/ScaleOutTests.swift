import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// Two `kiosk serve` instances over one PostgreSQL database are one store.
@Suite("Two instances over one PostgreSQL database")
struct ScaleOutTests {
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"

    /// `count` requests at once, alternating between instances A and B; `send` is given the
    /// instance's client and the request's index.
    static func splitOverBoth<T: Sendable>(
        _ count: Int, _ a: StoreHTTP, _ b: StoreHTTP, _ send: @escaping @Sendable (StoreHTTP, Int) async throws -> T
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: T.self) { group in
            for index in 0..<count {
                let http = index.isMultiple(of: 2) ? a : b
                group.addTask { try await send(http, index) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// Instances A and B on their own data folders (their own packed content) and one database.
    static func withTwoInstances(_ body: @Sendable (_ a: (KioskServer, StoreHTTP), _ b: (KioskServer, StoreHTTP)) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let database = try await TestPostgres.shared.freshDatabase()
        @Sendable func configuration(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(
                catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent(name))
            configuration.database = database
            return configuration
        }
        try await LiveServer.run(configuration("a")) { a, urlA in
            try await LiveServer.run(configuration("b")) { b, urlB in
                try await body((a, StoreHTTP(baseURL: urlA)), (b, StoreHTTP(baseURL: urlB)))
            }
        }
    }

    @Test("four instances started at once on a new database: each migrates or finds the work done, and all serve")
    func instancesStartTogether() async throws {
        guard case .postgres(let url) = try await TestPostgres.shared.freshDatabase() else { return }
        let directory = try TemporaryDirectory()
        let folders = try (0..<4).map { _ in try TemporaryDirectory() }
        let stores = try folders.map { try SampleStore(in: $0) }
        let results = try await withThrowingTaskGroup(of: Result<ServerProcess, any Error>.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    do { return .success(try await ServerProcess.start(store, extraArguments: ["--database", url], log: directory.path("server-\(index).log"))) }
                    catch { return .failure(error) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for result in results {
            switch result {
            case .success(let server):
                #expect(try await StoreHTTP(baseURL: server.url).send("GET", "/healthz").status == 200)
                _ = await server.stop()
            case .failure(let error):
                Issue.record("an instance did not start: \(error)")
            }
        }
    }

    @Test("a purchase made on A is listed, finished, replayed and refunded on B; an Ask to Buy made on B is approved on A")
    func purchaseAcrossInstances() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let key = UUID().uuidString
            let bought = try await a.1.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            let id = bought.transaction.transactionId

            // B sees it, replays it by its key (no second charge) and finishes it.
            let replayed = try await b.1.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            #expect(replayed.transaction.transactionId == id)
            let finished = try await b.1.send("POST", "/v1/transactions/\(id)/finish", token: account.token).decode(StoreTransaction.self)
            #expect(finished.finished)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == [499])

            // An Ask to Buy made on B waits; A approves it; the buyer sees it purchased on B.
            let asked = try await b.1.pay("com.kiosk.credits.pack-5", token: account.token, method: .defer).decode(PaymentResponse.self)
            #expect(asked.transaction.status == .deferred)
            let approved = try await a.1.send("POST", "/v1/admin/transactions/\(asked.transaction.transactionId)/approve", token: a.0.adminToken)
            #expect(approved.status == 200)
            let page = try await b.1.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.first { $0.transactionId == asked.transaction.transactionId }?.status == .purchased)

            // Refunded on B, the receipt stops entitling on A.
            let refunded = try await b.1.send("POST", "/v1/admin/transactions/\(id)/refund", token: b.0.adminToken, json: #"{"reason": "test"}"#)
            #expect(refunded.status == 200)
            let receipt = try #require(bought.transaction.signedTransaction)
            #expect(try await a.1.verifyReceipt(receipt).status == 21010)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken).sorted() == [-499, 499, 499])
        }
    }

    @Test("one idempotency key sent to both instances at once, 16 times: one transaction, one charge")
    func idempotencyRace() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let key = UUID().uuidString
            let replies = try await Self.splitOverBoth(16, a.1, b.1) { http, _ in try await http.pay(Self.book, token: account.token, key: key) }
            #expect(replies.allSatisfy { $0.status == 200 })
            let ids = Set(try replies.map { try $0.decode(PaymentResponse.self).transaction.transactionId })
            #expect(ids.count == 1)
            #expect(try await b.1.charges(accountId: account.accountId, adminToken: b.0.adminToken) == [499])
        }
    }

    @Test("16 buys of one book with different keys, split over both instances: one charge, the rest free re-buys of it")
    func buysRaceAcrossInstances() async throws {
        // Within one instance payments of an account take turns; across instances only the
        // database's compare-and-set and unique indexes stand between them.
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let replies = try await Self.splitOverBoth(16, a.1, b.1) { http, _ in
                try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            }
            #expect(replies.filter { $0.owned != true }.count == 1)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == [499])
            let page = try await b.1.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.count == 16)
            #expect(page.transactions.allSatisfy { $0.status == .purchased })
        }
    }

    @Test("24 credit packs with different keys and a replay of each, split over both instances: 24 charges, a balance of exactly 120")
    func packsRaceAcrossInstances() async throws {
        // A pack's charge is written without a look-up, at whatever revision the account is at:
        // across instances only PostgreSQL's row lock orders them, and the unique index on the
        // key answers the replays.
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let replies = try await Self.splitOverBoth(48, a.1, b.1) { http, index in
                try await http.pay(Self.pack5, token: account.token, key: "pack-\(index / 2)").decode(PaymentResponse.self)
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 24)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == Array(repeating: 499, count: 24))
            #expect(try await b.1.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 120)
            // Each of the 24 first answers is a balance it left: 5, 10, ... 120 once each.
            let first = Dictionary(grouping: replies, by: \.transaction.transactionId).values.map { $0.map(\.credits).min() ?? 0 }
            #expect(first.sorted() == Array(stride(from: 5, through: 120, by: 5)))
        }
    }

    @Test("a key rotated on A signs A's next receipts, B verifies them at once, and receipts signed before keep verifying on both")
    func keyRotation() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let before = try #require(try await a.1.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction)
            let oldKID = await a.0.keys.signingKID

            let newKID = try await SigningKeys.rotate(a.0.database)
            try await a.0.keys.reload()
            #expect(newKID != oldKID)
            let after = try #require(try await a.1.pay("com.kiosk.credits.pack-5", token: account.token).decode(PaymentResponse.self).transaction.signedTransaction)
            #expect(try Self.kid(of: after) == newKID)

            // B has not read the keys since: a receipt with an unknown kid makes it look again.
            #expect(try await b.1.verifyReceipt(after).status == 0)
            #expect(try await b.1.verifyReceipt(before).status == 0)
            #expect(try await a.1.verifyReceipt(before).status == 0)
            let jwks = try await b.1.send("GET", "/.well-known/jwks.json").decode(JWKSDocument.self)
            #expect(Set(jwks.keys.map(\.kid)) == [oldKID, newKID])
            // The JWKS a client fetches on meeting a new kid lists a key rotated a moment ago elsewhere.
            let third = try await SigningKeys.rotate(a.0.database)
            let fresh = try await b.1.send("GET", "/.well-known/jwks.json").decode(JWKSDocument.self)
            #expect(Set(fresh.keys.map(\.kid)) == [oldKID, newKID, third])

            // Retiring the old key takes it out of the JWKS; its receipts stop verifying.
            try await SigningKeys.retire(third, in: b.0.database)
            try await SigningKeys.retire(oldKID, in: b.0.database)
            try await a.0.keys.reload()
            #expect(try await a.1.verifyReceipt(before).status != 0)
            #expect(try await a.1.verifyReceipt(after).status == 0)
        }
    }

    @Test("instances serving one published folder give the same catalog and ETag without packing; a folder missing an archive stops the server, naming the file")
    func publishedFolder() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let folder = PublishedFolder(directory.path("published"))
        let published = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        // Publishing again packs nothing new and gives the same document.
        let again = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        #expect(again.etag == published.etag)

        func serve(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(
                catalogDirectory: directory.path("no-catalog"), contentDirectory: directory.path("no-content"), dataDirectory: directory.path(name))
            configuration.publishedDirectory = folder.url
            return configuration
        }
        let etags = try await [serve("a"), serve("b")].asyncMap { configuration in
            try await LiveServer.run(configuration) { server, url in
                #expect(!FileManager.default.fileExists(atPath: directory.path(configuration.dataDirectory.lastPathComponent + "/content").path), "an instance packed")
                let reply = try await HTTPClient().send(HTTPRequest(url: url + "/v1/catalog"))
                #expect(reply.status == 200)
                return reply.headers["etag"] ?? ""
            }
        }
        #expect(etags == [published.gzipETag, published.gzipETag])

        let archive = try #require(published.archives.values.first).file
        try FileManager.default.removeItem(at: archive)
        let error = await #expect(throws: PublishedFolderError.self) {
            try await LiveServer.run(serve("c")) { _, _ in }
        }
        #expect(error?.description.hasPrefix("\(archive.path): is missing") == true)
    }

    @Test("a catalog with nothing to pack (credit packs only) publishes")
    func publishWithoutContent() throws {
        let directory = try TemporaryDirectory()
        let catalog = directory.path("Catalog")
        try FileManager.default.createDirectory(at: catalog, withIntermediateDirectories: true)
        try Data(#"{"products": [{"id": "com.example.credits.five", "kind": "consumable", "title": "5 credits", "price": "4.99", "currency": "USD", "credits": 5}]}"#.utf8)
            .write(to: catalog.appendingPathComponent("credits.json"))
        let folder = PublishedFolder(directory.path("published"))
        let published = try folder.publish(catalog: catalog, content: directory.path("Content"), logger: Logger(label: "test"))
        #expect(published.products.keys.sorted() == ["com.example.credits.five"])
        #expect(try Data(contentsOf: folder.catalogFile) == published.body)
    }

    static func kid(of jws: String) throws -> String {
        var header = String(jws.split(separator: ".")[0]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while header.count % 4 != 0 { header += "=" }
        let object = try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: header))) as? [String: Any]
        return try #require(object?["kid"] as? String)
    }

    struct JWKSDocument: Decodable {
        struct Key: Decodable { var kid: String }
        var keys: [Key]
    }
}

