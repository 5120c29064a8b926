import Foundation
import Glibc
import KioskCore
import Logging

extension Store {
    /// The store of a database as an operator's command opens it (`kiosk admin check`, `backup`,
    /// `restore`), beside a running server or without one: in the environment the database was
    /// first served in (read from its mark, so no flag can open a production store as a sandbox),
    /// with no catalog (nothing is sold or delivered).
    /// - Throws: ``ServerSetupError`` when the database cannot be opened or is a newer schema's.
    public static func openForMaintenance(_ location: DatabaseLocation, logger: Logger) async throws -> Store {
        let database = try await ServerDatabase.open(location, logger: logger)
        do {
            let environment = try await StoreEnvironmentMark.recorded(in: database) ?? .sandbox
            let keys = try await SigningKeys(database: database, identity: .kiosk(environment), legacyKeyFile: nil, logger: logger)
            let clock = try await StoreClock.load(scale: 1, environment: environment, database: database)
            return Store(database: database, keys: keys, catalog: NoCatalog(), environment: environment, metrics: NoStoreMetrics(),
                         logger: logger, appStore: nil, clock: clock, accountPolicy: AccountPolicy(), channels: StoreChannels(), taxes: .none)
        } catch {
            await database.close()
            throw error
        }
    }

    /// Whether the store sends mail (`--smtp-url`): the pages offer reset links only then.
    public var sendsMail: Bool { base.accountPolicy.sendsMail }

    /// Asks the database the least it can answer: whether it answers at all (`/healthz`).
    public func ping() async throws {
        try await base.database.read { db in _ = try await db.raw("SELECT 1").all() }
    }

    /// The engine and place of the database, for a command's messages.
    public var databaseLocation: DatabaseLocation { base.database.location }
}

/// An operator's command sells and delivers nothing.
private struct NoCatalog: StoreCatalog {
    func storeProducts() async throws -> CatalogProducts { throw StoreError.starting }
    func removeWithdrawn(_ productId: String) async throws {}
}

extension Store {
    /// Writes a consistent copy of an SQLite store to `destination` while the store serves (SQLite's
    /// `VACUUM INTO`: one read transaction, so the copy is the database at one commit, whatever
    /// instances write meanwhile). The copy holds the signing keys: it is readable by its owner
    /// only from its first byte, written under a temporary name beside `destination`, synced and
    /// renamed, so `destination` is never a half-written backup.
    /// - Returns: the copy's size in bytes.
    /// - Throws: ``ServerSetupError`` for a PostgreSQL store (pgBackRest backs it up), a
    ///   destination that exists, or one that cannot be written.
    public func backupSQLite(to destination: URL) async throws -> Int64 {
        guard case .sqlite = databaseLocation else {
            throw ServerSetupError(path: databaseLocation.description, problem: "is a PostgreSQL database, which kiosk admin backup does not copy",
                action: "back it up with pgBackRest (a full backup and WAL archiving; docs/operations.md, \"PostgreSQL\")")
        }
        let folder = destination.deletingLastPathComponent()
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw ServerSetupError(path: destination.path, problem: "exists already", action: "name a new file (a backup is never written over another)")
        }
        let temporary = folder.appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).partial")
        // SQLite writes into an empty file that exists: made here, 0600, before a byte is in it.
        let descriptor = Glibc.open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ServerSetupError(path: destination.path, problem: "cannot be written (\(String(cString: strerror(errno))))", action: "check that the folder exists and is writable")
        }
        Glibc.close(descriptor)
        do {
            try await base.database.read { db in try await db.raw("VACUUM INTO \(bind: temporary.path)").run() }
            try Self.sync(temporary.path)
            guard link(temporary.path, destination.path) == 0 else {
                throw ServerSetupError(path: destination.path, problem: "cannot be written (\(String(cString: strerror(errno))))", action: "name a new file in a writable folder")
            }
            unlink(temporary.path)
            try Self.sync(folder.path)
        } catch {
            unlink(temporary.path)
            throw error
        }
        return ((try? FileManager.default.attributesOfItem(atPath: destination.path))?[.size] as? Int64) ?? 0
    }

    /// Waits until `path` (a file or a folder) is on disk.
    static func sync(_ path: String) throws {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ServerSetupError(path: path, problem: "cannot be opened to sync (\(String(cString: strerror(errno))))", action: "check the folder") }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw ServerSetupError(path: path, problem: "cannot be synced (\(String(cString: strerror(errno))))", action: "check the disk") }
    }

    /// Whether a process has the SQLite database at `path` open: every connection in WAL mode holds
    /// a shared lock on the file's shared-lock bytes for as long as it is open, which a test for
    /// an exclusive lock finds (POSIX advisory locks, SQLite's on Linux).
    public static func sqliteInUse(_ path: String) -> Bool {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        // SQLite's PENDING_BYTE (1 GiB) + 2, and the 510 bytes readers lock one of.
        lock.l_start = 0x4000_0002
        lock.l_len = 510
        guard fcntl(descriptor, F_GETLK, &lock) == 0 else { return true }
        return lock.l_type != Int16(F_UNLCK)
    }
}
