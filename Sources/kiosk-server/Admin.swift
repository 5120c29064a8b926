import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore
import KioskServer
import KioskStore
import Logging

extension KioskServerTool {
    /// The operator's commands that work on the store's own files, beside a running server or
    /// without one (`kiosk admin backup`, `check`, `restore`; the rest of `kiosk admin` speaks to
    /// a running server over its admin API).
    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Back up, check and restore the store's database (docs/operations.md).",
            subcommands: [Backup.self, Check.self, Restore.self])

        /// The store a command works on: its data folder and, unless it is the SQLite file there, its database.
        struct Target: ParsableArguments {
            @OptionGroup var store: StoreDatabaseOptions

            @Option(help: ArgumentHelp("The server's data folder, whose SQLite database and content store are the defaults ($KIOSK_DATA).", valueName: "dir"))
            var data = ProcessInfo.processInfo.environment["KIOSK_DATA"].flatMap { $0.isEmpty ? nil : $0 } ?? ".kiosk-server"

            var dataDirectory: URL { URL(fileURLWithPath: data) }
            var sqliteFile: URL { dataDirectory.appendingPathComponent("kiosk-server.sqlite") }

            func location() throws -> DatabaseLocation {
                try store.location() ?? .sqlite(path: sqliteFile.path)
            }

            /// The store of a database that exists and is a store (a mistyped --data must not make
            /// a new one, nor turn another program's SQLite file into one), and what SQLite's own
            /// check says of it (nil on PostgreSQL).
            func open() async throws -> (Store, integrity: String?) {
                LogSetup.bootstrap()
                let location = try location()
                var integrity: String?
                if case .sqlite(let path) = location {
                    guard FileManager.default.fileExists(atPath: path) else {
                        throw ValidationError("no store at \(path); pass the --data folder of a store that has run (or its --database)")
                    }
                    integrity = try SQLiteFileCheck.inspect(path).integrity
                }
                return (try await Store.openForMaintenance(location, logger: Logger(label: "kiosk.admin")), integrity)
            }
        }

        struct Backup: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Copy an SQLite store's database, consistently, while it serves; list the content files it needs.",
                discussion: """
                    Writes FILE (readable by its owner only: it holds the receipt signing keys) and \
                    FILE.content.json, the content store's files (archives, manifests, covers, by SHA-256) \
                    the database names; copy <data>/content/ beside it. A PostgreSQL store is backed up \
                    with pgBackRest instead (docs/operations.md).

                    Example: kiosk admin backup /backups/kiosk-$(date +%F).sqlite --data /var/lib/kiosk
                    """)
            @OptionGroup var target: Target
            @Argument(help: ArgumentHelp("The new backup file (never written over).", valueName: "file"))
            var file: String

            func run() async throws {
                try await reportingErrors {
                    let (store, integrity) = try await target.open()
                    if let integrity, integrity != "ok" {
                        FileHandle.standardError.write(Data("kiosk: warning: the database is damaged (SQLite's check: \(integrity)); the backup copies it as it is: run kiosk admin check\n".utf8))
                    }
                    do {
                        let destination = URL(fileURLWithPath: file)
                        // Its list of content files is never written over either (another backup's).
                        guard !FileManager.default.fileExists(atPath: file + ".content.json") else {
                            throw ValidationError("\(file).content.json exists already; name a new file (a backup is never written over another)")
                        }
                        let started = ContinuousClock.now
                        let size = try await store.backupSQLite(to: destination)
                        let inventory = ContentInventory(registry: try await store.publishedProducts.load())
                        let manifest = URL(fileURLWithPath: file + ".content.json")
                        try JSONEncoder.kiosk.encode(inventory.entries).write(to: manifest, options: .atomic)
                        let seconds = (ContinuousClock.now - started) / .seconds(1)
                        print("backed up \(try target.location()) to \(destination.path) (\(size) bytes, \(String(format: "%.1f", seconds)) s); content files it needs: \(inventory.entries.count), listed in \(manifest.path)")
                    } catch {
                        await store.close()
                        throw error
                    }
                    await store.close()
                }
            }
        }

        struct Check: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Check the store: receipts verify, balances and each day's sales add up, every content file is whole.",
                discussion: """
                    Exit status 0 when nothing is wrong, 1 naming each fault. Reads only.

                    Example: kiosk admin check --data /var/lib/kiosk
                    """)
            @OptionGroup var target: Target
            @Flag(help: "Print the outcome as JSON.")
            var json = false

            func run() async throws {
                try await reportingErrors {
                    let (store, integrity) = try await target.open()
                    let outcomes: [StoreAudit.Outcome]
                    do {
                        var checked: [StoreAudit.Outcome] = []
                        if let integrity {
                            // SQLite's own look at its pages and indexes: a damaged index (the one
                            // that stops a book being charged twice, say) is a fault like any.
                            checked.append(StoreAudit.Outcome(check: "integrity", examined: 1, faults: integrity == "ok" ? [] : [
                                StoreAudit.Fault(check: "integrity", subject: "the database file", detail: "SQLite's quick_check says: \(integrity); restore a backup that checks clean")]))
                        }
                        checked += try await store.audit.run()
                        let inventory = ContentInventory(registry: try await store.publishedProducts.load())
                        let content = target.dataDirectory.appendingPathComponent("content")
                        checked.append(StoreAudit.Outcome(check: "files", examined: inventory.entries.count, faults: inventory.verify(in: content)))
                        outcomes = checked
                    } catch {
                        await store.close()
                        throw error
                    }
                    await store.close()
                    if json {
                        print(String(decoding: try JSONEncoder.kiosk.encode(outcomes), as: UTF8.self))
                    } else {
                        for outcome in outcomes {
                            print("\(outcome.check): \(outcome.examined) checked, \(outcome.faults.isEmpty ? "all good" : "\(outcome.faults.count) wrong")")
                            for fault in outcome.faults.prefix(100) { print("  \(fault.subject): \(fault.detail)") }
                            if outcome.faults.count > 100 { print("  … and \(outcome.faults.count - 100) more (--json lists every one)") }
                        }
                    }
                    if outcomes.contains(where: { !$0.faults.isEmpty }) { throw ExitCode.failure }
                }
            }
        }

        struct Restore: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Put an SQLite backup in place of the store's database (the store stopped), then check it.",
                discussion: """
                    Refuses while any process has the database open: stop every kiosk serve on it first. \
                    The database it replaces is kept beside it (kiosk-server.sqlite.replaced-DATE). \
                    Purchases made after the backup are not in it: see docs/operations.md, "After a restore".

                    Example: kiosk admin restore /backups/kiosk-2026-11-30.sqlite --data /var/lib/kiosk
                    """)
            @OptionGroup var target: Target
            @Argument(help: ArgumentHelp("The backup kiosk admin backup wrote.", valueName: "file"))
            var backup: String

            @Flag(help: "Restore a backup that shares no signing key with the database it replaces (another store's).")
            var otherStore = false

            func run() async throws {
                try await reportingErrors {
                    LogSetup.bootstrap()
                    guard case .sqlite(let path) = try target.location() else {
                        throw ValidationError("--database is PostgreSQL: restore it with pgBackRest (docs/operations.md, \"PostgreSQL\")")
                    }
                    let source = URL(fileURLWithPath: backup)
                    guard FileManager.default.fileExists(atPath: source.path) else {
                        throw ValidationError("\(source.path): no such backup; name the file kiosk admin backup wrote")
                    }
                    guard !Store.sqliteInUse(path) else {
                        throw ValidationError("\(path) is open in another process (a kiosk serve, or a command): stop every instance on it, then restore")
                    }
                    let target = URL(fileURLWithPath: path)
                    let folder = target.deletingLastPathComponent()
                    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                    // The backup is a store, whole, and this store's: checked before anything moves.
                    let findings = try SQLiteFileCheck.inspect(source.path)
                    guard findings.integrity == "ok" else {
                        throw ValidationError("\(source.path) is damaged (SQLite's check: \(findings.integrity)); restore another backup")
                    }
                    if FileManager.default.fileExists(atPath: path), let current = try? SQLiteFileCheck.inspect(path),
                       current.keyIDs.isDisjoint(with: findings.keyIDs), !otherStore {
                        throw ValidationError("\(source.path) shares no signing key with \(path): it is another store's backup, and no receipt this store signed would verify after it; pass --other-store if that is what you mean")
                    }
                    // The copy is checked where it will live before it takes the database's name.
                    let incoming = folder.appendingPathComponent(".\(target.lastPathComponent).restoring-\(UUID().uuidString)")
                    var placed = false
                    defer {
                        if !placed { for suffix in ["", "-wal", "-shm", "-journal"] { unlink(incoming.path + suffix) } }
                    }
                    try SecretCopy.copy(source, to: incoming)
                    let checked = try await Store.openForMaintenance(.sqlite(path: incoming.path), logger: Logger(label: "kiosk.admin"))
                    let point = try await checked.reports.lastActivity()
                    await checked.close()
                    // Unique to the millisecond and a random part: a second restore never writes over the first's.
                    let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "") + "-" + UUID().uuidString.prefix(8)
                    var keptAside: String?
                    if FileManager.default.fileExists(atPath: path) {
                        let aside = path + ".replaced-" + stamp
                        guard !FileManager.default.fileExists(atPath: aside), rename(path, aside) == 0 else {
                            throw ValidationError("\(path) cannot be moved aside (\(String(cString: strerror(errno))))")
                        }
                        keptAside = aside
                    }
                    // The replaced database's journal belongs to it, not to the backup.
                    for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                        if let keptAside { _ = rename(path + suffix, keptAside + suffix) } else { unlink(path + suffix) }
                    }
                    for suffix in ["-wal", "-shm"] { unlink(incoming.path + suffix) }
                    guard rename(incoming.path, path) == 0 else { throw ValidationError("\(path) cannot be written (\(String(cString: strerror(errno))))") }
                    placed = true
                    try? FileHandle(forReadingFrom: folder).synchronize()
                    // A store started between the check above and the swap opened the old file:
                    // it would run on the database set aside, and what it wrote would be lost.
                    if let keptAside, Store.sqliteInUse(keptAside) {
                        throw ValidationError("a process opened \(path) while it was being restored (a kiosk serve started meanwhile?); it is running on the database set aside, \(keptAside): stop it at once, then start the store again (the restore is in place)")
                    }
                    print("restored \(source.path) to \(path)\(keptAside.map { "; the database it replaced is \($0)" } ?? "")")
                    print("the backup's last purchase or change: \(point.map { ISO8601DateFormatter().string(from: $0) } ?? "none"); anything after it is not in this store (docs/operations.md, \"After a restore\")")
                    // What the replaced database took back after the point, which the backup cannot know.
                    if let keptAside, let point {
                        for later in await Self.revokedAfter(point, in: keptAside) {
                            print("refunded or revoked after the backup's point, which this store does not know: \(later.id) (\(later.productId), account \(later.accountId), \(ISO8601DateFormatter().string(from: later.revokedAt))\(later.revocationReason.map { ", \($0)" } ?? "")): refund it again with kiosk admin refund \(later.id) once the store runs (one bought after the point is in kiosk admin lost once its receipt is presented)")
                        }
                    }
                    print("run kiosk admin check --data \(self.target.data) to check it, then start the store")
                }
            }
        }
    }
}

extension KioskServerTool.Admin.Restore {
    /// The refunds and revocations the database at `path` made after `point`; none when it cannot
    /// be read as a store (a damaged database is often why a restore was needed).
    static func revokedAfter(_ point: Date, in path: String) async -> [Reports.LaterRevocation] {
        guard (try? SQLiteFileCheck.inspect(path))?.integrity == "ok",
              let replaced = try? await Store.openForMaintenance(.sqlite(path: path), logger: Logger(label: "kiosk.admin")) else { return [] }
        let later = (try? await replaced.reports.revoked(after: point)) ?? []
        await replaced.close()
        return later
    }
}

/// Copies a backup, readable by its owner only from its first byte, and syncs it.
enum SecretCopy {
    static func copy(_ source: URL, to destination: URL) throws {
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        let descriptor = open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw ValidationError("\(destination.path) cannot be written (\(String(cString: strerror(errno))))") }
        let output = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty { try output.write(contentsOf: chunk) }
        try output.synchronize()
        try output.close()
    }
}
