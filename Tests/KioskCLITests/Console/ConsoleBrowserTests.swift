import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The publisher's console in a real browser: Debian's chromium driven by playwright
/// (scripts/console_check.py), against a `kiosk serve` with a few hundred purchases made through
/// the API. `make test-tools` installs both; a missing one fails the test, naming what to run.
@Suite("the publisher's console in a browser")
struct ConsoleBrowserTests {
    static let book = "com.kiosk.books.small-engines"
    static let asked = "com.kiosk.books.river-of-maps"
    static let python = SampleStore.repository.appendingPathComponent(".build/venv/bin/python")
    static let chromium = "/usr/bin/chromium"

    @Test("log in, the overview's figures equal kiosk admin sales --json, approve an Ask to Buy and refund through the forms; the reader's device follows", arguments: TestEngine.all)
    func operatorDay(engine: TestEngine) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python.path),
                     "no playwright at \(Self.python.path): run make test-tools (it makes that venv and installs playwright)")
        try #require(FileManager.default.isExecutableFile(atPath: Self.chromium), "no \(Self.chromium): run make test-tools (apt-get install chromium)")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra = ["--console-port", "0", "--stripe-webhook-secret", "whsec_console", "--rate-limit-accounts-per-address", "off", "--rate-limit-purchases-per-account", "off", "--rate-limit-purchases-per-address", "off"]
        if case .postgres(let url)? = try await engine.freshDatabase() { extra += ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let console = try #require(try await Self.consoleURL(server), "the server said no console address: \(server.log)")

        // A few hundred purchases through the API, from 20 accounts.
        let http = StoreHTTP(baseURL: server.url)
        let products = ["com.kiosk.credits.pack-5", "com.kiosk.books.night-sky-atlas", Self.book, "com.kiosk.magazines.harbor-monthly.issue-01"]
        for account in 0..<20 {
            let created = try await http.createAccount()
            for purchase in 0..<12 {
                let reply = try await http.pay(products[(account + purchase) % products.count], token: created.token)
                #expect(reply.status == 200 || reply.status == 409, "\(reply.status)")
            }
        }

        // The reader's device: a book to refund, an Ask to Buy to approve.
        let home = directory.path("home").path
        let environment = ["KIOSK_HOME": home]
        #expect(try await KioskCommand.run(["buy", Self.book, "--server", server.url], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.asked, "--payment", "defer"], environment: environment).status == 0)
        let transactions = try JSONSerialization.jsonObject(with: Data(try await KioskCommand.run(["transactions", "--json"], environment: environment).stdout.utf8)) as? [[String: Any]] ?? []
        let refund = try #require(transactions.first { $0["productId"] as? String == Self.book }?["transactionId"] as? String)
        let approve = try #require(transactions.first { $0["productId"] as? String == Self.asked }?["transactionId"] as? String)

        // What the overview must show: the same rows, from the window's first day.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        let first = try #require(calendar.date(byAdding: .day, value: -29, to: calendar.startOfDay(for: Date())))
        let firstDay = ISO8601DateFormatter.string(from: first, timeZone: calendar.timeZone, formatOptions: [.withFullDate])
        let sales = try await KioskCommand.run(["admin", "sales", "--since", firstDay, "--json", "--server", server.url, "--data", store.data.path])
        #expect(sales.status == 0, "\(sales.stderr)")
        try Data(sales.stdout.utf8).write(to: directory.path("sales.json"))

        // A Stripe event the store cannot match (no such product), for the Payments page.
        let event = #"{"data":{"object":{"amount_total":499,"client_reference_id":"acct_console","currency":"usd","id":"cs_console","metadata":{"kiosk_product_id":"com.kiosk.none"},"payment_intent":"pi_console","payment_status":"paid"}},"id":"evt_console_unmatched","type":"checkout.session.completed"}"#
        let signature = try await StripeSigner.header(event, secret: "whsec_console")
        let delivered = try await http.send("POST", "/v1/stripe/webhook", json: event, headers: [("Stripe-Signature", signature)])
        #expect(delivered.status == 200, "\(String(decoding: delivered.body, as: UTF8.self))")

        // A reader with a sign-in, for the operator to find by email.
        let reader = try await http.send("POST", "/v1/accounts", json: #"{"email": "reader@example.com", "password": "correct horse battery"}"#).decode(AccountCreated.self)

        let screenshots = directory.path("screenshots")
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let token = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let checked = try await KioskCommand.run(
            [SampleStore.repository.appendingPathComponent("scripts/console_check.py").path,
             "--console", console, "--token", token, "--sales", directory.path("sales.json").path,
             "--approve", approve, "--refund", refund, "--screenshots", screenshots.path, "--chromium", Self.chromium, "--email", "reader@example.com", "--unmatched-event", "evt_console_unmatched"],
            program: Self.python)
        if checked.status != 0 {
            // Kept where the failure can be looked at: the temporary folder goes with the test.
            let kept = SampleStore.repository.appendingPathComponent(".build/console-screenshots/\(engine)")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? FileManager.default.copyItem(at: screenshots, to: kept)
            Issue.record("the console checks failed (screenshots in \(kept.path)):\n\(checked.stdout)\(checked.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: screenshots.appendingPathComponent("overview.png").path))

        // The reader's device follows what the operator did: the refunded book leaves the
        // library, the approved one arrives.
        #expect(FileManager.default.fileExists(atPath: home + "/Library/\(Self.book)"))
        let resumed = try await KioskCommand.run(["resume"], environment: environment)
        #expect(resumed.status == 0, "\(resumed.stdout)\(resumed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home + "/Library/\(Self.book)"), "\(resumed.stdout)")
        #expect(FileManager.default.fileExists(atPath: home + "/Library/\(Self.asked)"), "\(resumed.stdout)")

        // The operator's care of the reader, as the store keeps it: signed out, then enabled, a code given.
        #expect(try await http.send("GET", "/v1/account", token: reader.token).status == 401)
        let view = try await http.send("GET", "/v1/admin/accounts/\(reader.accountId)", token: token).decode(AdminAccountView.self)
        #expect(view.audit?.map(\.action) == ["disabled", "enabled", "reset_code_issued"])
        #expect(view.disabled == false)

        // The console is never on the store's public port.
        let publicLogin = try await http.send("GET", "/login")
        #expect(publicLogin.status == 404)
        _ = await server.stop()
    }

    /// The console's address, from the line `kiosk serve` writes to stderr once it listens.
    static func consoleURL(_ server: ServerProcess) async throws -> String? {
        for _ in 0..<100 {
            if let line = server.log.split(separator: "\n").first(where: { $0.hasPrefix("kiosk: console on ") }) {
                return String(line.dropFirst("kiosk: console on ".count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}
