import Foundation
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
}
