import Foundation
import GRDB
import KioskTestSupport
import Testing

/// A purchase saved on a device belongs to the account it was made for: it is never sent under
/// another (the store's idempotency keys are per account, so that would charge it twice), and a
/// device signed out from elsewhere can sign in again to that account and send it.
@Suite("a saved purchase belongs to its account")
struct SavedPurchaseAccountTests: KioskCommandSuite {
    typealias Setup = SyncedHome
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let password = "correct horse battery"

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

    @Test("a device signed out from elsewhere is told so, not that the store cannot be reached; it signs in again to the same account (not another) and its purchase is sent, once")
    func signedOutElsewhereSignsInAgain() async throws {
        let setup = try await Setup()
        let created = try await KioskCommand.run(["account", "create", "--email", "ann@example.com", "--password-stdin", "--name", "laptop"],
                                                 environment: ["KIOSK_HOME": setup.home], input: Self.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")
        try await Self.chargedUnanswered(setup)
        let account = try Self.account(of: setup.home).id

        // The phone signs in and removes the laptop.
        let phone = ["KIOSK_HOME": setup.directory.path("phone").path, "KIOSK_SERVER": setup.server.url]
        let signedIn = try await KioskCommand.run(["login", "--email", "ann@example.com", "--password-stdin", "--name", "phone"], environment: phone, input: Self.password + "\n")
        #expect(signedIn.status == 0, "\(signedIn.stderr)")
        #expect(try await KioskCommand.run(["devices", "remove", "laptop"], environment: phone).status == 0)

        let resumed = try await setup.kiosk("resume")
        #expect(!(resumed.stdout + resumed.stderr).contains("cannot be reached"), "\(resumed)")
        #expect(resumed.stderr.contains("signed out") && resumed.stderr.contains("kiosk login --email ann@example.com"), "\(resumed.stderr)")
        #expect(resumed.status == 1, "\(resumed)")

        // A purchase made while signed out is refused in the reader's hands, not kept to be sent
        // behind their back once they sign in (after they bought again).
        let refused = try await setup.kiosk("buy", Self.pack5)
        #expect(refused.status == 1 && refused.stderr.contains("kiosk login"), "\(refused)")
        #expect(try await setup.transactions().first { $0["productId"] as? String == Self.pack5 }?["state"] as? String == "failed")

        // Another account is refused while the purchase waits; the same account is not.
        let bo = ["KIOSK_HOME": setup.directory.path("bo").path, "KIOSK_SERVER": setup.server.url]
        #expect(try await KioskCommand.run(["account", "create", "--email", "bo@example.com", "--password-stdin"], environment: bo, input: Self.password + "\n").status == 0)
        let laptop = ["KIOSK_HOME": setup.home]
        let elsewhere = try await KioskCommand.run(["login", "--email", "bo@example.com", "--password-stdin"], environment: laptop, input: Self.password + "\n")
        #expect(elsewhere.status == 1, "\(elsewhere)")
        #expect(elsewhere.stderr.contains("still unanswered"), "\(elsewhere.stderr)")
        #expect(try Self.account(of: setup.home).id == account)

        let again = try await KioskCommand.run(["login", "--email", "ann@example.com", "--password-stdin", "--name", "laptop"], environment: laptop, input: Self.password + "\n")
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("signed in to account \(account)"), "\(again.stdout)")
        let states = try await setup.transactions().filter { $0["productId"] as? String == Self.book }.map { $0["state"] as? String }
        #expect(states.count == 1 && states.first != "purchasing", "sent at the sign-in, its own row answered: \(states)")
        let delivered = try await setup.kiosk("resume")
        #expect(delivered.status == 0, "\(delivered)")
        #expect(try await Self.storeRows(setup, Self.book).map { $0["accountId"] as? String } == [account])
        #expect(try await Self.storeRows(setup, Self.pack5).isEmpty)
    }

    @Test("account link says nothing of signing out, which nobody asked for; logout of a token-only account says who else it signs out")
    func linkWithoutWarning() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("buy", Self.pack5).status == 0)
        let token = try Self.account(of: setup.home).token
        let second = ["KIOSK_HOME": setup.directory.path("second").path]
        let linked = try await KioskCommand.run(["account", "link", token, "--server", setup.server.url], environment: second)
        #expect(linked.status == 0, "\(linked)")
        #expect(linked.stderr.isEmpty, "\(linked.stderr)")
        #expect(try await KioskCommand.run(["account", "link", token], environment: second).stderr.isEmpty)

        let out = try await KioskCommand.run(["logout", "--force"], environment: second)
        #expect(out.status == 0, "\(out)")
        #expect(out.stdout.contains("any other device linked with its token (kiosk account link) is signed out too"), "\(out.stdout)")
    }
}
