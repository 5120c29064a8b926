import Foundation
import KioskCore
import KioskTestSupport
import KioskTransfer
import Testing

/// What the console says about money: each currency in its own minor units and its own chart,
/// credits as credits, an Ask to Buy at what approving it charges, /metrics as a table.
@Suite("the console's money, over HTTP")
struct ConsoleMoneyTests {
    static let yen = "com.kiosk.books.yen-edition"
    static let euro = "com.kiosk.books.euro-edition"

    /// The page at `path` of a console logged in with `token`.
    static func page(_ console: String, _ path: String, cookie: String) async throws -> String {
        let response = try await HTTPClient().send(HTTPRequest(method: "GET", url: console + path, headers: [("Cookie", cookie)]))
        #expect(response.status == 200, "\(path): \(response.status)")
        return String(decoding: response.body, as: UTF8.self)
    }

    @Test("three currencies, three revenue charts; JPY without decimals; a redemption shown and refunded as credits; Ask to Buy at its price on approval; health as a table", arguments: TestEngine.all)
    func moneyAsPeopleReadIt(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("books.json") { products in
            var yen = products[0]
            (yen["id"], yen["price"], yen["currency"]) = (Self.yen, "1200", "JPY")
            var euro = products[0]
            (euro["id"], euro["price"], euro["currency"]) = (Self.euro, "5.50", "EUR")
            products += [yen, euro]
        }
        var extra = ["--console-port", "0"]
        if case .postgres(let url)? = try await engine.freshDatabase() { extra += ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let console = try #require(try await ConsoleBrowserTests.consoleURL(server), "\(server.log)")
        let home = ["KIOSK_HOME": directory.path("home").path]
        for product in [Self.yen, Self.euro, "com.kiosk.books.small-engines", "com.kiosk.credits.pack-5"] {
            let bought = try await KioskCommand.run(["buy", product, "--no-download", "--server", server.url], environment: home)
            #expect(bought.status == 0, "\(product): \(bought)")
        }
        #expect(try await KioskCommand.run(["redeem", "com.kiosk.books.lighthouse-keeper", "--no-download"], environment: home).status == 0)
        #expect(try await KioskCommand.run(["buy", "com.kiosk.books.river-of-maps", "--payment", "defer"], environment: home).status == 0)
        let account = try #require(try await KioskCommand.run(["account"], environment: home).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })

        let token = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let login = try await HTTPClient().send(HTTPRequest(method: "POST", url: console + "/login", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Data("token=\(token)".utf8)))
        let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init), "\(login.status)")

        let overview = try await Self.page(console, "/", cookie: cookie)
        for currency in ["JPY", "EUR", "USD"] {
            #expect(overview.contains("aria-label=\"Revenue by day in \(currency):"), "no \(currency) chart")
        }
        #expect(overview.components(separatedBy: "<svg role=\"img\"").count - 1 == 4, "three revenue charts and the units chart")
        #expect(overview.contains("1200 JPY") && !overview.contains("1200.00 JPY"), "JPY has no minor unit")
        #expect(overview.contains("5.50 EUR"))

        let customer = try await Self.page(console, "/customers?q=\(account)", cookie: cookie)
        #expect(customer.contains("4 credits") && customer.contains("Give 4 credits back"), "a redemption is shown as credits")
        #expect(customer.contains("Refund 1200 JPY"))

        let asked = try await Self.page(console, "/ask-to-buy", cookie: cookie)
        #expect(asked.contains("7.99 USD on approval") && !asked.contains("0.00 USD"), "the Ask to Buy's price")

        let health = try await Self.page(console, "/health", cookie: cookie)
        #expect(health.contains("Figures from /metrics") && !health.contains("<pre>") && !health.contains("_total{"), "metrics as a table, not raw lines")
        _ = await server.stop()

        // A price with a fraction in a currency without a minor unit is refused.
        try store.editCatalog("books.json") { products in
            for index in products.indices where products[index]["id"] as? String == Self.yen { products[index]["price"] = "1200.50" }
        }
        #expect(throws: CatalogError.self) { try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load() }
    }
}
