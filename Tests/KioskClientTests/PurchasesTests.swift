import Crypto
import Foundation
import GRDB
import KioskClient
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import Testing

@Suite("Purchases against a live store")
struct PurchasesTests {
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
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            _ = try await client.sync()
            return try await body(server, client, url, directory)
        }
    }

    static func charges(_ server: KioskServer, _ url: String, _ client: KioskClient) async throws -> [Int] {
        let accountId = try #require(try client.accountID())
        return try await StoreHTTP(baseURL: url).charges(accountId: accountId, adminToken: server.adminToken)
    }

    /// The row `kiosk buy` leaves when the server charged but its answer never arrived: still
    /// `purchasing` with its key, due now or (with `retryIn`, an SQLite modifier) later.
    static func saveUnanswered(_ product: String, key: String, retryIn: String?, home: URL) throws -> DatabaseQueue {
        let database = try DatabaseQueue(path: home.appendingPathComponent("kiosk.sqlite").path)
        try database.write { db in
            try db.execute(sql: """
                INSERT INTO payment (idempotencyKey, productId, kind, quantity, paymentMethod, state, createdAt, updatedAt, attempts, nextAttemptAt)
                VALUES (?, ?, 'nonConsumable', 1, 'approve', 'purchasing', datetime('now'), datetime('now'), ?, datetime('now', ?))
                """, arguments: [key, product, retryIn == nil ? 0 : 1, retryIn])
        }
        return database
    }

    @Test("credits: bought, receipt stored and verified, finished, balance exact")
    func buyCredits() async throws {
        try await Self.withClient { server, client, url, _ in
            let result = try await client.buy(Self.pack5, quantity: 2)
            #expect(result.record.state == .finished)
            #expect(result.credits == 10)
            #expect(result.record.receipt != nil)
            #expect(try await client.accountSummary().credits == 10)
            #expect(try await Self.charges(server, url, client) == [998])
            let views = try await client.transactions()
            #expect(views.count == 1)
            #expect(views.first?.receiptProblem == nil)
        }
    }

    @Test("a restore that saves a purchase whose answer was lost: the purchase's own row takes its place and finishes, once")
    func restoreDuringLostAnswer() async throws {
        try await Self.withClient { server, client, url, directory in
            _ = try await client.accountSummary()
            let token = try #require(try client.accountToken())
            let key = UUID().uuidString
            // The server charged; the answer never arrived, and the row's next attempt is later.
            let paid = try await StoreHTTP(baseURL: url).pay(Self.book, token: token, key: key).decode(PaymentResponse.self)
            let database = try Self.saveUnanswered(Self.book, key: key, retryIn: "+1 hour", home: directory.path("home"))
            let restored = try await client.restore().restored
            #expect(restored.map(\.transactionId) == [paid.transaction.transactionId])

            try await database.write { try $0.execute(sql: "UPDATE payment SET nextAttemptAt = NULL WHERE idempotencyKey = ?", arguments: [key]) }
            _ = await client.replay()
            let rows = try await client.transactions().map(\.record).filter { $0.transactionId == paid.transaction.transactionId }
            #expect(rows.count == 1)
            #expect(rows.first?.idempotencyKey == key)
            #expect(rows.first?.state == .finished)
            #expect(try await Self.charges(server, url, client) == [799])
        }
    }

    @Test("a purchase whose answer was lost and which the store then refunded is saved as revoked with its receipt, not as declined")
    func lostAnswerThenRefund() async throws {
        try await Self.withClient { server, client, url, directory in
            _ = try await client.accountSummary()
            let token = try #require(try client.accountToken())
            let key = UUID().uuidString
            let http = StoreHTTP(baseURL: url)
            let paid = try await http.pay(Self.book, token: token, key: key).decode(PaymentResponse.self)
            let refund = try await http.send("POST", "/v1/admin/transactions/\(paid.transaction.transactionId)/refund", token: server.adminToken, json: #"{"reason": "goodwill"}"#)
            #expect(refund.status == 200)
            _ = try Self.saveUnanswered(Self.book, key: key, retryIn: nil, home: directory.path("home"))
            _ = await client.replay()
            let row = try #require(try await client.transactions().map(\.record).first { $0.idempotencyKey == key })
            #expect(row.state == .revoked)
            #expect(row.transactionId == paid.transaction.transactionId)
            #expect(row.receipt != nil)
            #expect(row.revocationReason == "goodwill")
            #expect(try client.downloads().isEmpty)
        }
    }

    @Test("a book: receipt stored, downloaded and installed before buy returns; --no-download finishes with the download queued")
    func buyBook() async throws {
        try await Self.withClient { _, client, url, _ in
            let result = try await client.buy(Self.book)
            #expect(result.record.state == .finished)
            #expect(result.record.receipt != nil)
            #expect(result.downloads?.installed == [Self.book])
            let later = try await client.buy(Self.issue, downloadNow: false)
            #expect(later.record.state == .finished)
            #expect(try client.downloads().first { $0.productId == Self.issue }?.state == .queued)
        }
    }

    @Test("declined and cancelled purchases charge nothing; declined says why")
    func declinedAndCancelled() async throws {
        try await Self.withClient { server, client, url, _ in
            let declined = try await client.buy(Self.book, method: .decline)
            #expect(declined.record.state == .failed)
            #expect(declined.record.lastError?.contains("declined") == true)
            let cancelled = try await client.buy(Self.book, method: .cancel)
            #expect(cancelled.record.state == .cancelled)
            #expect(try await Self.charges(server, url, client).isEmpty)
        }
    }

    @Test("Ask to Buy: deferred, then approved on the server, then delivered by the next replay")
    func deferredThenApproved() async throws {
        try await Self.withClient { server, client, url, _ in
            let deferred = try await client.buy(Self.book, method: .defer)
            #expect(deferred.record.state == .deferred)
            let id = try #require(deferred.record.transactionId)
            #expect(await client.replay() == ReplayReport())

            let approved = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken)
            #expect(approved.status == 200)
            let report = await client.replay()
            #expect(report.deferredResolved == 1)
            let view = try #require(try await client.transactions().first)
            #expect(view.record.state == .delivering)
            #expect(try client.downloads().first?.state == .queued)
            #expect(view.record.receipt != nil && view.receiptProblem == nil)
            #expect(try await Self.charges(server, url, client) == [799])
        }
    }

    @Test("what the store says a transaction was paid with reaches the device: an Ask to Buy approved after the book was bought is not charged, a redemption made on another device of the account is in credits, the operator's grant is granted")
    func paidByReachesTheDevice() async throws {
        try await Self.withClient { server, client, url, _ in
            let http = StoreHTTP(baseURL: url)
            let deferred = try await client.buy(Self.book, method: .defer, downloadNow: false)
            let id = try #require(deferred.record.transactionId)
            _ = try await client.buy(Self.book, downloadNow: false)
            #expect(try await http.send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken).status == 200)
            #expect(await client.replay().deferredResolved == 1)
            let approved = try #require(try await client.transactions().first { $0.record.transactionId == id })
            #expect(approved.record.paymentMethod == PaymentRecord.notCharged, "\(approved.record)")
            #expect(try await Self.charges(server, url, client) == [799], "one charge")

            // Another device of the account (its token, from another process) redeems credits.
            let token = try #require(try client.accountToken())
            #expect(try await http.pay(Self.pack5, token: token).status == 200)
            let body = String(decoding: try JSONEncoder().encode(RedemptionRequest(productId: Self.issue, idempotencyKey: UUID().uuidString)), as: UTF8.self)
            let redeemed = try await http.send("POST", "/v1/redemptions", token: token, json: body).decode(PaymentResponse.self)
            _ = try await client.restore(downloadNow: false)
            let seen = try #require(try await client.transactions().first { $0.record.transactionId == redeemed.transaction.transactionId })
            #expect(seen.record.paymentMethod == PaidBy.credits.rawValue, "\(seen.record)")

            // The operator's grant, shown as granted, not at the catalog's price.
            let grant = String(decoding: try JSONEncoder().encode(AdminGrantRequest(productId: "com.kiosk.books.lighthouse-keeper", reason: "goodwill", idempotencyKey: "g")), as: UTF8.self)
            let granted = try await http.send("POST", "/v1/admin/accounts/\(try #require(try client.accountID()))/grant", token: server.adminToken, json: grant).decode(StoreTransaction.self)
            _ = try await client.restore(downloadNow: false)
            let given = try #require(try await client.transactions().first { $0.record.transactionId == granted.transactionId })
            #expect(given.record.paymentMethod == PaidBy.operator.rawValue, "\(given.record)")
        }
    }

    @Test("replay reads only the changes after the last it applied; an answer it could not store is read again; a new account starts over")
    func replayIsIncremental() async throws {
        try await Self.withClient { server, client, url, directory in
            let settings = try DatabaseQueue(path: directory.path("home").appendingPathComponent("kiosk.sqlite").path)
            @Sendable func cursor() throws -> Int? {
                try settings.read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'replay.cursor'") }.flatMap { Int($0) }
            }
            let deferred = try await client.buy(Self.book, method: .defer)
            let id = try #require(deferred.record.transactionId)
            #expect(await client.replay() == ReplayReport())
            let first = try #require(try cursor())
            #expect(await client.replay() == ReplayReport())
            #expect(try cursor() == first, "nothing changed: the cursor stays")

            // An answer whose storing fails leaves the cursor where it was, so the next replay reads it again.
            let approved = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken)
            #expect(approved.status == 200)
            let account = try #require(try await settings.read { try String.fetchOne($0, sql: "SELECT value FROM setting WHERE key = 'account.id'") })
            try await settings.write { try $0.execute(sql: "UPDATE setting SET value = 'acct_someone_else' WHERE key = 'account.id'") }
            let refused = await client.replay()
            #expect(refused.deferredResolved == 0 && refused.failed == [Self.book], "\(refused)")
            #expect(try cursor() == first)
            try await settings.write { try $0.execute(sql: "UPDATE setting SET value = ? WHERE key = 'account.id'", arguments: [account]) }
            try await settings.write { try $0.execute(sql: "UPDATE payment SET nextAttemptAt = NULL") }
            let report = await client.replay()
            #expect(report.deferredResolved == 1, "\(report)")
            let second = try #require(try cursor())
            #expect(second > first)

            // A refund made on the store after that is the only change the next replay reads.
            let refund = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/refund", token: server.adminToken)
            #expect(refund.status == 200)
            let revoked = await client.replay()
            #expect(revoked.revoked == [Self.book], "\(revoked)")
            #expect(try cursor() ?? 0 > second)

            // Another account's change numbers are its own: linking one forgets the cursor.
            let other = try await StoreHTTP(baseURL: url).send("POST", "/v1/accounts", token: nil)
            let token = try #require((try JSONSerialization.jsonObject(with: other.body) as? [String: Any])?["token"] as? String)
            _ = try await client.linkAccount(token: token, force: true)
            #expect(try cursor() == nil)
        }
    }

    @Test("Ask to Buy twice: the second ask sends nothing; a row the store answers with the request already waiting is dropped, never sent again")
    func deferredTwice() async throws {
        try await Self.withClient { server, client, url, directory in
            let first = try await client.buy(Self.book, method: .defer)
            let id = try #require(first.record.transactionId)
            let second = try await client.buy(Self.book, method: .defer)
            #expect(second.alreadyPending && second.outcome == .complete)
            #expect(second.record.transactionId == id && second.record.id == first.record.id)
            #expect(try await client.transactions().count == 1)

            // A second ask already saved (another process, or a crash before the answer): the store
            // answers it with the request waiting, and the row goes instead of failing on the unique
            // transaction ID and being replayed later as a new request.
            let database = try Self.saveUnanswered(Self.book, key: "second-ask", retryIn: nil, home: directory.path("home"))
            try await database.write { try $0.execute(sql: "UPDATE payment SET paymentMethod = 'defer' WHERE idempotencyKey = 'second-ask'") }
            let report = await client.replay()
            #expect(report.failed.isEmpty, "\(report)")
            let rows = try await client.transactions().map(\.record)
            #expect(rows.map(\.state) == [.deferred] && rows.first?.transactionId == id)
            #expect(try await Self.charges(server, url, client).isEmpty)
        }
    }

    @Test("Ask to Buy: deferred, then declined: failed, nothing charged")
    func deferredThenDeclined() async throws {
        try await Self.withClient { server, client, url, _ in
            let deferred = try await client.buy(Self.book, method: .defer)
            let id = try #require(deferred.record.transactionId)
            _ = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/decline", token: server.adminToken)
            _ = await client.replay()
            let view = try #require(try await client.transactions().first)
            #expect(view.record.state == .failed)
            #expect(view.record.receipt == nil)
            #expect(try await Self.charges(server, url, client).isEmpty)
        }
    }

    @Test("credits redeemed for an issue")
    func redeem() async throws {
        try await Self.withClient { server, client, url, _ in
            _ = try await client.buy(Self.pack5)
            let result = try await client.redeem(Self.issue)
            #expect(result.record.state == .finished)
            #expect(result.credits == 3)
            #expect(try await client.accountSummary().owned == [Self.issue])
            #expect(try await Self.charges(server, url, client) == [499])
        }
    }

    @Test("restore into a second home linked to the account: books and the subscription, not credits")
    func restoreOnSecondDevice() async throws {
        try await Self.withClient { _, client, url, directory in
            _ = try await client.buy(Self.pack5)
            _ = try await client.buy(Self.book)
            _ = try await client.buy(Self.subscription)
            _ = try await client.redeem(Self.issue)
            let token = try #require(try client.accountToken())

            let second = try KioskClient(home: KioskHome(root: directory.path("second-home")), server: url)
            _ = try await second.sync()
            let linked = try await second.linkAccount(token: token)
            #expect(linked.accountId == (try client.accountID()))
            let restored = try await second.restore().restored
            #expect(Set(restored.map(\.productId)) == [Self.book, Self.subscription, Self.issue])
            #expect(restored.allSatisfy { $0.receipt != nil && $0.state == .finished })
            // A second restore finds nothing new.
            #expect(try await second.restore().restored.isEmpty)
        }
    }

    @Test("payments off: buy is refused and nothing is saved; products still list")
    func paymentsOff() async throws {
        try await Self.withClient { _, client, url, _ in
            try client.setPaymentsEnabled(false)
            await #expect(throws: ClientError.paymentsDisabled) { try await client.buy(Self.book) }
            #expect(try await client.transactions().isEmpty)
            #expect(try client.cachedCatalog().products.count == 13)
            try client.setPaymentsEnabled(true)
            #expect(try await client.buy(Self.book).record.state == .finished)
        }
    }

    @Test("offline: the purchase is kept as purchasing and sent, once, when the server is back")
    func storeAndForward() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        let home = KioskHome(root: directory.path("home"))
        let client = try await LiveServer.run(configuration) { _, url in
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()
            _ = try await client.accountSummary()
            return client
        }
        let offline = try await client.buy(Self.pack5)
        #expect(offline.savedOffline)
        #expect(offline.record.state == .purchasing)

        try await LiveServer.run(configuration) { (server, url) async throws -> Void in
            let client = try KioskClient(home: home, server: url)
            #expect(await client.replay().sent == 1)
            #expect(await client.replay() == ReplayReport())
            #expect(try await client.transactions().map(\.record.state) == [.finished])
            #expect(try await client.accountSummary().credits == 5)
            #expect(try await Self.charges(server, url, client) == [499])
        }
    }

    @Test("a store whose database refuses the purchase (a right revoked): the purchase stays saved, reported as pending with the store's message, and is sent once, with its key, when the right is back")
    func storeFailingUnderneath() async throws {
        let database = try await TestPostgres.shared.ordinaryRoleDatabase()
        let role = database.role
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = database.location
        try await LiveServer.run(configuration) { (server, url) async throws -> Void in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            _ = try await client.sync()
            _ = try await client.accountSummary()
            try database.psql(#"REVOKE INSERT ON "ledgerEntry" FROM \#(role)"#)
            let refused = try await client.buy(Self.pack5)
            #expect(refused.storeFailed?.contains("operator") == true, "\(String(describing: refused.storeFailed))")
            #expect(refused.outcome == .pending && refused.record.state == .purchasing)
            #expect(try await client.accountSummary().credits == 0)

            try database.psql(#"GRANT INSERT ON "ledgerEntry" TO \#(role)"#)
            #expect(await client.replay().sent == 1)
            #expect(try await client.transactions().map(\.record.state) == [.finished])
            #expect(try await client.accountSummary().credits == 5)
            #expect(try await Self.charges(server, url, client) == [499])
        }
        try database.drop()
    }

    @Test("a stored receipt whose signature does not verify is reported")
    func tamperedStoredReceipt() async throws {
        try await Self.withClient { _, client, url, directory in
            _ = try await client.buy(Self.book, downloadNow: false)
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

    @Test("restore goes on past a finished purchase whose stored receipt was altered: nothing is delivered on it, it stays finished, and what the store granted meanwhile is restored")
    func restorePastAlteredFinishedReceipt() async throws {
        try await Self.withClient { server, client, url, directory in
            _ = try await client.buy(Self.book)
            let database = try DatabaseQueue(path: directory.path("home/kiosk.sqlite").path)
            try await database.write { db in
                let receipt = try String.fetchOne(db, sql: "SELECT receipt FROM payment") ?? ""
                try db.execute(sql: "UPDATE payment SET receipt = ?, productId = 'com.kiosk.books.small-engines'", arguments: [String(receipt.dropLast(6)) + "AAAAAA"])
            }
            let accountId = try #require(try client.accountID())
            let grant = String(decoding: try JSONEncoder().encode(AdminGrantRequest(productId: "com.kiosk.books.lighthouse-keeper", reason: "goodwill", idempotencyKey: "g")), as: UTF8.self)
            #expect(try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/accounts/\(accountId)/grant", token: server.adminToken, json: grant).status == 200)
            let restored = try await client.restore()
            #expect(restored.restored.map(\.productId).contains("com.kiosk.books.lighthouse-keeper"), "\(restored)")
            let altered = try #require(try await client.transactions().first { $0.record.productId == "com.kiosk.books.small-engines" })
            #expect(altered.record.state == .finished && altered.receiptProblem != nil, "\(altered)")
            #expect(try client.downloads().first { $0.productId == "com.kiosk.books.small-engines" } == nil, "nothing delivered on it")
        }
    }

    @Test("a purchase this device learnt was revoked another way (its finish answered 'revoked', racing the refund) still has its content taken out when the change feed brings the revocation")
    func revokedByFinishAnswerIsRemoved() async throws {
        try await Self.withClient { server, client, url, directory in
            let bought = try await client.buy(Self.book)
            let id = try #require(bought.record.transactionId)
            #expect(FileManager.default.fileExists(atPath: directory.path("home/Library/\(Self.book)").path))
            let refund = try await StoreHTTP(baseURL: url).send("POST", "/v1/admin/transactions/\(id)/refund", token: server.adminToken, json: #"{"reason": "race"}"#)
            #expect(refund.status == 200)
            // What the finish's answer left: the row revoked, before the feed brought the change.
            let database = try DatabaseQueue(path: directory.path("home/kiosk.sqlite").path)
            try await database.write { try $0.execute(sql: "UPDATE payment SET state = 'revoked', revocationReason = 'race' WHERE transactionId = ?", arguments: [id]) }
            _ = await client.replay()
            #expect(!FileManager.default.fileExists(atPath: directory.path("home/Library/\(Self.book)").path), "the revoked book's content stayed in the library")
            #expect(try client.downloads().first { $0.productId == Self.book } == nil)
        }
    }

    @Test("a stored receipt signed by a key the store has since retired is not called forged: it names the key and says to restore")
    func retiredKeyReceipt() async throws {
        try await Self.withClient { server, client, _, directory in
            _ = try await client.buy(Self.book, downloadNow: false)
            let kid = await server.keys.signingKID
            _ = try await SigningKeys.rotate(server.store.database)
            try await server.keys.reload()
            try await SigningKeys.retire(kid, in: server.store.database)
            try await server.keys.reload()
            // The keys this device last fetched list the one that signed it as retired.
            let keySet = String(decoding: try JSONEncoder().encode(try await server.keys.jwks()), as: UTF8.self)
            let database = try DatabaseQueue(path: directory.path("home/kiosk.sqlite").path)
            try await database.write { db in
                try db.execute(sql: "UPDATE setting SET value = ? WHERE key = 'store.jwks'", arguments: [keySet])
            }
            let view = try #require(try await client.transactions().first)
            #expect(view.receiptProblem == "the receipt was signed by key \(kid), which the store has retired; run kiosk restore to get it re-signed", "\(view.receiptProblem ?? "")")
        }
    }

    @Test("a cached key set tampered with (the store's key ID, another key) heals: restore fetches the keys afresh once, keeps the store's set and installs the book; offline, the receipt is reported")
    func tamperedCachedKeySetHeals() async throws {
        try await Self.withClient { server, client, _, directory in
            _ = try await client.buy(Self.book, downloadNow: false)
            let genuine = try JSONEncoder().encode(try await server.keys.jwks())
            // The store's key ID over another Ed25519 key: every receipt of the store fails its
            // signature check against the cached set.
            var document = try #require(try JSONSerialization.jsonObject(with: genuine) as? [String: Any])
            let other = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
            func base64URL(_ bytes: Data) -> String {
                bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            }
            let x = base64URL(other)
            document["keys"] = (document["keys"] as? [[String: Any]] ?? []).map { key in
                var key = key
                key["x"] = x
                return key
            }
            let tampered = String(decoding: try JSONSerialization.data(withJSONObject: document), as: UTF8.self)
            let database = try DatabaseQueue(path: directory.path("home/kiosk.sqlite").path)
            try await database.write { db in
                try db.execute(sql: "UPDATE setting SET value = ? WHERE key = 'store.jwks'", arguments: [tampered])
            }
            #expect(try await client.transactions().first?.receiptProblem?.contains("does not verify") == true)
            let restored = try await client.restore()
            #expect(restored.downloads?.installed.contains(Self.book) == true, "\(restored)")
            let cached = try await database.read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'store.jwks'") }
            #expect(cached != tampered)
            #expect(try await client.transactions().first?.receiptProblem == nil)
        }
    }
}
