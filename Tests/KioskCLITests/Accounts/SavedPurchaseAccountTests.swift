import Foundation
import GRDB
import KioskTestSupport
import Testing

/// A purchase saved on a device belongs to the account it was made for: it is never sent under
/// another (the store's idempotency keys are per account, so that would charge it twice).
@Suite("a saved purchase belongs to its account")
struct SavedPurchaseAccountTests: KioskCommandSuite {
    typealias Setup = SyncedHome
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"

    /// `kiosk buy` killed after the store charged, before its answer was kept: the purchase waits unanswered.
    static func chargedUnanswered(_ setup: Setup) async throws {
        let killed = try await setup.kiosk("buy", Self.book, environment: ["KIOSK_TEST_CRASH_POINT": "after-charge"])
        #expect(killed.killed, "\(killed)")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["purchasing"])
    }

    /// The store's rows of `product`, every account's, as the operator sees them.
    static func storeRows(_ setup: Setup, _ product: String) async throws -> [[String: Any]] {
        let adminToken = try String(contentsOf: setup.store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let reply = try await StoreHTTP(baseURL: setup.server.url).send("GET", "/v1/admin/transactions", token: adminToken)
        let rows = try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]] ?? []
        return rows.filter { $0["productId"] as? String == product }
    }

    /// The account a home acts for, read from its database (a command would replay first).
    static func account(of home: String) throws -> (id: String, token: String) {
        let database = try DatabaseQueue(path: home + "/kiosk.sqlite")
        return try database.read { db in
            let id = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'account.id'") ?? ""
            let token = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'account.token'") ?? ""
            return (id, token)
        }
    }

    @Test("removing this very device while a charged purchase waits unanswered is refused, as logout is; resume then sends it under its account: one charge")
    func removingThisDeviceWaitsForThePurchase() async throws {
        let setup = try await Setup()
        try await Self.chargedUnanswered(setup)
        let listed = try Self.json(try await setup.kiosk("devices", "--json").stdout)
        let devices = try #require(listed["devices"] as? [[String: Any]])
        let me = try #require(devices.first { $0["current"] as? Bool == true }?["id"] as? String)

        let removed = try await setup.kiosk("devices", "remove", me)
        #expect(removed.status == 1, "\(removed)")
        #expect(removed.stderr.contains("still unanswered") && removed.stderr.contains(Self.book) && removed.stderr.contains("kiosk resume"), "\(removed.stderr)")
        #expect(removed.stderr.split(separator: "\n").count == 1, "\(removed.stderr)")

        let resumed = try await setup.kiosk("resume")
        #expect(resumed.status == 0, "\(resumed)")
        let rows = try await Self.storeRows(setup, Self.book)
        #expect(rows.count == 1, "charged more than once: \(rows)")
        #expect(rows.first?["accountId"] as? String == (try Self.account(of: setup.home).id))
    }

    @Test("a purchase saved for one account is never sent under another: resume names it and says what to do; back on its account it is sent, once")
    func neverSentUnderAnotherAccount() async throws {
        let setup = try await Setup()
        try await Self.chargedUnanswered(setup)
        let first = try Self.account(of: setup.home)

        // Another account, of another device; then this home acts for it, as an earlier kiosk left
        // a home whose device removed itself and made a new account.
        let other = setup.directory.path("other").path
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", setup.server.url], environment: ["KIOSK_HOME": other]).status == 0)
        let second = try Self.account(of: other)
        func actFor(_ account: (id: String, token: String)) throws {
            try DatabaseQueue(path: setup.home + "/kiosk.sqlite").write { db in
                try db.execute(sql: "UPDATE setting SET value = ? WHERE key = 'account.id'", arguments: [account.id])
                try db.execute(sql: "UPDATE setting SET value = ? WHERE key = 'account.token'", arguments: [account.token])
            }
        }
        try actFor(second)

        let held = try await setup.kiosk("resume")
        let lines = held.stderr.split(separator: "\n").filter { $0.contains(Self.book) }
        #expect(lines.count == 1, "\(held)")
        #expect(lines.first?.contains("\(Self.book): this purchase was saved for account \(first.id)") == true, "\(held.stderr)")
        #expect(lines.first?.contains("kiosk login") == true, "says what to do: \(held.stderr)")
        #expect(!held.stdout.contains("cannot be reached"), "\(held.stdout)")
        #expect(try await Self.storeRows(setup, Self.book).map { $0["accountId"] as? String } == [first.id])
        #expect(try await setup.transactions().first { $0["productId"] as? String == Self.book }?["state"] as? String == "purchasing")

        // Back on its own account, it is sent with its key: the charge already made, nothing more.
        try actFor(first)
        let sent = try await setup.kiosk("resume")
        #expect(sent.status == 0, "\(sent)")
        #expect(try await Self.storeRows(setup, Self.book).map { $0["accountId"] as? String } == [first.id])
        #expect(try await setup.transactions().first { $0["productId"] as? String == Self.book }?["state"] as? String == "finished")
    }
}
