import Foundation
import GRDB
import KioskTestSupport
import Testing

/// A row of the reader's own database is no proof: the client delivers nothing on a receipt that
/// does not verify now. (Found by an attack: a purchase row copied into another home with the
/// first account's receipt was installed by `kiosk resume`, shown as owned, and its finish retried
/// every minute for ever, while `kiosk transactions` already called the receipt rejected.)
@Suite("A copied receipt")
struct CopiedReceiptTests {
    static let book = "com.kiosk.books.night-sky-atlas"

    @Test("another account's receipt copied into this home's purchases installs nothing and fails the purchase with why")
    func anotherAccountsReceiptIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        defer { Task { _ = await server.stop() } }
        let owner = directory.path("owner").path, other = directory.path("other").path
        #expect(try await KioskCommand.run(["buy", Self.book], environment: ["KIOSK_HOME": owner, "KIOSK_SERVER": server.url]).status == 0)
        // The other home has an account of its own (a pack of credits) and never bought the book.
        #expect(try await KioskCommand.run(["buy", "com.kiosk.credits.pack-5"], environment: ["KIOSK_HOME": other, "KIOSK_SERVER": server.url]).status == 0)

        let bought = try DatabaseQueue(path: owner + "/kiosk.sqlite")
        let row = try #require(try await bought.read { try Row.fetchOne($0, sql: "SELECT receipt, transactionId FROM payment WHERE productId = ?", arguments: [Self.book]) })
        let (receipt, transaction): (String, String) = (row["receipt"], row["transactionId"])
        try bought.close()
        let copied = try DatabaseQueue(path: other + "/kiosk.sqlite")
        try await copied.write { db in
            try db.execute(sql: """
                INSERT INTO payment (idempotencyKey, productId, kind, quantity, paymentMethod, state, transactionId, originalTransactionId, receipt, createdAt, updatedAt, storeURL)
                SELECT 'copied', ?, 'nonConsumable', 1, 'approve', 'purchased', ?, ?, ?, createdAt, updatedAt, storeURL FROM payment LIMIT 1
                """, arguments: [Self.book, transaction, transaction, receipt])
        }
        try copied.close()

        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": other, "KIOSK_SERVER": server.url])
        #expect(!FileManager.default.fileExists(atPath: other + "/Library/" + Self.book), "installed on a copied receipt: \(resumed.stdout)\(resumed.stderr)")
        let listed = try await KioskCommand.run(["transactions"], environment: ["KIOSK_HOME": other])
        #expect(listed.stdout.contains("does not verify on this device"), "\(listed.stdout)")
        // Failed for good: the next resume neither retries it nor waits for it.
        let again = try await KioskCommand.run(["resume", "--wait", "--max-wait", "5"], environment: ["KIOSK_HOME": other, "KIOSK_SERVER": server.url])
        #expect(!again.stderr.contains("failed again"), "\(again.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other + "/Library/" + Self.book))
    }
}
