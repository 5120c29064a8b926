import Foundation
import KioskCore
import KioskTestSupport
import Testing

@Suite("kiosk admin, as a publisher runs a store")
struct AdminCommandTests {
    @Test("admin lists accounts, sales, pending and downloads (with --json), and approves, refunds and revokes")
    func adminCommands() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path]
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: home).status == 0)
        #expect(try await KioskCommand.run(["buy", "com.kiosk.books.small-engines"], environment: home).status == 0)
        let deferred = try await KioskCommand.run(["buy", "com.kiosk.books.river-of-maps", "--payment", "defer"], environment: home)
        let pendingID = deferred.stdout.split(separator: " ").dropFirst().first.map { String($0.dropLast()) } ?? ""
        let admin = ["--server", server.url, "--data", store.data.path]
        func kiosk(_ arguments: [String]) async throws -> KioskCommand.Result {
            let result = try await KioskCommand.run(["admin"] + arguments + admin)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return result
        }
        #expect(try await kiosk(["accounts"]).stdout.contains("paid 4.99"))
        #expect(try await kiosk(["pending"]).stdout.contains(pendingID))
        #expect(try await kiosk(["sales", "--json"]).stdout.contains("\"netCents\":499"))
        #expect(try await kiosk(["downloads"]).stdout.contains("com.kiosk.books.small-engines"))
        #expect(try await kiosk(["approve", pendingID]).stdout == "transaction \(pendingID): purchased\n")
        let delivered = try await KioskCommand.run(["resume"], environment: home)
        #expect(delivered.stdout.contains("installed com.kiosk.books.river-of-maps"), "\(delivered.stdout)")
        let refunded = try await kiosk(["refund", pendingID, "--reason", "changed mind"])
        #expect(refunded.stdout == "refunded \(pendingID): 7.99 USD paid back, balance now 0 (changed mind)\n")
        let accounts = try await kiosk(["accounts", "--json"]).stdout
        let rows = try JSONSerialization.jsonObject(with: Data(accounts.utf8)) as? [[String: Any]] ?? []
        #expect(rows.first?["paidCents"] as? Int == 499, "charged 4.99 + 7.99, refunded 7.99")
        // A refund of what was revoked before says this refund's reason, as the ledger does.
        let list = try await kiosk(["transactions"]).stdout
        let first = list.split(separator: "\n").first { $0.contains("small-engines") }.flatMap { $0.split(separator: " ").first.map(String.init) } ?? ""
        #expect(try await kiosk(["revoke", first, "--reason", "first revoke"]).stdout.hasSuffix("(first revoke)\n"))
        let later = try await kiosk(["refund", first, "--reason", "later refund"]).stdout
        #expect(later.hasSuffix("(later refund)\n"), "\(later)")
        let bad = try await KioskCommand.run(["admin", "accounts", "--server", server.url, "--token", "wrong"])
        #expect(bad.status == 1 && bad.stderr.contains("answered 401"))
        // The reader's next contact learns of the refund and removes the book.
        let resumed = try await KioskCommand.run(["resume"], environment: home)
        #expect(resumed.stderr.contains("com.kiosk.books.river-of-maps: the store revoked this purchase"), "\(resumed.stderr)")
        _ = await server.stop()
    }

    @Test("kiosk admin codes create prints the codes as CSV this once; kiosk redeem-code installs the book; the list counts it; a withdrawn batch's code is refused in one line")
    func offerCodes() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let admin = ["--server", server.url, "--data", store.data.path]
        let made = try await KioskCommand.run(["admin", "codes", "create", "--product", "com.kiosk.books.river-of-maps", "--count", "2", "--expires", "2099-12-31"] + admin)
        #expect(made.status == 0 && made.stderr.contains("shown this once"), "\(made.stderr)")
        let lines = made.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "code,product,expires" && lines.count == 3, "\(made.stdout)")
        let codes = lines.dropFirst().compactMap { $0.split(separator: ",").first.map(String.init) }
        let redeemed = try await KioskCommand.run(["redeem-code", codes[0]], environment: home)
        #expect(redeemed.status == 0 && redeemed.stdout.contains("redeemed: com.kiosk.books.river-of-maps is yours"), "\(redeemed.stdout)\(redeemed.stderr)")
        #expect(try await KioskCommand.run(["library"], environment: home).stdout.contains("com.kiosk.books.river-of-maps"))
        let listed = try await KioskCommand.run(["admin", "codes"] + admin)
        #expect(listed.stdout.contains("1 of 2 redeemed") && !listed.stdout.contains(codes[1]), "\(listed.stdout)")
        let batch = try #require(listed.stdout.split(separator: " ").first.map(String.init))
        #expect(try await KioskCommand.run(["admin", "codes", "revoke", batch] + admin).stdout.contains("1 codes withdrawn"))
        let refused = try await KioskCommand.run(["redeem-code", codes[1]], environment: ["KIOSK_HOME": directory.path("other").path, "KIOSK_SERVER": server.url])
        #expect(refused.status == 1 && refused.stderr.contains("cannot be redeemed") && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        _ = await server.stop()
        #expect(!server.log.contains(codes[0]) && !server.log.contains(codes[1]), "no code in the log")
    }

    @Test("kiosk storefront chooses the account's country; kiosk buy --code takes a code's percentage off; kiosk admin tax --quarter --csv prints the quarter per country, its tax as the ledger has it")
    func storefrontCodeAndTax() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("books.json") { products in
            for index in products.indices where products[index]["id"] as? String == "com.kiosk.books.small-engines" {
                products[index]["prices"] = ["DE": ["price": "4.49", "currency": "EUR"]]
            }
        }
        let rates = SampleStore.repository.appendingPathComponent("deploy/tax/eu-epublications.json").path
        let server = try await ServerProcess.start(store, extraArguments: ["--tax-rates", rates], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let admin = ["--server", server.url, "--data", store.data.path]
        #expect(try await KioskCommand.run(["sync"], environment: home).status == 0)
        let none = try await KioskCommand.run(["storefront"], environment: home)
        #expect(none.status == 0 && none.stdout.contains("none chosen"), "\(none.stdout)\(none.stderr)")
        let wrong = try await KioskCommand.run(["storefront", "Germany"], environment: home)
        #expect(wrong.status != 0 && wrong.stderr.split(separator: "\n").count == 1 && wrong.stderr.contains("storefront"), "\(wrong.stderr)")
        let chosen = try await KioskCommand.run(["storefront", "de"], environment: home)
        #expect(chosen.status == 0 && chosen.stdout.contains("DE (Germany)"), "\(chosen.stdout)\(chosen.stderr)")

        let made = try await KioskCommand.run(["admin", "codes", "create", "--product", "com.kiosk.books.small-engines", "--count", "1", "--percent-off", "10"] + admin)
        #expect(made.status == 0, "\(made.stderr)")
        let code = try #require(made.stdout.split(separator: "\n").dropFirst().first?.split(separator: ",").first.map(String.init))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        func quarter() -> String { "\(calendar.component(.year, from: Date()))Q\((calendar.component(.month, from: Date()) - 1) / 3 + 1)" }
        let before = quarter()
        let bought = try await KioskCommand.run(["buy", "com.kiosk.books.small-engines", "--code", code, "--no-download"], environment: home)
        #expect(bought.status == 0, "\(bought.stdout)\(bought.stderr)")
        // 4.49 EUR less 10 % (0.449, to the nearest cent 0.45) is 4.04, holding 7 % (0.2643…: 0.26).
        let tax = try await KioskCommand.run(["admin", "tax", "--quarter", before, "--csv"] + admin)
        #expect(tax.status == 0 && tax.stdout.hasPrefix("country,rate,currency,sales,refunds,net,tax,gross\n"), "\(tax.stdout)\(tax.stderr)")
        // The line is there unless a quarter ended during the purchase (then it may be in the next).
        if quarter() == before {
            #expect(tax.stdout.contains("DE,7,EUR,1,0,3.78,0.26,4.04"), "\(tax.stdout)")
        }
        let badQuarter = try await KioskCommand.run(["admin", "tax", "--quarter", "2026Q9"] + admin)
        #expect(badQuarter.status != 0 && badQuarter.stderr.contains("2026Q9"), "\(badQuarter.stderr)")
        _ = await server.stop()
        #expect(!server.log.contains(code), "no code in the log")
    }
}
