import Foundation
import KioskTestSupport
import Testing

@Suite("what the account owns, dates, prices and filters in the lists")
struct ListFilterCommandTests {
    static let book = "com.kiosk.books.small-engines"
    static let asked = "com.kiosk.books.river-of-maps"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
    static let pack = "com.kiosk.credits.pack-5"
    static let minute = #"\d{4}-\d\d-\d\d \d\d:\d\d"#

    static func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    static func matches(_ line: String?, _ pattern: String) -> Bool {
        guard let line, let regex = try? Regex("^" + pattern + "$") else { return false }
        return line.wholeMatch(of: regex) != nil
    }

    @Test("kiosk products marks what is owned and until when, offline; kiosk transactions shows dates and prices and filters locally")
    func readerLists() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let environment = ["KIOSK_HOME": directory.path("home").path]
        func kiosk(_ arguments: String...) async throws -> KioskCommand.Result {
            try await KioskCommand.run(arguments, environment: environment)
        }
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: environment).status == 0)
        for product in [Self.book, Self.subscription, Self.pack] {
            let bought = try await kiosk("buy", product)
            #expect(bought.status == 0, "\(product): \(bought.stderr)")
        }
        #expect(try await kiosk("buy", Self.asked, "--payment", "defer").status == 0)
        _ = await server.stop()

        // Offline from here.
        let products = Self.lines(try await kiosk("products").stdout)
        func line(_ id: String) -> String? { products.first { $0.hasPrefix("  \(id)  ") } }
        #expect(Self.matches(line(Self.book), #"  com\.kiosk\.books\.small-engines  .*  \(nonConsumable, 4\.99 USD, or 3 credits, zip [0-9.]+ KiB\)  \[owned\]"#), "\(products)")
        #expect(Self.matches(line(Self.subscription), #"  com\.kiosk\.magazines\.harbor-monthly\.subscription\.monthly  .*\)  \[subscribed until "# + Self.minute + #"\]"#), "\(products)")
        #expect(line(Self.asked)?.hasSuffix(")") == true, "asked for, not owned: \(products)")
        #expect(line("com.kiosk.books.lighthouse-keeper")?.hasSuffix(")") == true)
        #expect(line(Self.pack)?.hasSuffix(")") == true, "a credit pack is spent, not owned")
        let json = try JSONSerialization.jsonObject(with: Data(try await kiosk("products", "--json").stdout.utf8)) as? [String: Any]
        let owned = json?["owned"] as? [[String: Any]] ?? []
        #expect(owned.compactMap { $0["productId"] as? String }.contains(Self.book))
        #expect(owned.first { $0["productId"] as? String == Self.subscription }?["expiresAt"] is String, "\(owned)")
        #expect((json?["products"] as? [Any])?.count == 13 && json?["syncedAt"] is String)

        let transactions = Self.lines(try await kiosk("transactions").stdout)
        #expect(transactions.count == 4, "\(transactions)")
        #expect(transactions.contains { Self.matches($0, #"\S+  "# + Self.minute + #"  finished  com\.kiosk\.books\.small-engines  4\.99 USD"#) }, "\(transactions)")
        #expect(transactions.contains { Self.matches($0, #"\S+  "# + Self.minute + #"  deferred  com\.kiosk\.books\.river-of-maps  7\.99 USD  \(waiting for approval \(Ask to Buy\)\)"#) }, "\(transactions)")
        let byProduct = Self.lines(try await kiosk("transactions", "--product", Self.book).stdout)
        #expect(byProduct.count == 1 && byProduct.first?.contains("  finished  \(Self.book)  4.99 USD") == true, "\(byProduct)")
        let byState = Self.lines(try await kiosk("transactions", "--state", "deferred").stdout)
        #expect(byState.count == 1 && byState.first?.contains(Self.asked) == true, "\(byState)")
        #expect(try await kiosk("transactions", "--since", "1h").stdout.split(separator: "\n").count == 4)
        #expect(try await kiosk("transactions", "--since", "2999-01-01").stdout == "no transactions match\n")
        let rows = try JSONSerialization.jsonObject(with: Data(try await kiosk("transactions", "--json", "--product", Self.subscription).stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.count == 1 && rows.first?["price"] as? String == "2.49 USD" && rows.first?["expiresAt"] is String && rows.first?["purchaseDate"] is String, "\(rows)")
        #expect(rows.first?["receiptVerified"] as? Bool == true && rows.first?["state"] as? String == "finished", "the fields scripts read are kept")

        let badDate = try await kiosk("transactions", "--since", "yesterday")
        #expect(badDate.status == 2)
        #expect(Self.lines(badDate.stderr).first == "kiosk: --since \"yesterday\" is not a date: give YYYY-MM-DD, an ISO 8601 time such as 2026-11-24T13:05:00Z, or a time ago such as 30m, 24h or 7d (--help shows the usage)", "\(badDate.stderr)")
        let badState = try await kiosk("transactions", "--state", "paid")
        #expect(badState.status == 2)
        #expect(Self.lines(badState.stderr).first == "kiosk: --state \"paid\" is not a transaction state: purchasing, purchased, deferred, failed, cancelled, delivering, finished, restored, revoked (--help shows the usage)", "\(badState.stderr)")
    }

    @Test("the admin lists show dates and prices and take --since, --product and --state, applied by the server's query", arguments: TestEngine.all)
    func adminLists(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let environment = ["KIOSK_HOME": directory.path("home").path]
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.book], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.pack, "--quantity", "2"], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.asked, "--payment", "defer"], environment: environment).status == 0)
        let account = try #require(try await KioskCommand.run(["account"], environment: environment).stdout
            .split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        func admin(_ arguments: String...) async throws -> [String] {
            let result = try await KioskCommand.run(["admin"] + arguments + ["--server", server.url, "--data", store.data.path])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return Self.lines(result.stdout)
        }
        let id = #"[0-9A-Za-z_-]+"#
        let all = try await admin("transactions")
        #expect(all.count == 3, "\(all)")
        #expect(Self.matches(all.first, id + "  " + Self.minute + #"  purchased  com\.kiosk\.books\.small-engines  approve  4\.99 USD  "# + account), "\(all)")
        #expect(Self.matches(all.dropFirst().first, id + "  " + Self.minute + #"  purchased  com\.kiosk\.credits\.pack-5 × 2  approve  9\.98 USD  "# + account), "\(all)")
        let deferred = try await admin("transactions", "--state", "deferred")
        #expect(deferred.count == 1 && Self.matches(deferred.first, id + "  " + Self.minute + #"  deferred  com\.kiosk\.books\.river-of-maps  defer  0\.00 USD  "# + account), "\(deferred)")
        #expect(try await admin("transactions", "--product", Self.book).count == 1)
        #expect(try await admin("transactions", "--since", "2999-01-01") == ["none"])
        // Pending, it shows what approving it would charge (nothing is charged yet).
        #expect(try await admin("pending", "--product", Self.asked) == deferred.map { $0.replacingOccurrences(of: "  0.00 USD  ", with: "  7.99 USD on approval  ") }, "\(deferred)")
        #expect(try await admin("pending", "--product", Self.book) == ["none"])

        let accounts = try await admin("accounts")
        #expect(accounts.count == 1 && Self.matches(accounts.first, account + "  created " + Self.minute + #"  credits 10  transactions 3  paid 14\.97  last "# + Self.minute), "\(accounts)")
        #expect(try await admin("accounts", "--product", Self.book) == accounts)
        #expect(try await admin("accounts", "--product", "com.kiosk.books.lighthouse-keeper") == ["none"])
        #expect(try await admin("accounts", "--state", "revoked") == ["none"])
        #expect(try await admin("accounts", "--since", "2999-01-01") == ["none"])

        let sales = try await admin("sales", "--product", Self.book)
        #expect(sales.count == 1 && Self.matches(sales.first, #"\d{4}-\d\d-\d\d  com\.kiosk\.books\.small-engines  sales 1  refunds 0  net 4\.99 USD"#), "\(sales)")
        #expect(try await admin("sales", "--since", "2999-01-01") == ["none"])
        let downloads = try await admin("downloads", "--product", Self.book, "--since", "1d")
        #expect(downloads.count == 1 && Self.matches(downloads.first, #"\d{4}-\d\d-\d\d  com\.kiosk\.books\.small-engines  requests 1  bytes \d+"#), "\(downloads)")
        #expect(try await admin("downloads", "--since", "2999-01-01") == ["none"])

        // The server checks what it is sent, for any client (a web console later).
        let token = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let http = StoreHTTP(baseURL: server.url)
        let bad = try await http.send("GET", "/v1/admin/transactions?state=paid", authorization: "Bearer \(token)")
        #expect(bad.status == 400)
        #expect(String(decoding: bad.body, as: UTF8.self).contains(#"state \"paid\" is not a transaction state: purchased, deferred, declined, cancelled or revoked"#))
        let stateless = try await http.send("GET", "/v1/admin/downloads?state=purchased", authorization: "Bearer \(token)")
        #expect(stateless.status == 400)
        let badState = try await KioskCommand.run(["admin", "transactions", "--state", "paid", "--server", server.url, "--data", store.data.path])
        #expect(badState.status == 2 && Self.lines(badState.stderr).first == "kiosk: --state \"paid\" is not a transaction state: purchased, deferred, declined, cancelled or revoked (--help shows the usage)", "\(badState.stderr)")
        _ = await server.stop()
    }
}
