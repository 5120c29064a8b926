import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// An upgrade without downtime (issue 66), as an operator runs one over PostgreSQL: the previous
/// release serves, this release starts beside it over the same database and migrates it (expand
/// steps only) while readers buy through both, the previous release is stopped, and — the
/// rollback — started again alone over the migrated database. Every promise holds throughout.
///
/// The previous release is `PREVIOUS_RELEASE` in the Makefile, built by `make previous-release`
/// as `.build-previous/kiosk-server` (`make test` builds it first).
@Suite("An upgrade: the previous release and this one over one PostgreSQL")
struct UpgradeTests {
    static let books = ["com.kiosk.books.small-engines", "com.kiosk.books.lighthouse-keeper", "com.kiosk.books.night-sky-atlas", "com.kiosk.books.river-of-maps"]
    static let pack = "com.kiosk.credits.pack-5"
    static let plan = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// The previous release's `kiosk-server`; a missing one fails the test with how to build it.
    static func previousRelease() throws -> URL {
        let binary = SampleStore.repository.appendingPathComponent(".build-previous/kiosk-server")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw TestServiceError("the previous release's kiosk-server (\(binary.path)) is not built: `make previous-release` builds it (make test does)")
        }
        return binary
    }

    @Test("the previous release and this one serve side by side while this one migrates: purchases through both, each reads what the other wrote, one renewal by two workers; the previous release serves the migrated database again (the rollback); check is clean and every receipt verifies")
    func sideBySide() async throws {
        let previous = try Self.previousRelease()
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        guard case .postgres(let url) = try await TestPostgres.shared.freshDatabase() else { return }
        let cluster = try await TestPostgres.shared.cluster()
        let databaseName = try #require(URLComponents(string: url)?.path.dropFirst()).description
        func migrations() throws -> Set<String> {
            Set(try TestPostgres.psql(cluster, database: databaseName, #"SELECT "name" FROM "kioskMigration""#).split(separator: "\n").map(String.init))
        }
        let database = ["--database", url]
        let devices = (0..<4).map { ReaderDevice(home: directory.path("device-\($0)")) }

        // The previous release alone: it makes the database at its own schema.
        let old = try await ServerProcess.start(store, extraArguments: database, log: directory.path("previous.log"), program: previous)
        try await devices[0].buy(Self.books[0], server: old.url)
        try await devices[1].buy(Self.plan, server: old.url)
        let before = try migrations()

        // This release starts and migrates while a device buys through the previous one.
        var new: ServerProcess?
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [url = old.url] in
                try await devices[2].buy(Self.books[2], server: url)
                try await devices[2].buy(Self.pack, server: url)
            }
            new = try await ServerProcess.start(store, extraArguments: database, log: directory.path("new.log"))
            try await group.waitForAll()
        }
        let current = try #require(new)
        let added = try migrations().subtracting(before)
        #expect(!added.isEmpty, "this release migrated the previous release's database (it added \(added.sorted()))")

        // Both serve: each buys through one and finds its purchases through the other.
        try await devices[0].buy(Self.books[1], server: current.url)
        try await devices[3].buy(Self.books[3], server: current.url)
        try await devices[3].buy(Self.pack, server: old.url)
        for (device, server) in [(devices[0], old.url), (devices[3], old.url), (devices[2], current.url), (devices[1], current.url)] {
            let restored = try await KioskCommand.run(["restore", "--server", server], environment: device.environment)
            #expect(restored.status == 0, "\(device.home.lastPathComponent) restores through \(server == old.url ? "the previous release" : "this one"): \(restored.stderr)")
        }

        // The subscription renews once, with both releases' workers running.
        let admin = ["--server", current.url, "--data", store.data.path]
        let subscriber = try devices[1].accountId()
        #expect(try await KioskCommand.run(["admin", "sandbox", subscriber, "--advance", "31d"] + admin).status == 0)
        var renewals: [AdminTransactionRow] = []
        for _ in 0..<300 where renewals.isEmpty {
            let listed = try await KioskCommand.run(["admin", "transactions", "--json", "--product", Self.plan] + admin)
            renewals = ((try? JSONDecoder.kiosk.decode([AdminTransactionRow].self, from: Data(listed.stdout.utf8))) ?? []).filter { $0.paymentMethod == "renewal" }
            if renewals.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(renewals.count == 1, "one renewal with two releases' workers: \(renewals.map(\.transactionId))")

        // The upgrade ends: the previous release stops cleanly.
        #expect(await old.stop() == 0, "\(old.log)")

        // The rollback: this release stopped, the previous one serves the migrated database alone.
        #expect(await current.stop() == 0, "\(current.log)")
        let rolledBack = try await ServerProcess.start(store, extraArguments: database, log: directory.path("rollback.log"), program: previous)
        try await devices[1].buy(Self.books[0], server: rolledBack.url)
        for device in devices {
            let restored = try await KioskCommand.run(["restore", "--server", rolledBack.url], environment: device.environment)
            #expect(restored.status == 0, "after the rollback: \(restored.stderr)")
        }
        #expect(await rolledBack.stop() == 0, "\(rolledBack.log)")

        // Upgraded again: the books balance, every receipt verifies, nothing was charged twice.
        let check = try await KioskCommand.run(["admin", "check", "--data", store.data.path] + database)
        #expect(check.status == 0, "check after the upgrade and the rollback: \(check.stdout) \(check.stderr)")
        let again = try await ServerProcess.start(store, extraArguments: database, log: directory.path("again.log"))
        let http = StoreHTTP(baseURL: again.url)
        let policy = try await KioskReceiptPolicy(keySetJSON: try await http.send("GET", "/.well-known/jwks.json").body)
        for device in devices {
            for (product, receipt) in try device.receipts() {
                let claims = try await policy.check(receipt)
                #expect(claims.productId == product)
            }
            let status = try await KioskCommand.run(["library"], environment: device.environment)
            #expect(status.status == 0, "\(status.stderr)")
        }
        let everything = try await KioskCommand.run(["admin", "transactions", "--json", "--server", again.url, "--data", store.data.path])
        let rows = try JSONDecoder.kiosk.decode([AdminTransactionRow].self, from: Data(everything.stdout.utf8))
        let renewalIds = Set(rows.filter { $0.paymentMethod == "renewal" }.map(\.transactionId))
        let charged = rows.filter { !renewalIds.contains($0.transactionId) }
        let held = try devices.reduce(into: Set<String>()) { $0.formUnion(try $1.transactions()) }.subtracting(renewalIds)
        #expect(charged.count == 8 && Set(charged.map(\.transactionId)) == held,
                "one transaction for each of the 8 purchases, each held by the device that made it: \(charged.map(\.productId))")
        #expect(rows.allSatisfy { $0.revokedAt == nil }, "nothing revoked by the upgrade")
        _ = await again.stop()
    }
}
