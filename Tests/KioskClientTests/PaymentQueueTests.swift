import Foundation
import GRDB
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

@Suite("The payment queue against a live store")
struct PaymentQueueTests {
    static let book = "com.kiosk.books.river-of-maps"
    static let issue = "com.kiosk.magazines.harbor-monthly.issue-01"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// A live server, and a client that has synced its catalog.
    static func withClient<T: Sendable>(
        _ body: @Sendable (KioskServer, KioskClient, String, TemporaryDirectory) async throws -> T
    ) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        return try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")))
            _ = try await client.syncCatalog(server: url)
            return try await body(server, client, url, directory)
        }
    }

    static func charges(_ server: KioskServer, _ url: String, _ client: KioskClient) async throws -> [Int] {
        let accountId = try #require(try await client.accountID())
        return try await StoreHTTP(baseURL: url).charges(accountId: accountId, adminToken: server.adminToken)
    }

    @Test("credits: bought, receipt stored and verified, finished, balance exact")
    func buyCredits() async throws {
        try await Self.withClient { server, client, url, _ in
            let result = try await client.buy(Self.pack5, quantity: 2, server: url)
            #expect(result.record.state == .finished)
            #expect(result.credits == 10)
            #expect(result.record.receipt != nil)
            #expect(try await client.accountSummary(server: url).credits == 10)
            #expect(try await Self.charges(server, url, client) == [998])
            let views = try await client.transactions()
            #expect(views.count == 1)
            #expect(views.first?.receiptProblem == nil)
        }
    }

    @Test("a book: receipt stored, then waiting in delivering for its download; --no-download finishes")
    func buyBook() async throws {
        try await Self.withClient { _, client, url, _ in
            let result = try await client.buy(Self.book, server: url)
            #expect(result.record.state == .delivering)
            #expect(result.record.receipt != nil)
            let later = try await client.buy(Self.issue, downloadNow: false, server: url)
            #expect(later.record.state == .finished)
        }
    }

    @Test("declined and cancelled purchases charge nothing; declined says why")
    func declinedAndCancelled() async throws {
        try await Self.withClient { server, client, url, _ in
            let declined = try await client.buy(Self.book, method: .decline, server: url)
            #expect(declined.record.state == .failed)
            #expect(declined.record.lastError?.contains("declined") == true)
            let cancelled = try await client.buy(Self.book, method: .cancel, server: url)
            #expect(cancelled.record.state == .cancelled)
            #expect(try await Self.charges(server, url, client).isEmpty)
        }
    }

    @Test("Ask to Buy: deferred, then approved on the server, then delivered by the next replay")
    func deferredThenApproved() async throws {
        try await Self.withClient { server, client, url, _ in
            let deferred = try await client.buy(Self.book, method: .defer, server: url)
            #expect(deferred.record.state == .deferred)
            let id = try #require(deferred.record.transactionId)
            #expect(try await client.replay(server: url) == ReplayReport())

            let approved = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken)
            #expect(approved.status == 200)
            let report = try await client.replay(server: url)
            #expect(report.deferredResolved == 1)
            let view = try #require(try await client.transactions().first)
            #expect(view.record.state == .delivering)
            #expect(view.record.receipt != nil && view.receiptProblem == nil)
            #expect(try await Self.charges(server, url, client) == [799])
        }
    }

    @Test("Ask to Buy: deferred, then declined: failed, nothing charged")
    func deferredThenDeclined() async throws {
        try await Self.withClient { server, client, url, _ in
            let deferred = try await client.buy(Self.book, method: .defer, server: url)
            let id = try #require(deferred.record.transactionId)
            _ = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/decline", token: server.adminToken)
            _ = try await client.replay(server: url)
            let view = try #require(try await client.transactions().first)
            #expect(view.record.state == .failed)
            #expect(view.record.receipt == nil)
            #expect(try await Self.charges(server, url, client).isEmpty)
        }
    }

    @Test("credits redeemed for an issue")
    func redeem() async throws {
        try await Self.withClient { server, client, url, _ in
            _ = try await client.buy(Self.pack5, server: url)
            let result = try await client.redeem(Self.issue, server: url)
            #expect(result.record.state == .delivering)
            #expect(result.credits == 3)
            #expect(try await client.accountSummary(server: url).owned == [Self.issue])
            #expect(try await Self.charges(server, url, client) == [499])
        }
    }

    @Test("restore into a second home linked to the account: books and the subscription, not credits")
    func restoreOnSecondDevice() async throws {
        try await Self.withClient { _, client, url, directory in
            _ = try await client.buy(Self.pack5, server: url)
            _ = try await client.buy(Self.book, server: url)
            _ = try await client.buy(Self.subscription, server: url)
            _ = try await client.redeem(Self.issue, server: url)
            let token = try #require(try await client.accountToken())

            let second = try KioskClient(home: KioskHome(root: directory.path("second-home")))
            _ = try await second.syncCatalog(server: url)
            let linked = try await second.linkAccount(token: token, server: url)
            #expect(linked.accountId == (try await client.accountID()))
            let restored = try await second.restore(server: url)
            #expect(Set(restored.map(\.productId)) == [Self.book, Self.subscription, Self.issue])
            #expect(restored.allSatisfy { $0.receipt != nil })
            // A second restore finds nothing new.
            #expect(try await second.restore(server: url).isEmpty)
        }
    }

    @Test("payments off: buy is refused and nothing is saved; products still list")
    func paymentsOff() async throws {
        try await Self.withClient { _, client, url, _ in
            try await client.setPaymentsEnabled(false)
            await #expect(throws: ClientError.paymentsDisabled) { try await client.buy(Self.book, server: url) }
            #expect(try await client.transactions().isEmpty)
            #expect(try await client.cachedCatalog().products.count == 9)
            try await client.setPaymentsEnabled(true)
            #expect(try await client.buy(Self.book, server: url).record.state == .delivering)
        }
    }

    @Test("offline: the purchase is kept as purchasing and sent, once, when the server is back")
    func storeAndForward() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        let client = try KioskClient(home: KioskHome(root: directory.path("home")))
        let firstURL = try await LiveServer.run(configuration) { _, url in
            _ = try await client.syncCatalog(server: url)
            _ = try await client.accountSummary(server: url)
            return url
        }
        let offline = try await client.buy(Self.pack5, server: firstURL)
        #expect(offline.savedOffline)
        #expect(offline.record.state == .purchasing)

        try await LiveServer.run(configuration) { (server, url) async throws -> Void in
            #expect(try await client.replay(server: url).sent == 1)
            #expect(try await client.replay(server: url) == ReplayReport())
            #expect(try await client.transactions().map(\.record.state) == [.finished])
            #expect(try await client.accountSummary(server: url).credits == 5)
            #expect(try await Self.charges(server, url, client) == [499])
        }
    }

    @Test("a stored receipt whose signature does not verify is reported")
    func tamperedStoredReceipt() async throws {
        try await Self.withClient { _, client, url, directory in
            _ = try await client.buy(Self.book, server: url)
            let database = try DatabaseQueue(path: directory.path("home/kiosk.sqlite").path)
            try await database.write { db in
                let receipt = try String.fetchOne(db, sql: "SELECT receipt FROM payment") ?? ""
                let forged = String(receipt.dropLast(6)) + "AAAAAA"
                try db.execute(sql: "UPDATE payment SET receipt = ?", arguments: [forged])
            }
            let view = try #require(try await client.transactions().first)
            #expect(view.receiptProblem?.contains("does not verify") == true)
        }
    }
}
