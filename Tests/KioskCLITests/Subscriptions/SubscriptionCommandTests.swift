import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk subscriptions`, `kiosk subscription cancel|resume`, and the operator's sandbox clock,
/// renewals and webhooks, against a real `kiosk serve` whose renewal worker runs on its own.
@Suite("kiosk subscriptions and the renewal worker, end to end")
struct SubscriptionCommandTests {
    static let monthly = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    struct Setup {
        let directory: TemporaryDirectory
        let store: SampleStore
        let server: ServerProcess
        let home: String

        init(serve: [String] = [], catalog: (SampleStore) throws -> Void = { _ in }) async throws {
            directory = try TemporaryDirectory()
            store = try SampleStore(in: directory)
            try catalog(store)
            server = try await ServerProcess.start(store, extraArguments: serve, log: directory.path("server.log"))
            home = directory.path("home").path
            let sync = try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home])
            #expect(sync.status == 0, "\(sync.stderr)")
        }

        func kiosk(_ arguments: [String]) async throws -> KioskCommand.Result {
            try await KioskCommand.run(arguments, environment: ["KIOSK_HOME": home])
        }

        func admin(_ arguments: [String]) async throws -> KioskCommand.Result {
            try await KioskCommand.run(["admin"] + arguments + ["--server", server.url, "--data", store.data.path])
        }

        func subscriptions() async throws -> SubscriptionList {
            let result = try await kiosk(["subscriptions", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            return try JSONDecoder.kiosk.decode(SubscriptionList.self, from: Data(result.stdout.utf8))
        }

        /// Waits until the store's renewal worker has renewed the subscription: its expiry is past `date`.
        func renewed(after date: Date, seconds: Double = 20) async throws -> SubscriptionInfo? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let info = try await subscriptions().subscriptions.first, info.expiresDate > date.addingTimeInterval(86_400) { return info }
                try await Task.sleep(for: .milliseconds(300))
            }
            return nil
        }
    }

    @Test("kiosk subscription change: an upgrade at once with its credit and the new period's receipt kept; a downgrade shown as waiting; a wrong plan refused in one line")
    func changePlan() async throws {
        let premium = "com.kiosk.magazines.harbor-monthly.subscription.premium"
        let setup = try await Setup { store in
            try store.editCatalog("magazines.json") { products in
                guard let index = products.firstIndex(where: { $0["id"] as? String == Self.monthly }) else { return }
                products[index]["planLevel"] = 2
                var plan = products[index]
                plan["id"] = premium
                plan["title"] = "Harbor Monthly Premium"
                plan["price"] = "4.99"
                plan["planLevel"] = 1
                products.append(plan)
            }
        }
        #expect(try await setup.kiosk(["buy", Self.monthly, "--no-download"]).status == 0)
        let id = try #require(try await setup.subscriptions().subscriptions.first?.originalTransactionId)
        let up = try await setup.kiosk(["subscription", "change", id, "--to", premium])
        #expect(up.status == 0 && up.stdout.contains("an upgrade: it starts now") && up.stdout.contains("USD of \(Self.monthly)'s unused period credited")
                && up.stdout.contains("\(premium)  active until"), "\(up.stdout) \(up.stderr)")
        // The new period's receipt is on the device, like any purchase's.
        let receipts = try await setup.kiosk(["transactions", "--json"])
        #expect(receipts.stdout.contains(premium), "\(receipts.stdout.prefix(600))")
        let down = try await setup.kiosk(["subscription", "change", id, "--to", Self.monthly])
        #expect(down.status == 0 && down.stdout.contains("a downgrade") && down.stdout.contains("renews as \(Self.monthly)"), "\(down.stdout) \(down.stderr)")
        let wrong = try await setup.kiosk(["subscription", "change", id, "--to", "com.kiosk.books.lighthouse-keeper"])
        #expect(wrong.status != 0 && wrong.stderr.split(separator: "\n").count == 1 && wrong.stderr.contains("com.kiosk.books.lighthouse-keeper"), "\(wrong.stderr)")
    }

    @Test("the operator moves the account's clock past the period: the server's own worker renews it; cancel and resume print the state; webhooks and notifications are listed")
    func workerRenewsAndCommandsShowState() async throws {
        let setup = try await Setup()
        // Registered first: an endpoint hears of the changes made after it was added.
        let hook = try await setup.admin(["webhooks", "add", "http://127.0.0.1:9/hook"])
        #expect(hook.status == 0 && hook.stdout.contains("added"), "\(hook.stderr)")
        #expect(try await setup.admin(["webhooks"]).stdout.contains("http://127.0.0.1:9/hook"))
        let bought = try await setup.kiosk(["buy", Self.monthly, "--no-download"])
        #expect(bought.status == 0, "\(bought.stderr)")
        let listed = try await setup.kiosk(["subscriptions"])
        #expect(listed.stdout.contains("active until") && listed.stdout.contains("auto-renew on"), "\(listed.stdout)")
        let first = try #require(try await setup.subscriptions().subscriptions.first)


        let account = try #require(try await setup.kiosk(["account"]).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        let moved = try await setup.admin(["sandbox", account, "--advance", "32d"])
        #expect(moved.status == 0 && moved.stdout.contains("32 days ahead"), "\(moved.stdout) \(moved.stderr)")
        let renewed = try await setup.renewed(after: first.expiresDate)
        #expect(renewed?.state == .active)

        let cancel = try await setup.kiosk(["subscription", "cancel", first.originalTransactionId])
        #expect(cancel.status == 0 && cancel.stdout.contains("auto-renew off"), "\(cancel.stdout) \(cancel.stderr)")
        let resume = try await setup.kiosk(["subscription", "resume", first.originalTransactionId])
        #expect(resume.status == 0 && resume.stdout.contains("auto-renew on"), "\(resume.stdout) \(resume.stderr)")
        let unknown = try await setup.kiosk(["subscription", "cancel", "txn_nothing"])
        #expect(unknown.status != 0 && unknown.stderr.contains("no subscription txn_nothing"), "\(unknown.stderr)")
        // A product ID given where the subscription's ID goes is named as it was written.
        let byProduct = try await setup.kiosk(["subscription", "cancel", "com.kiosk.magazines.nothing"])
        #expect(byProduct.status != 0 && byProduct.stderr.contains("com.kiosk.magazines.nothing") && !byProduct.stderr.contains("%2E"), "\(byProduct.stderr)")

        // Nothing listens on port 9: every notification is failing and listed as such.
        let failed = try await setup.admin(["notifications", "--failed"])
        #expect(failed.status == 0, "\(failed.stderr)")
        for type in ["SUBSCRIBED", "DID_RENEW", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"] {
            #expect(try await setup.admin(["notifications"]).stdout.contains(type), "\(type)")
        }
        #expect(try await setup.admin(["notifications", "test"]).stdout.contains("test notification"))
        // Removed by the number the list shows, or by the URL.
        #expect(try await setup.admin(["webhooks", "add", "http://127.0.0.1:9/other"]).status == 0)
        let other = try #require(try await setup.admin(["webhooks"]).stdout.split(separator: "\n").first { $0.hasSuffix("/other") })
        let number = String(other.prefix { $0 != " " })
        let byNumber = try await setup.admin(["webhooks", "remove", number])
        #expect(byNumber.status == 0 && byNumber.stdout == "removed http://127.0.0.1:9/other\n", "\(byNumber.stdout) \(byNumber.stderr)")
        let unknownNumber = try await setup.admin(["webhooks", "remove", "9999"])
        #expect(unknownNumber.status != 0 && unknownNumber.stderr.contains("no endpoint is number 9999"), "\(unknownNumber.stderr)")
        #expect(try await setup.admin(["webhooks", "remove", "http://127.0.0.1:9/hook"]).stdout.contains("removed"))
        #expect(try await setup.admin(["webhooks"]).stdout == "none\n")
        _ = await setup.server.stop()
    }

    @Test("a renewal made by the store reaches the device at its next sync: the receipt is saved, the new end shown, an issue of the renewed period queued", arguments: TestEngine.all)
    func renewalReachesDevice(engine: TestEngine) async throws {
        var serve: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { serve = ["--database", url] }
        let setup = try await Setup(serve: serve)
        let bought = try await setup.kiosk(["buy", Self.monthly, "--no-download"])
        #expect(bought.status == 0, "\(bought.stderr)")
        let first = try #require(try await setup.subscriptions().subscriptions.first)
        // An issue dated inside the period after the first one: only the renewal covers it.
        let renewedIssue = "com.kiosk.magazines.harbor-monthly.issue-09"
        let folder = setup.store.content.appendingPathComponent("magazines/harbor-monthly/issue-09")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("# Harbor Monthly, issue 9\n".utf8).write(to: folder.appendingPathComponent("index.md"))
        try setup.store.editCatalog("magazines.json") { products in
            var issue = products[2]
            issue["id"] = renewedIssue
            issue["issueNumber"] = 9
            issue["publicationDate"] = SubscriptionCoverage.day(first.expiresDate.addingTimeInterval(2 * 86_400))
            issue["content"] = ["path": "magazines/harbor-monthly/issue-09", "format": "tar.gz"]
            products.append(issue)
        }
        setup.server.signal(SIGHUP)
        let account = try #require(try await setup.kiosk(["account"]).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        #expect(try await setup.admin(["sandbox", account, "--advance", "32d"]).status == 0)
        // The renewal pass runs now (no device command in between, which would take it in itself).
        let adminToken = try String(contentsOf: setup.store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let pass = try await StoreHTTP(baseURL: setup.server.url).send("POST", "/v1/admin/renewals/run", token: adminToken)
        #expect(pass.status == 200, "\(String(decoding: pass.body, as: UTF8.self))")
        let synced = try await setup.kiosk(["sync"])
        #expect(synced.status == 0, "\(synced)")
        #expect(synced.stderr.contains(Self.monthly), "the sync did not say the renewal arrived: \(synced.stderr)")
        let listed = try await setup.kiosk(["transactions", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.filter { $0["productId"] as? String == Self.monthly }.count == 2, "\(listed.stdout)")
        let renewed = try #require(try await setup.subscriptions().subscriptions.first)
        #expect(renewed.expiresDate > first.expiresDate.addingTimeInterval(86_400), "not renewed: \(renewed)")
        let products = try await setup.kiosk(["products"])
        #expect(products.stdout.contains("subscribed until \(ListFilter.shown(renewed.expiresDate))"), "\(products.stdout)")
        let resumed = try await setup.kiosk(["resume"])
        #expect(resumed.status == 0, "\(resumed)")
        #expect(FileManager.default.fileExists(atPath: setup.home + "/Library/\(renewedIssue)"), "\(resumed.stdout) \(resumed.stderr)")
        _ = await setup.server.stop()
    }

    @Test("with --sandbox-time-scale a month passes in seconds: the worker renews on its own; a production store refuses the flag")
    func acceleratedClock() async throws {
        // 31 days in 4 seconds.
        let setup = try await Setup(serve: ["--sandbox-time-scale", "669600"])
        let bought = try await setup.kiosk(["buy", Self.monthly, "--no-download"])
        #expect(bought.status == 0, "\(bought.stderr)")
        let first = try #require(try await setup.subscriptions().subscriptions.first)
        let renewed = try await setup.renewed(after: first.expiresDate, seconds: 30)
        #expect(renewed != nil, "renewed by the worker within 30 s")
        _ = await setup.server.stop()

        let refused = try await KioskCommand.run(["serve", "--environment", "production", "--sandbox-time-scale", "10", "--port", "0",
                                                  "--catalog", setup.store.catalog.path, "--content", setup.store.content.path,
                                                  "--data", setup.directory.path("production").path])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("--sandbox-time-scale"), "\(refused.stderr)")
    }
}
