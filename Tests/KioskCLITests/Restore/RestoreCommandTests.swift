import Foundation
import GRDB
import KioskTestSupport
import Testing

/// `kiosk restore` on another device: what comes back, what is said of products withdrawn or
/// refunded, and receipts signed with a key the store has since retired.
@Suite("kiosk restore: a second device, withdrawn and refunded products, a retired signing key")
struct RestoreCommandTests: KioskCommandSuite {
    typealias Setup = SyncedHome
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"
    static let first = "com.kiosk.books.small-engines"
    static let second = "com.kiosk.books.river-of-maps"
    static let third = "com.kiosk.books.lighthouse-keeper"

    /// A running instance reads the keys again at most this long after `kiosk keys` changed them.
    static func waitForKeyRefresh() async throws {
        try await Task.sleep(for: .milliseconds(5_600))
    }

    static func token(_ setup: SyncedHome) async throws -> String {
        try await setup.kiosk("account", "--show-token").stdout.split(separator: "\n")
            .first { $0.hasPrefix("token: ") }
            .map { String($0.dropFirst("token: ".count).prefix(64)) } ?? ""
    }

    static func device(_ setup: SyncedHome, _ name: String, _ arguments: String...) async throws -> KioskCommand.Result {
        try await KioskCommand.run(arguments, environment: ["KIOSK_HOME": setup.directory.path(name).path])
    }

    @Test("buy, rotate, buy, retire the old key: a new device restores both books, the old device takes the re-signed receipt, and one bad receipt is reported alone while the rest are restored")
    func restoreAfterRetire() async throws {
        let setup = try await SyncedHome()
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
        // The running store's writer may hold the write lock a moment (a commit, a checkpoint):
        // this write waits for it, as the store's own connections do, instead of failing at once
        // (GRDB's default), which a loaded machine made happen.
        var waiting = Configuration()
        waiting.busyMode = .timeout(30)
        let database = try DatabaseQueue(path: setup.store.data.appendingPathComponent("kiosk-server.sqlite").path, configuration: waiting)
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

    @Test("restore with no purchase new to this device that still downloads what it lacks says so, not 'nothing new to restore' before installing")
    func restoreThatOnlyDownloads() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("buy", Self.book, "--no-download").status == 0)
        let restored = try await setup.kiosk("restore")
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.hasPrefix("no purchase was new to this device; the content it lacked was downloaded:"), "\(restored.stdout)")
        #expect(restored.stdout.contains("installed \(Self.book) in "), "\(restored.stdout)")
        #expect(try await setup.kiosk("restore").stdout == "nothing new to restore\n")
    }

    @Test("account link then restore on a new device, as the help says (no sync): the book is installed, not the credits")
    func restoreOnSecondDevice() async throws {
        let setup = try await Setup()
        _ = try await setup.kiosk("buy", Self.pack5)
        _ = try await setup.kiosk("buy", Self.book)
        let token = try await setup.kiosk("account", "--show-token").stdout.split(separator: "\n")
            .first { $0.hasPrefix("token: ") }
            .map { String($0.dropFirst("token: ".count).prefix(64)) } ?? ""
        let second = setup.directory.path("second").path
        let env = ["KIOSK_HOME": second]
        #expect(try await KioskCommand.run(["account", "link", token, "--server", setup.server.url], environment: env).status == 0)
        let restored = try await KioskCommand.run(["restore"], environment: env)
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.hasPrefix("restored 1 purchases:"))
        #expect(restored.stdout.contains("installed \(Self.book) in "))
        #expect(restored.stdout.contains(Self.book))
        #expect(!restored.stdout.contains(Self.pack5))
        let again = try await KioskCommand.run(["restore", "--json"], environment: env)
        #expect(again.stdout == "[]\n")
        let states = try await KioskCommand.run(["transactions", "--json"], environment: env).stdout
        #expect(states.contains("\"state\":\"finished\"") && !states.contains("\"state\":\"delivering\""))
        let sync = try await KioskCommand.run(["sync", "--json"], environment: env)
        #expect(sync.stdout == #"{"added":[],"changed":[],"queued":[],"removed":[],"unchanged":true}"# + "\n")
    }

    @Test("restore of a product the operator removed for good says so instead of restored; a refunded credit pack does not speak of content")
    func withdrawnAndRefunded() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("buy", Self.book).status == 0)
        let pack = try Self.json(try await setup.kiosk("buy", Self.pack5, "--json").stdout)
        #expect(pack["outcome"] as? String == "complete" && pack["credits"] as? Int == 5 && pack["owned"] as? Bool == false)
        let transaction = try #require((pack["transaction"] as? [String: Any])?["transactionId"] as? String)
        let token = try await Self.token(setup)

        // The book leaves the catalog files, and the operator removes it on purpose (a withdrawn
        // book stays deliverable to its owners until then).
        try setup.store.editCatalog("books.json") { products in products.removeAll { $0["id"] as? String == Self.book } }
        setup.server.signal(SIGHUP)
        for _ in 0..<50 where !(try await Self.admin(setup, "products", "owners", Self.book).stdout.contains("owned by 1")) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let removed = try await Self.admin(setup, "products", "remove", Self.book, "--force")
        #expect(removed.status == 0 && removed.stdout.contains("1 account(s) owned it"), "\(removed)")
        for _ in 0..<50 where !(try await setup.kiosk("sync").stdout.contains("1 removed")) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let second = ["KIOSK_HOME": setup.directory.path("second").path]
        #expect(try await KioskCommand.run(["account", "link", token, "--server", setup.server.url], environment: second).status == 0)
        let restored = try await KioskCommand.run(["restore"], environment: second)
        #expect(restored.stdout.contains(try #require(restored.stdout.split(separator: "\n").first { $0.contains(Self.book) }.map(String.init))))
        let line = restored.stdout.split(separator: "\n").first { $0.contains(Self.book) }.map(String.init) ?? ""
        #expect(line.range(of: #"^  com\.kiosk\.books\.small-engines  \(transaction txn_[0-9a-f]+\): withdrawn from the store's catalog; its receipt is kept, but there is no content to download$"#,
                           options: .regularExpression) != nil, "\(restored.stdout)")

        #expect(try await Self.admin(setup, "refund", transaction, "--reason", "asked").status == 0)
        let balance = try await setup.kiosk("balance")
        #expect(balance.stdout == "0 credits\n")
        #expect(balance.stderr == "kiosk: \(Self.pack5): the store revoked this purchase of credits; no library content changed (kiosk balance shows what is left)\n")
    }
}
