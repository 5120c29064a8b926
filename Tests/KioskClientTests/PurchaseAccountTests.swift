import Foundation
import GRDB
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The account a saved purchase records, in homes made before it did.
@Suite("A saved purchase's account")
struct PurchaseAccountTests {
    static let book = "com.kiosk.books.river-of-maps"

    @Test("a home from before purchases recorded their account: its unanswered purchase is taken as the home's account's and sent under it, once")
    func migratedHome() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            let home = KioskHome(root: directory.path("home"))
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()
            let accountId = try await client.accountSummary().accountId
            let token = try #require(try client.accountToken())
            // Charged, its answer lost, in the schema before the column: the migration is run again.
            let key = UUID().uuidString
            _ = try await StoreHTTP(baseURL: url).pay(Self.book, token: token, key: key)
            let database = try DatabaseQueue(path: home.root.appendingPathComponent("kiosk.sqlite").path)
            try await database.write { db in
                try db.execute(sql: "ALTER TABLE payment DROP COLUMN accountId")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v11-purchase-account'")
                try db.execute(sql: """
                    INSERT INTO payment (idempotencyKey, productId, kind, quantity, paymentMethod, state, createdAt, updatedAt, sentAt)
                    VALUES (?, ?, 'nonConsumable', 1, 'approve', 'purchasing', datetime('now'), datetime('now'), datetime('now'))
                    """, arguments: [key, Self.book])
            }
            try database.close()

            let reopened = try KioskClient(home: home, server: url)
            #expect(try await reopened.transactions().map(\.record.accountId) == [accountId])
            _ = await reopened.replay()
            let rows = try await reopened.transactions().map(\.record)
            #expect(rows.map(\.state) != [.purchasing] && rows.map(\.idempotencyKey) == [key], "\(rows)")
            #expect(try await StoreHTTP(baseURL: url).charges(accountId: accountId, adminToken: server.adminToken) == [799])
        }
    }
}
