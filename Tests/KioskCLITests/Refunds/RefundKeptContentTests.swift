import Foundation
import KioskTestSupport
import Testing

/// What the reader is told when a refund takes nothing away: the refunded issue stays in the
/// library because a subscription period still covers it. (Found by an attack: the command said
/// the content was removed while it was, rightly, kept.)
@Suite("A refund that keeps the content")
struct RefundKeptContentTests {
    static let issue = "com.kiosk.magazines.harbor-monthly.issue-03"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    @Test("an issue refunded while a subscription covers it: the reader is told it stays, and it does")
    func refundedIssueUnderSubscriptionStays() async throws {
        let shop = try await Shop.open()
        defer { shop.close() }
        let (home, environment) = (shop.home, shop.environment)
        #expect(try await KioskCommand.run(["buy", Self.issue], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.subscription], environment: environment).status == 0)
        let refunded = try await shop.refund(try await shop.transaction(of: Self.issue))
        #expect(refunded.status == 0, "\(refunded.stderr)")

        let synced = try await KioskCommand.run(["sync"], environment: environment)
        #expect(synced.stderr.contains("\(Self.issue): the store revoked this purchase; its content stays in the library"), "\(synced.stderr)")
        #expect(!synced.stderr.contains("removed from the library"), "\(synced.stderr)")
        #expect(FileManager.default.fileExists(atPath: home + "/Library/" + Self.issue))
    }

    @Test("a subscription period refunded while a bought issue stays: the reader is told a period was revoked, not that its content was removed, and the bought issue stays")
    func refundedPeriodSaysSo() async throws {
        let shop = try await Shop.open()
        defer { shop.close() }
        let (home, environment) = (shop.home, shop.environment)
        #expect(try await KioskCommand.run(["buy", Self.issue], environment: environment).status == 0)
        #expect(try await KioskCommand.run(["buy", Self.subscription], environment: environment).status == 0)
        let refunded = try await shop.refund(try await shop.transaction(of: Self.subscription))
        #expect(refunded.status == 0, "\(refunded.stderr)")

        let synced = try await KioskCommand.run(["sync"], environment: environment)
        #expect(synced.stderr.contains("\(Self.subscription): the store revoked a period of this subscription"), "\(synced.stderr)")
        #expect(!synced.stderr.contains("its content was removed"), "\(synced.stderr)")
        #expect(FileManager.default.fileExists(atPath: home + "/Library/" + Self.issue))
    }

    @Test("a refund that also revokes the free re-buy standing on it is told once for the book, and the operator's view of an account that owns nothing says so")
    func refundWithRebuyToldOnce() async throws {
        let shop = try await Shop.open()
        defer { shop.close() }
        let environment = shop.environment
        let book = "com.kiosk.books.lighthouse-keeper"
        #expect(try await KioskCommand.run(["buy", book], environment: environment).status == 0)
        let again = try await KioskCommand.run(["buy", book], environment: environment)
        #expect(again.stdout.contains("already owned"), "\(again.stdout)")
        #expect(try await shop.refund(try await shop.transaction(of: book)).status == 0)
        let synced = try await KioskCommand.run(["sync"], environment: environment)
        #expect(synced.stderr.split(separator: "\n").filter { $0.contains("\(book): the store revoked") }.count == 1, "\(synced.stderr)")

        let account = try await KioskCommand.run(["account"], environment: environment).stdout
        let id = account.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) } ?? ""
        let view = try await KioskCommand.run(["admin", "account", id] + shop.admin)
        #expect(view.stdout.hasPrefix("account \(id): 0 credits, owns nothing\n"), "\(view.stdout)")
    }

    /// A sample store served for one test, and a reader's home that buys from it.
    struct Shop {
        let directory: TemporaryDirectory
        let store: SampleStore
        let server: ServerProcess
        var home: String { directory.path("home").path }
        var environment: [String: String] { ["KIOSK_HOME": home, "KIOSK_SERVER": server.url] }
        /// The operator's flags for `kiosk admin`.
        var admin: [String] { ["--server", server.url, "--data", store.data.path] }

        static func open() async throws -> Shop {
            let directory = try TemporaryDirectory()
            let store = try SampleStore(in: directory)
            return Shop(directory: directory, store: store, server: try await ServerProcess.start(store, log: directory.path("server.log")))
        }

        func close() {
            let server = server
            Task { _ = await server.stop() }
        }

        /// The transaction the reader's device holds for `product`, as `kiosk transactions` lists it.
        func transaction(of product: String) async throws -> String {
            let listed = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": home]).stdout
            let rows = try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] ?? []
            return try #require(rows.first { $0["productId"] as? String == product }?["transactionId"] as? String)
        }

        func refund(_ transaction: String) async throws -> KioskCommand.Result {
            try await KioskCommand.run(["admin", "refund", transaction] + admin)
        }
    }
}
