import Foundation
import GRDB
import KioskTestSupport
import Testing

/// `kiosk keys retire` on a live store, and the devices that restore afterwards.
@Suite("A retired signing key and kiosk restore")
struct RetiredKeyCommandTests {
    static let first = "com.kiosk.books.small-engines"
    static let second = "com.kiosk.books.river-of-maps"
    static let third = "com.kiosk.books.lighthouse-keeper"

    /// A running instance reads the keys again at most this long after `kiosk keys` changed them.
    static func waitForKeyRefresh() async throws {
        try await Task.sleep(for: .milliseconds(5_600))
    }

    static func token(_ setup: PurchaseCommandTests.Setup) async throws -> String {
        try await setup.kiosk("account", "--show-token").stdout.split(separator: "\n")
            .first { $0.hasPrefix("token: ") }
            .map { String($0.dropFirst("token: ".count).prefix(64)) } ?? ""
    }

    static func device(_ setup: PurchaseCommandTests.Setup, _ name: String, _ arguments: String...) async throws -> KioskCommand.Result {
        try await KioskCommand.run(arguments, environment: ["KIOSK_HOME": setup.directory.path(name).path])
    }

    @Test("buy, rotate, buy, retire the old key: a new device restores both books, the old device takes the re-signed receipt, and one bad receipt is reported alone while the rest are restored")
    func restoreAfterRetire() async throws {
        let setup = try await PurchaseCommandTests.Setup()
        let keyFlags = ["--data", setup.store.data.path]
        // Bought with the old key, its download left queued with the old receipt.
        #expect(try await setup.kiosk("buy", Self.first, "--no-download").status == 0)
        let oldKID = try #require(try await KioskCommand.run(["keys", "list"] + keyFlags).stdout.split(separator: "\t").first.map(String.init))

        #expect(try await KioskCommand.run(["keys", "rotate"] + keyFlags).status == 0)
        try await Self.waitForKeyRefresh()
        #expect(try await setup.kiosk("buy", Self.second).status == 0)
        let retired = try await KioskCommand.run(["keys", "retire", oldKID] + keyFlags)
        #expect(retired.status == 0, "\(retired.stderr)")
        #expect(retired.stdout == "retired \(oldKID); 1 live purchase carries a receipt signed by it, re-signed with the current key on their next restore\n")
        try await Self.waitForKeyRefresh()

        // A new device: both books come back.
        let token = try await Self.token(setup)
        #expect(try await Self.device(setup, "second", "account", "link", token, "--server", setup.server.url).status == 0)
        let restored = try await Self.device(setup, "second", "restore")
        #expect(restored.status == 0, "\(restored.stdout) \(restored.stderr)")
        #expect(restored.stdout.hasPrefix("restored 2 purchases:"), "\(restored.stdout)")
        #expect(restored.stdout.contains("installed \(Self.first) in ") && restored.stdout.contains("installed \(Self.second) in "))

        // The device that bought with the old key takes the re-signed receipt from the account's
        // changes at its next command (replay), and the download completes with it.
        let refreshed = try await setup.kiosk("resume")
        #expect(refreshed.status == 0, "\(refreshed.stdout) \(refreshed.stderr)")
        #expect(refreshed.stdout.contains("installed \(Self.first) in "), "\(refreshed.stdout)")
        #expect(!(refreshed.stdout + refreshed.stderr).contains(oldKID), "\(refreshed.stdout) \(refreshed.stderr)")
        let rows = try await setup.transactions()
        #expect(rows.count == 2 && rows.allSatisfy { $0["receiptVerified"] as? Bool == true }, "\(rows)")

        // One receipt spoiled in the store's database: it alone is refused, in one line, exit 1.
        #expect(try await setup.kiosk("buy", Self.third).status == 0)
        let database = try DatabaseQueue(path: setup.store.data.appendingPathComponent("kiosk-server.sqlite").path)
        let spoiled = try await database.write { db -> String in
            let id = try String.fetchOne(db, sql: #"SELECT "id" FROM "storeTransaction" WHERE "productId" = ?"#, arguments: [Self.third]) ?? ""
            try db.execute(sql: #"UPDATE "storeTransaction" SET "signedTransaction" = substr("signedTransaction", 1, length("signedTransaction") - 4) || 'AAAA' WHERE "id" = ?"#, arguments: [id])
            return id
        }
        try database.close()
        #expect(try await Self.device(setup, "third", "account", "link", token, "--server", setup.server.url).status == 0)
        let partial = try await Self.device(setup, "third", "restore")
        #expect(partial.status == 1)
        #expect(partial.stdout.hasPrefix("restored 2 purchases:"), "\(partial.stdout)")
        #expect(partial.stdout.contains("installed \(Self.first) in ") && partial.stdout.contains("installed \(Self.second) in "))
        // (stderr also carries the progress display; the errors are the lines that start "kiosk: ")
        let lines = partial.stderr.split(separator: "\n").filter { $0.hasPrefix("kiosk: ") || $0.contains(" warning ") || $0.contains(" error ") }
        #expect(lines.count == 1 && lines.first?.contains("transaction \(spoiled) (\(Self.third)) was not restored") == true, "\(partial.stderr)")
    }
}
