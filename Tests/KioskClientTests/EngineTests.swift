import Foundation
import GRDB
@testable import KioskClient
import KioskCore
@testable import KioskServer
@testable import KioskStore
import SQLKit
import KioskTestSupport
import Testing

/// The client engine's promises under unfriendly paths: several engines on one home, stale
/// flows, revocations, cancellation and restores on a new device.
@Suite("The client engine: one owner of the state, nothing stuck")
struct EngineTests {
    static let book = "com.kiosk.books.river-of-maps"
    static let large = "com.kiosk.books.large-atlas"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
    static let issue01 = "com.kiosk.magazines.harbor-monthly.issue-01"
    static let issue02 = "com.kiosk.magazines.harbor-monthly.issue-02"
    static let issue03 = "com.kiosk.magazines.harbor-monthly.issue-03"

    struct Context: Sendable {
        let server: KioskServer
        let url: String
        let store: SampleStore
        let directory: TemporaryDirectory

        var homeURL: URL { directory.path("home") }
        var home: KioskHome { KioskHome(root: homeURL) }

        func client(_ configuration: KioskClient.Configuration = KioskClient.Configuration(), home: KioskHome? = nil) throws -> KioskClient {
            try KioskClient(home: home ?? self.home, server: url, configuration: configuration)
        }

        func charges(_ client: KioskClient) async throws -> [Int] {
            let accountId = try #require(try client.accountID())
            return try await StoreHTTP(baseURL: url).charges(accountId: accountId, adminToken: server.adminToken)
        }

        func installedFile(_ product: String, _ file: String, home: URL? = nil) -> URL {
            (home ?? homeURL).appendingPathComponent("Library/\(product)/\(file)")
        }
    }

    static func withStore<T: Sendable>(largeMiB: Int = 0, _ body: @Sendable (Context) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        if largeMiB > 0 { try store.addLargeBook(large, megabytes: largeMiB) }
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        return try await LiveServer.run(configuration) { server, url in
            try await body(Context(server: server, url: url, store: store, directory: directory))
        }
    }

    /// A slow engine, so a test can act in the middle of a transfer.
    static var throttled: KioskClient.Configuration {
        var configuration = KioskClient.Configuration()
        configuration.maxReceiveSpeed = 2_000_000
        return configuration
    }

    /// Waits until the download of `product` has bytes on disk.
    static func waitForBytes(_ client: KioskClient, _ product: String) async throws {
        for _ in 0..<200 {
            if let record = try client.downloads().first(where: { $0.productId == product }), record.bytesDone > 0 { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        Issue.record("the download of \(product) never started")
    }

    // MARK: One owner

    @Test("a stale flow cannot move a finished purchase back: the transition throws, naming both states")
    func illegalTransition() async throws {
        try await Self.withStore { context in
            let client = try context.client()
            _ = try await client.sync()
            let bought = try await client.buy(Self.pack5)
            let id = try #require(bought.record.id)
            #expect(bought.record.state == .finished)
            let error = #expect(throws: IllegalTransition.self) { try PurchaseRows(database: client.database).markDelivering(id) }
            #expect(error?.description == "transaction \(bought.record.transactionId ?? "") (\(Self.pack5)) is finished and cannot become delivering")
            #expect(try PurchaseRows(database: client.database).payment(id)?.state == .finished)
        }
    }

    @Test("an app following the event stream sees every state of a purchase and its download, in order")
    func eventStream() async throws {
        try await Self.withStore { context in
            let client = try context.client()
            _ = try await client.sync()
            let events = client.events
            let collector = Task {
                var transactions: [PaymentState] = []
                var downloads: [DownloadState] = []
                var progress = 0
                for await event in events {
                    switch event {
                    case .transaction(let record) where record.productId == Self.book:
                        transactions.append(record.state)
                        if record.state == .finished { return (transactions, downloads, progress) }
                    case .download(let record) where record.productId == Self.book:
                        downloads.append(record.state)
                    case .progress(let update) where update.key == Self.book:
                        progress += 1
                    default:
                        break
                    }
                }
                return (transactions, downloads, progress)
            }
            _ = try await client.buy(Self.book)
            let (transactions, downloads, progress) = await collector.value
            #expect(transactions == [.purchasing, .purchased, .delivering, .finished])
            #expect(downloads == [.queued, .downloading, .verifying, .unpacking, .installed])
            #expect(progress >= 1)
        }
    }

    // MARK: Nothing blocks, nothing is stuck

    @Test("one poisoned transaction keeps its error and backoff while the others complete")
    func poisonedTransaction() async throws {
        try await Self.withStore { context in
            _ = try await context.client().sync()
            let offline = try KioskClient(home: context.home, server: "http://127.0.0.1:1")
            let saved = try await offline.buy(Self.pack5)
            #expect(saved.savedOffline)
            let database = try DatabaseQueue(path: context.homeURL.appendingPathComponent("kiosk.sqlite").path)
            try await database.write { db in
                // Saved for this store while it could not be reached (a purchase saved for another
                // URL is never sent here: PurchaseCommandTests.unsentPurchaseBelongsToItsStore).
                try db.execute(sql: "UPDATE payment SET storeURL = ? WHERE state = 'purchasing'", arguments: [context.url])
                try db.execute(sql: """
                    INSERT INTO payment (productId, kind, quantity, paymentMethod, state, transactionId, receipt, createdAt, updatedAt)
                    VALUES ('com.kiosk.books.withdrawn', 'nonConsumable', 1, 'approve', 'purchased', 'txn_poison', 'a.b.c', ?, ?)
                    """, arguments: [Date(), Date()])
            }

            // A backoff of a minute or more: "not due yet" below must not depend on how fast this machine is.
            var configuration = KioskClient.Configuration()
            configuration.backoff = Backoff(base: 120)
            let client = try context.client(configuration)
            let report = await client.replay()
            #expect(report.sent == 1)
            #expect(report.failed == ["com.kiosk.books.withdrawn"])
            let rows = try await client.transactions().map(\.record)
            #expect(rows.first { $0.productId == Self.pack5 }?.state == .finished)
            let poison = try #require(rows.first { $0.productId == "com.kiosk.books.withdrawn" })
            #expect(poison.state == .purchased)
            #expect(poison.attempts == 1)
            #expect(poison.lastError?.contains("no longer in the store's catalog") == true)
            #expect((poison.nextAttemptAt ?? .distantPast) > Date())
            // Not due yet: the next command leaves it alone and everything else still works.
            #expect(await client.replay().failed.isEmpty)
            #expect(try await client.buy(Self.book).downloads?.installed == [Self.book])
        }
    }

    @Test("buying an owned book charges nothing and reinstalls a missing folder; a damaged one is downloaded again")
    func rebuyAndRepair() async throws {
        try await Self.withStore { context in
            let client = try context.client()
            _ = try await client.sync()
            let first = try await client.buy(Self.book)
            #expect(first.record.state == .finished && !first.alreadyOwned)

            let again = try await client.buy(Self.book)
            #expect(again.alreadyOwned)
            #expect(again.record.transactionId == first.record.transactionId)
            #expect(try await client.transactions().count == 1)

            let folder = context.homeURL.appendingPathComponent("Library/\(Self.book)")
            try FileManager.default.removeItem(at: folder)
            let reinstalled = try await client.buy(Self.book)
            #expect(reinstalled.alreadyOwned)
            #expect(reinstalled.downloads?.installed == [Self.book])
            #expect(FileManager.default.fileExists(atPath: folder.path))

            let chapter = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().first)
            try FileManager.default.removeItem(at: folder.appendingPathComponent(chapter))
            #expect(try await client.queueNewContent(includingUpdates: true) == [Self.book])
            #expect(try await client.runDownloads().installed == [Self.book])
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(chapter).path))

            #expect(try await context.charges(client).count == 1)
            #expect(try await client.transactions().count == 1)
        }
    }

    @Test("restore brings back an owned book and a subscription's issue whose downloads the reader cancelled; nothing is charged")
    func restoreRequeuesCancelled() async throws {
        try await Self.withStore { context in
            let client = try context.client()
            _ = try await client.sync()
            let bought = try await client.buy(Self.book, downloadNow: false)
            #expect(bought.record.state == .finished)
            _ = try await client.buy(Self.subscription, downloadNow: false)
            _ = try client.cancelDownload(Self.book)
            _ = try client.cancelDownload(Self.issue03)
            let result = try await client.restore()
            #expect(result.restored.isEmpty)
            #expect(result.downloads?.installed.sorted() == [Self.book, Self.issue03].sorted())
            #expect(FileManager.default.fileExists(atPath: context.homeURL.appendingPathComponent("Library/\(Self.book)").path))
            #expect(try await context.charges(client).count == 2)
        }
    }

    @Test("a revocation reaches the client at its next contact: revoked with date and reason, content removed")
    func revocation() async throws {
        try await Self.withStore { context in
            let client = try context.client()
            _ = try await client.sync()
            let bought = try await client.buy(Self.book)
            let id = try #require(bought.record.transactionId)
            let folder = context.homeURL.appendingPathComponent("Library/\(Self.book)")
            #expect(FileManager.default.fileExists(atPath: folder.path))

            let revoked = try await StoreHTTP(baseURL: context.url).send(
                "POST", "/v1/admin/transactions/\(id)/revoke", token: context.server.adminToken, json: #"{"reason": "refunded at the reader's request"}"#)
            #expect(revoked.status == 200)
            let report = await client.replay()
            #expect(report.revoked == [Self.book])
            let record = try #require(try await client.transactions().first?.record)
            #expect(record.state == .revoked)
            #expect(record.revocationReason == "refunded at the reader's request")
            #expect(abs((record.revokedAt ?? .distantPast).timeIntervalSinceNow) < 60)
            #expect(!FileManager.default.fileExists(atPath: folder.path))
            #expect(try client.libraryEntries().isEmpty)
            #expect(try client.downloads().isEmpty)
            // Seen once: the next contact changes nothing.
            #expect(await client.replay().revoked.isEmpty)
        }
    }

    @Test("restore on a new device before any sync delivers everything, including the issues an expired subscription covered")
    func restoreBeforeSyncWithExpiredSubscription() async throws {
        try await Self.withStore { context in
            let first = try context.client()
            _ = try await first.sync()
            _ = try await first.buy(Self.book)
            let accountId = try #require(try first.accountID())
            let token = try #require(try first.accountToken())
            try await Self.insertExpiredSubscription(context, accountId: accountId)

            let secondHome = KioskHome(root: context.directory.path("second-home"))
            let second = try context.client(home: secondHome)
            _ = try await second.linkAccount(token: token)
            let result = try await second.restore()
            #expect(Set(result.restored.map(\.productId)) == [Self.book, Self.subscription])
            #expect(result.restored.allSatisfy { $0.state == .finished })
            #expect(result.outcome == .complete)
            #expect(Set(result.downloads?.installed ?? []) == [Self.book, Self.issue01, Self.issue02])
            #expect(try second.downloads().map(\.productId).contains(Self.issue03) == false)
            #expect(try await second.transactions().allSatisfy { $0.record.state == .finished })
        }
    }

    /// A subscription bought on 2026-09-15 that ran out on 2026-10-15, signed by the store's key.
    static func insertExpiredSubscription(_ context: Context, accountId: String) async throws {
        let purchased = ISO8601DateFormatter().date(from: "2026-09-15T10:00:00Z") ?? Date()
        let expires = ISO8601DateFormatter().date(from: "2026-10-15T10:00:00Z") ?? Date()
        let claims = ReceiptClaims(
            transactionId: "txn_expired0001", originalTransactionId: "txn_expired0001", productId: subscription, kind: .subscription,
            quantity: 1, accountId: accountId, purchaseDate: purchased, expiresDate: expires, environment: .sandbox, issuer: "kiosk-sandbox")
        let receipt = try await context.server.keys.sign(claims)
        // Through the server's own connection: a second SQLite library opening the same file in
        // this process would break SQLite's POSIX locks (closing a descriptor drops them all).
        try await context.server.store.database.write { db in
            try await db.raw("""
                INSERT INTO "storeTransaction" ("id", "accountId", "productId", "kind", "quantity", "originalTransactionId", "purchaseDate", "expiresDate",
                    "status", "paymentMethod", "idempotencyKey", "amountCents", "currency", "creditsGranted", "creditsSpent", "signedTransaction", "createdAt")
                VALUES ('txn_expired0001', \(bind: accountId), \(bind: subscription), 'subscription', 1, 'txn_expired0001', \(bind: purchased), \(bind: expires),
                    'purchased', 'approve', 'test-expired', 499, 'USD', 0, 0, \(bind: receipt), \(bind: purchased))
                """).run()
        }
    }

    // MARK: Stopping a transfer

    @Test("cancelling the Task stops the transfer at once; the download waits with its bytes kept")
    func taskCancellation() async throws {
        try await Self.withStore(largeMiB: 8) { context in
            let client = try context.client(Self.throttled)
            _ = try await client.sync()
            _ = try await client.buy(Self.large, downloadNow: false)
            let run = Task { try await client.runDownloads() }
            try await Self.waitForBytes(client, Self.large)
            let started = ContinuousClock.now
            run.cancel()
            let report = try await run.value
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < stopBound, "stopped after \(elapsed)")
            #expect(report.interrupted == [Self.large])
            let record = try #require(try client.downloads().first { $0.productId == Self.large })
            #expect(record.state == .waiting && record.owner == nil)
            let partial = context.homeURL.appendingPathComponent("downloads/\(Self.large).partial")
            #expect(((try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0) > 0)
        }
    }

    @Test("a pause or cancel from another engine on the same home stops a running transfer at once; a cancelled download is never installed")
    func pauseAndCancelFromElsewhere() async throws {
        try await Self.withStore(largeMiB: 8) { context in
            let running = try context.client(Self.throttled)
            let other = try context.client()
            _ = try await running.sync()
            _ = try await running.buy(Self.large, downloadNow: false)

            let first = Task { try await running.runDownloads() }
            try await Self.waitForBytes(running, Self.large)
            var started = ContinuousClock.now
            let paused = try other.pauseDownload(Self.large)
            var report = try await first.value
            #expect(ContinuousClock.now - started < stopBound, "stopped \(ContinuousClock.now - started) after it")
            #expect(report.paused == [Self.large] && report.installed.isEmpty)
            #expect(paused.state == .paused)
            let kept = try #require(try other.downloads().first { $0.productId == Self.large })
            #expect(kept.state == .paused && kept.bytesDone > 0)

            _ = try await other.queueNewContent(includingUpdates: true)
            let second = Task { try await running.runDownloads() }
            try await Task.sleep(for: .milliseconds(300))
            started = ContinuousClock.now
            _ = try other.cancelDownload(Self.large)
            report = try await second.value
            #expect(ContinuousClock.now - started < stopBound, "stopped \(ContinuousClock.now - started) after it")
            #expect(report.cancelled == [Self.large] && report.installed.isEmpty)
            #expect(try running.downloads().first { $0.productId == Self.large }?.state == .cancelled)
            #expect(!FileManager.default.fileExists(atPath: context.homeURL.appendingPathComponent("Library/\(Self.large)").path))
            #expect(!FileManager.default.fileExists(atPath: context.homeURL.appendingPathComponent("downloads/\(Self.large).partial").path))
        }
    }

    @Test("two engines on one home: one downloads, the other waits for it; the bytes arrive once and install byte-exact")
    func twoEnginesOneDownload() async throws {
        try await Self.withStore(largeMiB: 8) { context in
            let first = try context.client(Self.throttled)
            let second = try context.client(Self.throttled)
            _ = try await first.sync()
            _ = try await first.buy(Self.large, downloadNow: false)
            async let a = first.runDownloads()
            async let b = second.runDownloads()
            let (one, two) = try await (a, b)
            #expect((one.installed + two.installed) == [Self.large])
            #expect((one.installedElsewhere + two.installedElsewhere) == [Self.large])
            let size = try #require(try first.downloads().first { $0.productId == Self.large }?.size)
            #expect(one.bytesReceived + two.bytesReceived == size)
            let plates = try Data(contentsOf: context.installedFile(Self.large, "plates.bin"))
            #expect(plates == TestOrigin.incompressible(8 << 20))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: context.homeURL.appendingPathComponent("Library").path)
            #expect(!leftovers.contains { $0.hasPrefix(".") })
        }
    }
}
