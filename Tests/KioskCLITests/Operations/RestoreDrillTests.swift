import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The restore drill (issue 66), as an operator would run it: purchases on several devices and a
/// subscription renewed by the store's worker, more purchases while a backup is taken, more after it, the store killed, restored from the backup (SQLite: `kiosk admin
/// backup` and `restore`; PostgreSQL: pgBackRest to a point in time, into a new cluster), then
/// `kiosk admin check` clean, every device's receipts verify, what was bought before the backup
/// point stands, and what was bought after it is written again from its receipt or listed for the
/// operator (`kiosk admin lost`): never silently lost.
@Suite("The restore drill")
struct RestoreDrillTests {
    static let books = ["com.kiosk.books.small-engines", "com.kiosk.books.lighthouse-keeper", "com.kiosk.books.night-sky-atlas"]
    static let later = "com.kiosk.books.river-of-maps"
    static let pack = "com.kiosk.credits.pack-5"
    static let plan = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// A store as the drill needs it on either engine: started and killed as a process, its
    /// database backed up and restored by the engine's tools.
    protocol Engine: Sendable {
        var arguments: [String] { get }
        /// Takes the backup while purchases go on.
        func backup() async throws
        /// Marks the backup point (PostgreSQL: a point in time after what must be kept).
        func markPoint() async throws
        /// Restores the backup (or the point) once the store is killed; returns the new arguments.
        func restore() async throws -> [String]
        func finish() async
    }

    @Test("SQLite: a backup taken while devices buy, the store killed and restored with kiosk admin restore: check clean, receipts verify, later purchases written again or listed")
    func sqliteDrill() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let backup = directory.path("backups/kiosk.sqlite")
        try FileManager.default.createDirectory(at: backup.deletingLastPathComponent(), withIntermediateDirectories: true)
        struct SQLite: Engine {
            let store: SampleStore
            let file: URL
            var arguments: [String] { [] }
            func backup() async throws {
                let made = try await KioskCommand.run(["admin", "backup", file.path, "--data", store.data.path])
                #expect(made.status == 0, "\(made.stderr)")
                let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
                #expect((attributes[.posixPermissions] as? Int) == 0o600, "a backup holds the signing keys: its owner's only")
                let content = try Data(contentsOf: URL(fileURLWithPath: file.path + ".content.json"))
                #expect(try JSONSerialization.jsonObject(with: content) as? [Any] != nil)
                let again = try await KioskCommand.run(["admin", "backup", file.path, "--data", store.data.path])
                #expect(again.status == 1 && again.stderr.contains("exists already"), "\(again.stderr)")
            }
            func markPoint() async throws {}
            func restore() async throws -> [String] {
                let restored = try await KioskCommand.run(["admin", "restore", file.path, "--data", store.data.path])
                #expect(restored.status == 0, "\(restored.stderr)")
                #expect(restored.stdout.contains("the backup's last purchase or change"), "\(restored.stdout)")
                // The refund made after the backup's point, read from the database set aside: listed.
                #expect(restored.stdout.contains("refunded or revoked after the backup's point, which this store does not know: ")
                        && restored.stdout.contains("(\(RestoreDrillTests.books[1]), account "), "\(restored.stdout)")
                return []
            }
            func finish() async {}
        }
        try await drill(store: store, directory: directory, engine: SQLite(store: store, file: backup))
    }

    @Test("kiosk admin restore takes only this store's whole backup: an empty file, another program's SQLite file, a damaged copy and another store's backup are refused in one line, leaving nothing behind; two restores in a row each keep the database they replace; check refuses a file that is no store and leaves it as it was")
    func restoreRefusals() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let otherDirectory = try TemporaryDirectory()
        let other = try SampleStore(in: otherDirectory)
        for sample in [store, other] {
            let server = try await ServerProcess.start(sample, log: directory.path("server-\(UUID().uuidString.prefix(4)).log"))
            try await ReaderDevice(home: directory.path("device-\(UUID().uuidString.prefix(4))")).buy(Self.books[0], server: server.url)
            _ = await server.stop()
        }
        let data = ["--data", store.data.path]
        func restore(_ file: URL, _ extra: [String] = []) async throws -> KioskCommand.Result {
            try await KioskCommand.run(["admin", "restore", file.path] + data + extra)
        }
        let backup = directory.path("kiosk.sqlite")
        #expect(try await KioskCommand.run(["admin", "backup", backup.path] + data).status == 0)
        // Another backup's list of content files is not written over either.
        _ = try directory.write("listed.sqlite.content.json", "[]")
        let listed = try await KioskCommand.run(["admin", "backup", directory.path("listed.sqlite").path] + data)
        #expect(listed.status == 1 && listed.stderr.contains("exists already"), "\(listed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("listed.sqlite").path))
        let empty = try directory.write("empty.sqlite", "")
        let foreign = directory.path("foreign.sqlite")
        _ = try ToolProcess.run("/usr/bin/sqlite3", [foreign.path, "CREATE TABLE notes(text)"])
        let damaged = directory.path("damaged.sqlite")
        try FileManager.default.copyItem(at: backup, to: damaged)
        let handle = try FileHandle(forWritingTo: damaged)
        let size = try handle.seekToEnd()
        for page in stride(from: UInt64(2 * 4096), to: size, by: 4096) {
            try handle.seek(toOffset: page + 100)
            try handle.write(contentsOf: Data(repeating: 0xFF, count: 16))
        }
        try handle.close()
        let theirs = directory.path("theirs.sqlite")
        #expect(try await KioskCommand.run(["admin", "backup", theirs.path, "--data", other.data.path]).status == 0)
        for (file, words) in [(empty, "no Kiosk store"), (foreign, "no Kiosk store"), (damaged, "damaged"), (theirs, "another store's backup")] {
            let refused = try await restore(file)
            #expect(refused.status == 1 && refused.stderr.contains(words) && refused.stderr.split(separator: "\n").count == 1, "\(file.lastPathComponent): \(refused.stderr)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: store.data.path)
        #expect(!left.contains { $0.contains("restoring") || $0.contains("replaced") }, "a refused restore leaves nothing: \(left)")
        #expect(try await restore(backup).status == 0)
        #expect(try await restore(backup).status == 0)
        let aside = try FileManager.default.contentsOfDirectory(atPath: store.data.path).filter { $0.hasPrefix("kiosk-server.sqlite.replaced-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        #expect(aside.count == 2, "each restore kept the database it replaced: \(aside)")
        #expect(try await restore(theirs, ["--other-store"]).status == 0, "another store's backup, asked for by name")
        // check opens no file that is not a store, and changes none.
        let notStore = directory.path("not-a-store")
        try FileManager.default.createDirectory(at: notStore, withIntermediateDirectories: true)
        _ = try ToolProcess.run("/usr/bin/sqlite3", [notStore.appendingPathComponent("kiosk-server.sqlite").path, "CREATE TABLE notes(text)"])
        let before = try Data(contentsOf: notStore.appendingPathComponent("kiosk-server.sqlite"))
        let checked = try await KioskCommand.run(["admin", "check", "--data", notStore.path])
        #expect(checked.status == 1 && checked.stderr.contains("no Kiosk store"), "\(checked.stderr)")
        #expect(try Data(contentsOf: notStore.appendingPathComponent("kiosk-server.sqlite")) == before)
    }

    @Test("PostgreSQL: a pgBackRest full backup taken while devices buy, WAL archived, the store killed and the database restored to a point in time into a new cluster: check clean, receipts verify, later purchases written again or listed")
    func postgresDrill() async throws {
        let directory = try TemporaryDirectory()
        // PostgreSQL and pgBackRest run as the postgres user, which must reach the cluster's folder.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.url.path)
        let store = try SampleStore(in: directory)
        let postgres = try await Postgres(folder: directory.path("pg"))
        do {
            try await drill(store: store, directory: directory, engine: postgres)
        } catch {
            await postgres.finish()
            throw error
        }
    }

    /// PostgreSQL with pgBackRest (scripts/pgbackrest-drill): a cluster of the test's own, started
    /// with archiving; a full backup; the point in time after what must be kept; a restore into a
    /// new cluster.
    final class Postgres: Engine, @unchecked Sendable {
        static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts")
        let folder: URL
        let restoredFolder: URL
        let port: Int
        private var point = ""

        init(folder: URL) async throws {
            self.folder = folder
            restoredFolder = folder.deletingLastPathComponent().appendingPathComponent("pg-restored")
            let started = try await Self.run("postgres-cluster", ["start", folder.path, "--archive", "--watch", String(getpid()), "--database", "kiosk"])
            port = try Self.port(in: started)
            _ = try await Self.run("pgbackrest-drill", ["setup", folder.path])
        }

        var arguments: [String] { ["--database", Self.url(port)] }

        func backup() async throws {
            let made = try await Self.run("pgbackrest-drill", ["backup", folder.path, "--type", "full"])
            #expect(made.hasPrefix("label="), "\(made)")
        }

        func markPoint() async throws {
            point = try await Self.run("pgbackrest-drill", ["time", folder.path]).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func restore() async throws -> [String] {
            let started = try await Self.run("pgbackrest-drill", ["restore", folder.path, "--into", restoredFolder.path, "--target", point, "--watch", String(getpid())])
            return ["--database", Self.url(try Self.port(in: started))]
        }

        func finish() async {
            for cluster in [restoredFolder, folder] { _ = try? await Self.run("postgres-cluster", ["stop", cluster.path, "--remove"]) }
        }

        static func url(_ port: Int) -> String { "postgres://kiosk@127.0.0.1:\(port)/kiosk?tlsmode=disable" }

        static func port(in line: String) throws -> Int {
            guard let field = line.split(whereSeparator: { $0 == " " || $0 == "\n" }).first(where: { $0.hasPrefix("port=") }),
                  let port = Int(field.dropFirst(5)) else {
                throw TestServiceError("no port=… in \(line)")
            }
            return port
        }

        /// Runs one of the repository's scripts; a failure (pgBackRest or PostgreSQL missing, say) is
        /// the script's own one line, which fails the test.
        @discardableResult
        static func run(_ script: String, _ arguments: [String]) async throws -> String {
            let path = scripts.appendingPathComponent(script).path
            let (status, output) = try await offCooperativePool { try ToolProcess.run(path, arguments) }
            guard status == 0 else { throw TestServiceError("\(script) \(arguments.joined(separator: " ")) failed (\(status)): \(output)") }
            return output
        }
    }

    /// The drill on any engine: devices buy while the backup is taken, one buys after the backup
    /// point and a new device's account is made after it; the store is killed and restored.
    func drill(store: SampleStore, directory: TemporaryDirectory, engine: some Engine) async throws {
        var server = try await ServerProcess.start(store, extraArguments: engine.arguments, log: directory.path("server.log"))
        let devices = (0..<3).map { ReaderDevice(home: directory.path("device-\($0)")) }
        // A book on each of three devices at once; then credit packs on all three while the backup
        // is taken (in it or not: either way nothing may be lost).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, device) in devices.enumerated() {
                group.addTask { [url = server.url] in try await device.buy(Self.books[index], server: url) }
            }
            try await group.waitForAll()
        }
        // A subscription renewed by the store's worker (its account's sandbox clock moved a period on).
        try await devices[1].buy(Self.plan, server: server.url)
        let admin = ["--server", server.url, "--data", store.data.path]
        let subscriber = try devices[1].accountId()
        #expect(try await KioskCommand.run(["admin", "sandbox", subscriber, "--advance", "31d"] + admin).status == 0)
        var renewed = false
        for _ in 0..<300 where !renewed {
            let listed = try await KioskCommand.run(["admin", "transactions", "--json", "--product", Self.plan] + admin)
            renewed = (try? JSONDecoder.kiosk.decode([AdminTransactionRow].self, from: Data(listed.stdout.utf8)))?.contains { $0.paymentMethod == "renewal" } ?? false
            if !renewed { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(renewed, "the renewal worker renewed the subscription before the backup")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask { [url = server.url] in try await device.buy(Self.pack, server: url) }
            }
            group.addTask { try await engine.backup() }
            try await group.waitForAll()
        }
        try await engine.markPoint()
        // After the backup point: a purchase on a device the backup knows, a new device's account,
        // and a refund of a purchase the backup holds (which a restore to the point cannot know).
        try await devices[0].buy(Self.later, server: server.url)
        let refunded = try #require(try devices[1].transaction(for: Self.books[1]))
        let refund = try await KioskCommand.run(["admin", "refund", refunded, "--reason", "after the backup"] + admin)
        #expect(refund.status == 0, "\(refund.stderr)")
        let newcomer = ReaderDevice(home: directory.path("device-new"))
        try await newcomer.buy(Self.books[0], server: server.url)
        server.signal(SIGKILL)
        _ = await server.stop()

        let restored = try await engine.restore()
        let check = try await KioskCommand.run(["admin", "check", "--data", store.data.path] + restored.filter { $0.hasPrefix("--database") || $0.hasPrefix("postgres") })
        #expect(check.status == 0, "the restored store checks clean: \(check.stdout) \(check.stderr)")
        server = try await ServerProcess.start(store, extraArguments: restored, log: directory.path("server-restored.log"))
        let http = StoreHTTP(baseURL: server.url)
        // Every receipt every device holds verifies under the keys the restored store publishes.
        let policy = try await KioskReceiptPolicy(keySetJSON: try await http.send("GET", "/.well-known/jwks.json").body)
        for device in devices + [newcomer] {
            for (product, receipt) in try device.receipts() {
                let claims = try await policy.check(receipt)
                #expect(claims.productId == product)
            }
        }
        // Each book bought before the backup point downloads with its receipt; the one bought after
        // it is written again from its receipt; the newcomer's account is not in the backup.
        func download(_ device: ReaderDevice, _ product: String) async throws -> Int {
            let receipt = try #require(try device.receipts().first { $0.product == product }?.receipt)
            return try await http.send("HEAD", "/v1/content/\(product)", authorization: "Receipt \(receipt)").status
        }
        for (index, device) in devices.enumerated() {
            #expect(try await download(device, Self.books[index]) == 200)
        }
        #expect(try await download(devices[0], Self.later) == 200, "bought after the backup point: written again from its receipt")
        #expect(try await download(newcomer, Self.books[0]) == 403, "an account the backup does not hold")
        let lost = try await KioskCommand.run(["admin", "lost", "--json", "--server", server.url, "--data", store.data.path])
        #expect(lost.status == 0, "\(lost.stderr)")
        let rows = try JSONDecoder.kiosk.decode([AdminReinstatementRow].self, from: Data(lost.stdout.utf8))
        #expect(rows.first { $0.productId == Self.later }?.outcome == "reinstated", "\(lost.stdout)")
        #expect(rows.first { $0.productId == Self.books[0] }?.outcome == "accountUnknown", "\(lost.stdout)")
        // Written again with its charge, on the day it was paid: the books still balance.
        _ = await server.stop()
        let after = try await KioskCommand.run(["admin", "check", "--data", store.data.path] + restored.filter { $0.hasPrefix("--database") || $0.hasPrefix("postgres") })
        #expect(after.status == 0, "\(after.stdout) \(after.stderr)")
        #expect(after.stdout.contains("receipts: ") && !after.stdout.contains("receipts: 0 checked"), "\(after.stdout)")
        await engine.finish()
    }
}
