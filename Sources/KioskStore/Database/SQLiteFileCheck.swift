import Foundation
import VaporCSQLite

/// What an operator's command looks at in an SQLite file before it trusts it (`kiosk admin restore`,
/// `check`, `backup`): opened read-only, never migrated, so a file that is not a store stays as it is.
public enum SQLiteFileCheck {
    /// What the file holds, as far as a restore or a check needs to know.
    public struct Findings: Sendable, Equatable {
        /// SQLite's own `quick_check`: "ok", or its first complaints.
        public var integrity: String
        /// The signing keys' IDs it keeps (a store has at least one).
        public var keyIDs: Set<String>
    }

    /// - Throws: ``ServerSetupError`` naming the file: not SQLite, not a Kiosk store (no migrations
    ///   or no signing key), or not readable.
    public static func inspect(_ path: String) throws -> Findings {
        var handle: OpaquePointer?
        defer { if let handle { sqlite_nio_sqlite3_close_v2(handle) } }
        guard sqlite_nio_sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let handle else {
            throw ServerSetupError(path: path, problem: "cannot be opened as an SQLite database", action: "name the file kiosk admin backup wrote")
        }
        func rows(_ sql: String) -> [String]? {
            var statement: OpaquePointer?
            guard sqlite_nio_sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else { return nil }
            defer { sqlite_nio_sqlite3_finalize(statement) }
            var found: [String] = []
            while true {
                let stepped = sqlite_nio_sqlite3_step(statement)
                guard stepped == SQLITE_ROW else { return stepped == SQLITE_DONE ? found : nil }
                found.append(sqlite_nio_sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
            }
        }
        guard let check = rows("PRAGMA quick_check(5)") else {
            throw ServerSetupError(path: path, problem: "is not an SQLite database (or is damaged past reading)", action: "name the file kiosk admin backup wrote")
        }
        guard let migrations = rows(#"SELECT "name" FROM "kioskMigration""#), !migrations.isEmpty else {
            throw ServerSetupError(path: path, problem: "is an SQLite database but no Kiosk store (it has no kioskMigration rows)",
                                   action: "name the store's database (kiosk-server.sqlite) or a backup of it")
        }
        guard let keys = rows(#"SELECT "kid" FROM "signingKey""#), !keys.isEmpty else {
            throw ServerSetupError(path: path, problem: "is a Kiosk store without a signing key: no receipt it ever signed would verify",
                                   action: "restore a backup that holds the store's keys")
        }
        return Findings(integrity: check.joined(separator: "; "), keyIDs: Set(keys))
    }
}
