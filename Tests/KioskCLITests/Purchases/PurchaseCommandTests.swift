import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

@Suite("kiosk buy and friends, killed and offline")
struct PurchaseCommandTests: KioskCommandSuite {
    static let pack5 = "com.kiosk.credits.pack-5"
    static let book = "com.kiosk.books.small-engines"
    typealias Setup = SyncedHome

    /// The requests the server logged after the last `GET /livez` it logged, as `METHOD ROUTE
    /// STATUS`, once one of them starts with `until`. The server writes request lines up to a second
    /// late (``BufferedLog``), in order: a `/livez` asked after a command marks where it ended.
    static func requests(_ server: ServerProcess, until: String) async throws -> [String] {
        for _ in 0..<200 {
            let lines = server.log.split(separator: "\n").compactMap { line in
                line.firstMatch(of: /(GET|POST|HEAD|PUT|DELETE) (\S+) (\d{3})$/).map { "\($0.1) \($0.2) \($0.3)" }
            }
            let after = Array(lines[((lines.lastIndex { $0.hasPrefix("GET /livez") }).map { $0 + 1 } ?? 0)...])
            if after.contains(where: { $0.hasPrefix(until) }) { return after }
            try await Task.sleep(for: .milliseconds(50))
        }
        return []
    }

    /// Marks the end of what was asked so far in the server's log (see ``requests(_:until:)``).
    static func mark(_ server: ServerProcess) async throws {
        let marks = { server.log.components(separatedBy: "GET /livez 200").count }
        let before = marks()
        #expect(try await StoreHTTP(baseURL: server.url).send("GET", "/livez").status == 200)
        for _ in 0..<200 where marks() == before { try await Task.sleep(for: .milliseconds(50)) }
    }

    @Test("a default kiosk buy makes one round trip before it sends the payment (the feed's replay, which names the tag of GET /v1/store); the store's answer is kept, and asked again when it cannot be read")
    func oneRoundTripBeforePaying() async throws {
        let setup = try await Setup()
        let first = try await setup.kiosk("buy", Self.pack5)
        #expect(first.status == 0, "\(first.stderr)")
        let firstAsked = try await Self.requests(setup.server, until: "POST /v1/payments")
        #expect(firstAsked.contains("GET /v1/store 200"), "a device with nothing kept asks: \(firstAsked)")
        try await Self.mark(setup.server)
        let second = try await setup.kiosk("buy", Self.book)
        #expect(second.status == 0, "\(second.stderr)")
        let asked = try await Self.requests(setup.server, until: "POST /v1/payments")
        #expect(Array(asked.prefix { !$0.hasPrefix("POST /v1/payments") }) == ["GET /v1/transactions 200"], "\(asked)")

        // A kept answer that cannot be read is asked for again.
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        try await database.write { try $0.execute(sql: "UPDATE setting SET value = '\"other\"' WHERE key = 'store.description'") }
        try await Self.mark(setup.server)
        #expect(try await setup.kiosk("buy", Self.pack5).status == 0)
        let again = try await Self.requests(setup.server, until: "POST /v1/payments")
        #expect(again.contains("GET /v1/store 200"), "\(again)")
    }

    @Test("killed after the server charged, before the receipt was stored: the next run completes it, one charge")
    func killedAfterCharge() async throws {
        let setup = try await Setup()
        let killed = try await setup.kiosk("buy", Self.pack5, environment: ["KIOSK_TEST_CRASH_POINT": "after-charge"])
        #expect(killed.killed && killed.status == SIGKILL)
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["purchasing"])

        let balance = try await setup.kiosk("balance")
        #expect(balance.status == 0, "\(balance.stderr)")
        #expect(balance.stdout == "5 credits\n")
        let rows = try await setup.transactions()
        #expect(rows.map { $0["state"] as? String } == ["finished"])
        #expect(rows.first?["receiptVerified"] as? Bool == true)
        #expect(try await setup.charges() == [499])
    }

    @Test("killed after the receipt was stored, before finishing: the next run finishes it, one charge")
    func killedAfterReceipt() async throws {
        let setup = try await Setup()
        let killed = try await setup.kiosk("buy", Self.pack5, "--quantity", "2", environment: ["KIOSK_TEST_CRASH_POINT": "after-receipt"])
        #expect(killed.killed && killed.status == SIGKILL)
        let before = try await setup.transactions()
        #expect(before.map { $0["state"] as? String } == ["purchased"])
        #expect(before.first?["receiptVerified"] as? Bool == true)

        let balance = try await setup.kiosk("balance")
        #expect(balance.stdout == "10 credits\n")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["finished"])
        #expect(try await setup.charges() == [998])
    }

    @Test("buy prints the transaction, the outcome and the new balance")
    func buyOutput() async throws {
        let setup = try await Setup()
        let result = try await setup.kiosk("buy", Self.pack5, "--quantity", "2")
        #expect(result.status == 0)
        #expect(result.stdout.range(of: #"^transaction txn_[0-9a-f]+: purchased com\.kiosk\.credits\.pack-5 × 2; receipt saved\nbalance: 10 credits\n$"#, options: .regularExpression) != nil)

        let declined = try await setup.kiosk("buy", Self.book, "--payment", "decline")
        #expect(declined.status == 1)
        #expect(declined.stderr.contains("declined"))
        let cancelled = try await setup.kiosk("buy", Self.book, "--payment", "cancel")
        #expect(cancelled.status == 0)
        #expect(cancelled.stdout.contains("cancelled; nothing was charged"))
    }

    @Test("payments off refuses buy with a clear message; products still list")
    func paymentsOff() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("config", "payments", "off").stdout == "payments off\n")
        let refused = try await setup.kiosk("buy", Self.book)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("payments are turned off on this device"))
        #expect(try await setup.kiosk("products").stdout.contains("4.99 USD"))
        #expect(try await setup.transactions().isEmpty)
        let usage = try await setup.kiosk("config", "payments", "maybe")
        #expect(usage.status == 2)
        #expect(usage.stderr.contains("payments must be on or off"))
    }

    @Test("offline buy is kept (exit 3) and sent by the next command once the server is back")
    func offlineBuy() async throws {
        let setup = try await Setup()
        _ = try await setup.kiosk("balance")
        _ = await setup.server.stop()
        let offline = try await setup.kiosk("buy", Self.pack5)
        #expect(offline.status == 3)
        #expect(offline.stdout.contains("saved; the server cannot be reached"))

        let restarted = try await ServerProcess.start(setup.store, log: setup.directory.path("server2.log"))
        let balance = try await setup.kiosk("balance", "--server", restarted.url)
        #expect(balance.stdout == "5 credits\n")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["finished"])
        let adminToken = try String(contentsOf: setup.store.data.appendingPathComponent("admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let account = try await setup.kiosk("account").stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) } ?? ""
        #expect(try await StoreHTTP(baseURL: restarted.url).charges(accountId: account, adminToken: adminToken) == [499])
    }

    @Test("a server set with kiosk config forgets the other store's keys: a purchase saved for it is never charged by the store set back afterwards")
    func configuredServerForgetsKeys() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let a = try await ServerProcess.start(store, log: directory.path("a.log"))
        let home = ["KIOSK_HOME": directory.path("home").path]
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", a.url], environment: home).status == 0)
        // Another store, set by hand while it is down: a purchase is saved for it, with none of A's key IDs.
        #expect(try await KioskCommand.run(["config", "set", "server", "http://127.0.0.1:9"], environment: home).status == 0)
        let saved = try await KioskCommand.run(["buy", Self.book], environment: home)
        #expect(saved.stdout.contains("saved"), "\(saved)")
        #expect(try await KioskCommand.run(["config", "set", "server", a.url], environment: home).status == 0)
        let resumed = try await KioskCommand.run(["resume"], environment: home)
        #expect(resumed.stderr.contains("\(Self.book): this purchase was saved for the store at http://127.0.0.1:9, so it is not sent to \(a.url)"), "\(resumed)")
        #expect(resumed.status == 3, "a purchase waits for its own store: partly done, not done (\(resumed))")
        let adminToken = try String(contentsOf: directory.path("server-data/admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let charged = try await StoreHTTP(baseURL: a.url).send("GET", "/v1/admin/transactions", token: adminToken)
        #expect(!String(decoding: charged.body, as: UTF8.self).contains(Self.book), "A charged the purchase saved for another store")
        _ = await a.stop()
    }

    @Test("a purchase saved while its store was down is never sent to another store; the reader can cancel it; the same store at a new address takes it")
    func unsentPurchaseBelongsToItsStore() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let a = try await ServerProcess.start(store, log: directory.path("a.log"))
        let home = ["KIOSK_HOME": directory.path("home").path]
        // A first purchase: the home has an account on A and knows A's keys.
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", a.url], environment: home).status == 0)
        _ = await a.stop()
        let saved = try await KioskCommand.run(["buy", Self.book], environment: home)
        #expect(saved.stdout.contains("saved"), "\(saved)")

        // Another store (its own data, its own keys) is given: the purchase is not sent there.
        let otherDirectory = try TemporaryDirectory()
        let other = try await ServerProcess.start(try SampleStore(in: otherDirectory), log: directory.path("b.log"))
        let elsewhere = try await KioskCommand.run(["sync", "--server", other.url], environment: home)
        #expect(elsewhere.stderr.contains("\(Self.book): this purchase was saved for the store at \(a.url), so it is not sent to \(other.url)"), "\(elsewhere)")
        #expect(elsewhere.stderr.split(separator: "\n").filter { $0.contains(Self.book) }.count == 1, "\(elsewhere.stderr)")
        let adminToken = try String(contentsOf: otherDirectory.path("server-data/admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let charged = try await StoreHTTP(baseURL: other.url).send("GET", "/v1/admin/transactions", token: adminToken)
        #expect(charged.status == 200 && !String(decoding: charged.body, as: UTF8.self).contains(Self.book), "the other store recorded it: \(String(decoding: charged.body, as: UTF8.self))")
        let resumed = try await KioskCommand.run(["resume"], environment: home)
        #expect(!resumed.stdout.contains("cannot be reached"), "a purchase for another store is not waited for here: \(resumed)")
        _ = await other.stop()

        // The same store at another address (its data, so its keys) takes it: one charge.
        let moved = try await ServerProcess.start(store, log: directory.path("moved.log"))
        let synced = try await KioskCommand.run(["sync", "--server", moved.url], environment: home)
        #expect(!synced.stderr.contains("not sent"), "\(synced.stderr)")
        let sent = try await KioskCommand.run(["transactions", "--json"], environment: home)
        let rows = try JSONSerialization.jsonObject(with: Data(sent.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.first { $0["productId"] as? String == Self.book }?["state"] as? String != "purchasing", "\(sent.stdout)")
        _ = await moved.stop()

        // A store given now that never answered is known by its URL alone: a purchase saved for it
        // is not sent to the store this home knows.
        let typo = try await KioskCommand.run(["buy", "com.kiosk.books.lighthouse-keeper", "--server", "http://127.0.0.1:1"], environment: home)
        #expect(typo.stdout.contains("saved"), "\(typo)")
        let back = try await ServerProcess.start(store, log: directory.path("back.log"))
        let notThere = try await KioskCommand.run(["sync", "--server", back.url], environment: home)
        #expect(notThere.stderr.contains("com.kiosk.books.lighthouse-keeper: this purchase was saved for the store at http://127.0.0.1:1"), "\(notThere)")
        #expect(try await KioskCommand.run(["cancel", "--purchase", "com.kiosk.books.lighthouse-keeper"], environment: home).status == 0)
        _ = await back.stop()

        // A purchase never sent can be cancelled; nothing is sent later.
        let again = try await KioskCommand.run(["buy", "com.kiosk.books.river-of-maps"], environment: home)
        #expect(again.stdout.contains("saved"), "\(again)")
        let cancelled = try await KioskCommand.run(["cancel", "--purchase", "com.kiosk.books.river-of-maps"], environment: home)
        #expect(cancelled.status == 0 && cancelled.stdout.contains("nothing was charged"), "\(cancelled)")
        let none = try await KioskCommand.run(["cancel", "--purchase", "com.kiosk.books.river-of-maps"], environment: home)
        #expect(none.status != 0 && none.stderr.contains("no purchase of com.kiosk.books.river-of-maps waits to be sent"), "\(none)")
        withExtendedLifetime(otherDirectory) {}
    }

    @Test("a second Ask to Buy of the same product says it is already pending (exit 0): nothing new is sent and no row is left behind")
    func askToBuyTwice() async throws {
        let setup = try await Setup()
        let first = try await setup.kiosk("buy", Self.book, "--payment", "defer")
        #expect(first.status == 0, "\(first.stderr)")
        let transaction = try #require(first.stdout.split(separator: ":").first.map { String($0.dropFirst("transaction ".count)) })
        #expect(first.stdout == "transaction \(transaction): \(Self.book) is waiting for approval (Ask to Buy); nothing was charged yet\n")

        let second = try await setup.kiosk("buy", Self.book, "--payment", "defer")
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout == "transaction \(transaction): \(Self.book) is already waiting for approval (Ask to Buy); nothing new was sent\n")
        #expect(second.stderr == "")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["deferred"])

        // Nothing left to be sent later as a new request: replay finds only the one request.
        let resume = try await setup.kiosk("resume")
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["deferred"])
        let pending = try await Self.admin(setup, "pending", "--json")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(pending.stdout.utf8)) as? [[String: Any]], "\(pending.stdout) \(pending.stderr)")
        #expect(rows.count == 1)

        // Approved, the one request is delivered.
        #expect(try await Self.admin(setup, "approve", transaction).status == 0)
        let after = try await setup.kiosk("resume")
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["finished"])
    }

    @Test("a purchase saved offline on a second device, of a book the account bought meanwhile, is shown as not charged, in the list and as JSON", arguments: TestEngine.all)
    func freeRebuyShownFree(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        var server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let port = try #require(URLComponents(string: server.url)?.port)
        let first = ["KIOSK_HOME": directory.path("first").path]
        let second = ["KIOSK_HOME": directory.path("second").path]
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", server.url], environment: first).status == 0)
        let shown = try await KioskCommand.run(["account", "--show-token"], environment: first).stdout
        let token = try #require(shown.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(while: \.isHexDigit)) })
        #expect(try await KioskCommand.run(["account", "link", token, "--server", server.url], environment: second).status == 0)
        #expect(try await KioskCommand.run(["sync"], environment: second).status == 0)
        _ = await server.stop()
        let offline = try await KioskCommand.run(["buy", Self.book], environment: second)
        #expect(offline.stdout.contains("saved"), "\(offline)")
        server = try await ServerProcess.start(store, extraArguments: extra + ["--port", String(port)], log: directory.path("server-back.log"))
        #expect(try await KioskCommand.run(["buy", Self.book], environment: first).status == 0)
        // The second device's saved purchase reaches the store now: it owns the book already.
        #expect(try await KioskCommand.run(["sync"], environment: second).status == 0)
        let listed = try await KioskCommand.run(["transactions"], environment: second)
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.contains(Self.book) }, "\(listed)")
        #expect(line.hasSuffix("nothing charged (already owned)") && !line.contains("USD"), "\(line)")
        let json = try await KioskCommand.run(["transactions", "--json"], environment: second)
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
        let row = try #require(rows.first { $0["productId"] as? String == Self.book })
        #expect(row["price"] as? String == "nothing charged (already owned)", "\(row)")
        // What the first device paid is still shown as paid.
        let paid = try await KioskCommand.run(["transactions"], environment: first)
        #expect(paid.stdout.split(separator: "\n").first { $0.contains(Self.book) }?.contains("USD") == true, "\(paid.stdout)")
        _ = await server.stop()
    }
}
