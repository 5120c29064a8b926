import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk serve --environment`: a production store grants only for payment (the sandbox's pretend
/// methods and clock are refused) and refuses sandbox receipts; a sandbox store says what it is.
@Suite("kiosk serve environments: a production store refuses the sandbox's pretend payments and receipts")
struct ServeEnvironmentTests {
    static let book = "com.kiosk.books.small-engines"

    @Test("every sandbox payment method is a 403 naming the environment, nothing is granted or charged; the sandbox clock and renewal pass are refused; the start says which environment", arguments: TestEngine.all)
    func refusesPretendPayments(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra = ["--environment", "production", "--stripe-webhook-secret", "whsec_test"]
        if case .postgres(let url)? = try await engine.freshDatabase() { extra += ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        for method in PaymentMethod.allCases {
            let reply = try await http.pay(Self.book, token: account.token, method: method)
            let body = String(decoding: reply.body, as: UTF8.self)
            #expect(reply.status == 403, "\(method): \(reply.status) \(body)")
            #expect(body.contains("production") && body.contains("'\(method.rawValue)'"), "\(body)")
        }
        #expect(try await http.charges(accountId: account.accountId, adminToken: adminToken).isEmpty)
        let owned = try await http.send("GET", "/v1/account", token: account.token)
        #expect(try owned.decode(AccountSummary.self).owned.isEmpty)

        // The reader's side: one line that names the environment; nothing waits to be sent again
        // (nothing is saved at all: the store says first how it sells, issue 45).
        let home = directory.path("home").path
        let bought = try await KioskCommand.run(["buy", Self.book, "--server", server.url], environment: ["KIOSK_HOME": home])
        #expect(bought.status != 0 && bought.stderr.contains("production environment"), "\(bought)")
        #expect(bought.stderr.split(separator: "\n").count == 1, "\(bought.stderr)")
        let listed = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": home])
        let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.isEmpty, "\(listed.stdout)")

        let clock = try await http.send("POST", "/v1/admin/accounts/\(account.accountId)/sandbox", token: adminToken, json: #"{"advanceSeconds": 86400}"#)
        #expect(clock.status == 409 && String(decoding: clock.body, as: UTF8.self).contains("sandbox"), "\(clock.status)")
        let renewals = try await http.send("POST", "/v1/admin/renewals/run", token: adminToken)
        #expect(renewals.status == 409 && String(decoding: renewals.body, as: UTF8.self).contains("sandbox"), "\(renewals.status)")
        _ = await server.stop()
        #expect(server.log.contains("a production store"), "\(server.log)")
    }

    @Test("kiosk serve --help never prints a secret the environment holds (Stripe's secret key, its webhook secrets); a secret key that is no Stripe key, or one without the webhook secret its payments need, is refused naming the flag")
    func secretsNotShown() async throws {
        let secrets = ["KIOSK_STRIPE_SECRET_KEY": "sk_test_must_not_show", "KIOSK_STRIPE_WEBHOOK_SECRETS": "whsec_must_not_show"]
        let help = try await KioskCommand.run(["serve", "--help"], environment: secrets)
        #expect(help.status == 0 && help.stdout.contains("--stripe-secret-key"))
        #expect(!help.stdout.contains("must_not_show") && !help.stderr.contains("must_not_show"), "\(help.stdout)")

        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let arguments = ["serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", store.data.path, "--port", "0"]
        let notAKey = try await KioskCommand.run(arguments, environment: ["KIOSK_STRIPE_SECRET_KEY": "pk_live_public", "KIOSK_STRIPE_WEBHOOK_SECRETS": "whsec_x"])
        #expect(notAKey.status != 0 && notAKey.stderr.contains("--stripe-secret-key") && !notAKey.stderr.contains("pk_live_public"), "\(notAKey.stderr)")
        let noWebhook = try await KioskCommand.run(arguments + ["--stripe-secret-key", "sk_test_x"])
        #expect(noWebhook.status != 0 && noWebhook.stderr.contains("needs --stripe-webhook-secret"), "\(noWebhook.stderr)")
        let both = try await KioskCommand.run(arguments + ["--stripe-secret-key", "sk_test_x", "--stripe-webhook-secret", "whsec_x", "--checkout-url", "https://shop.example/{intent}"])
        #expect(both.status != 0 && both.stderr.contains("not both"), "\(both.stderr)")
        let testKey = try await KioskCommand.run(arguments + ["--environment", "production", "--stripe-secret-key", "sk_test_x", "--stripe-webhook-secret", "whsec_x"])
        #expect(testKey.status != 0 && testKey.stderr.contains("test-mode key"), "a production store takes live payments only: \(testKey.stderr)")
        let plain = try await KioskCommand.run(arguments + ["--stripe-secret-key", "sk_test_x", "--stripe-webhook-secret", "whsec_x", "--stripe-api-url", "http://stripe.example.net"])
        #expect(plain.status != 0 && plain.stderr.contains("must be https://"), "the key never travels in the clear: \(plain.stderr)")
    }

    @Test("a mistyped KIOSK_ENVIRONMENT (or a port that is no number) is refused, never replaced by the sandbox default")
    func mistypedEnvironmentRefused() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let arguments = ["serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", store.data.path, "--port", "0"]
        for (name, value) in [("KIOSK_ENVIRONMENT", "Production"), ("KIOSK_ENVIRONMENT", "prod"), ("KIOSK_PORT", "abc")] {
            let refused = try await KioskCommand.run(arguments, environment: [name: value])
            #expect(refused.status != 0 && refused.stderr.contains("$\(name) is \"\(value)\""), "\(name)=\(value): \(refused)")
            #expect(!refused.stdout.contains("listening"), "\(refused.stdout)")
        }
    }

    @Test("a production store refuses to start over a database a sandbox ran (whose subscriptions it would otherwise honour and renew), naming both environments")
    func productionRefusesSandboxDatabase() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let sandbox = try await ServerProcess.start(store, extraArguments: ["--renewal-interval", "0"], log: directory.path("sandbox.log"))
        let home = ["KIOSK_HOME": directory.path("home").path]
        #expect(try await KioskCommand.run(["buy", "com.kiosk.magazines.harbor-monthly.subscription.monthly", "--no-download", "--server", sandbox.url], environment: home).status == 0)
        _ = await sandbox.stop()
        do {
            let production = try await ServerProcess.start(store, extraArguments: ["--environment", "production", "--stripe-webhook-secret", "whsec_test"],
                                                           log: directory.path("production.log"))
            _ = await production.stop()
            Issue.record("a production store started over the sandbox's database")
        } catch let refused as ServerProcess.ServerDidNotStart {
            #expect(refused.stderr.contains("was served as a sandbox store") && refused.stderr.contains("--environment sandbox"), "\(refused.stderr)")
        }
    }

    /// An operator's signing key file (an Ed25519 seed is any 32 bytes), which a store adds to its keys at start.
    static func writeKeyFile(into folders: [URL]) throws {
        var seed = [UInt8](repeating: 0, count: 32)
        for index in seed.indices { seed[index] = UInt8.random(in: 0...255) }
        let d = Data(seed).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        for folder in folders {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data("{\"kid\": \"shared-1\", \"d\": \"\(d)\"}".utf8).write(to: folder.appendingPathComponent("signing-key.json"))
        }
    }

    @Test("a sandbox store says so when it starts, and still sells with approve")
    func sandboxSaysSo() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        #expect(try await http.pay(Self.book, token: account.token).status == 200)
        _ = await server.stop()
        #expect(server.log.contains("a sandbox store: purchases are pretend"), "\(server.log)")
    }

    @Test("a production server (--environment production) answers 21007 to a sandbox receipt")
    func productionRefusesSandboxReceipts() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // Both stores sign with one key (each keeps a database of its own): only a key it holds lets
        // the production store tell a genuine sandbox receipt (21007) from a forged one (21003).
        let productionData = directory.path("production-data")
        try Self.writeKeyFile(into: [store.data, productionData])
        let sandbox = try await ServerProcess.start(store, log: directory.path("sandbox.log"))
        let home = directory.path("home").path
        _ = try await KioskCommand.run(["sync", "--server", sandbox.url], environment: ["KIOSK_HOME": home])
        #expect(try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": home]).status == 0)
        let database = try DatabaseQueue(path: home + "/kiosk.sqlite")
        let receipt = try await database.read { try String.fetchOne($0, sql: "SELECT receipt FROM payment") } ?? ""
        #expect(try await StoreHTTP(baseURL: sandbox.url).verifyReceipt(receipt).status == 0)
        await sandbox.stop()

        let production = try await ServerProcess.start(store, extraArguments: ["--environment", "production", "--stripe-webhook-secret", "whsec_test",
                                                                                "--data", productionData.path], log: directory.path("production.log"))
        #expect(try await StoreHTTP(baseURL: production.url).verifyReceipt(receipt).status == 21007)
        await production.stop()
    }

    @Test("a production store with no real payment channel refuses to start; with one, its start line names it; kiosk admin events lists what Stripe sent")
    func productionNeedsAChannel() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let refused = try await KioskCommand.run(["serve", "--environment", "production", "--port", "0", "--catalog", store.catalog.path,
                                                  "--content", store.content.path, "--data", store.data.path])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("grants only for real payment") && refused.stderr.contains("--stripe-webhook-secret"), "\(refused.stderr)")
        let server = try await ServerProcess.start(store, extraArguments: ["--environment", "production", "--stripe-webhook-secret", "whsec_test"],
                                                   log: directory.path("production.log"))
        // The line comes on stderr just after "listening" on stdout.
        for _ in 0..<100 where !server.log.contains("production store") { try await Task.sleep(for: .milliseconds(50)) }
        #expect(server.log.contains("through the web (Stripe events at /v1/stripe/webhook)"), "\(server.log)")
        let events = try await KioskCommand.run(["admin", "events", "--unmatched", "--server", server.url, "--data", store.data.path])
        #expect(events.status == 0 && events.stdout == "none\n", "\(events)")
        _ = await server.stop()
    }
}
