import Foundation
internal import GRDB
internal import GRDBSQLite
import KioskCore

/// The catalog cache's one write per product during a sync: insert it, or replace the cached row
/// when the bytes sent differ (a row already holding those bytes is left untouched, so SQLite's
/// change count tells a changed product from an unchanged one).
///
/// Its values are bound straight to SQLite's statement. Why not GRDB's `execute(arguments:)`:
/// those arguments are an array of existentials, each turned into a `DatabaseValue` and then
/// bound — 9 % of a 100,000-product sync, more than the parsing of its SQL ever was. The statement
/// is still GRDB's (prepared and cached by the connection); nothing observes the product table.
struct ProductUpsert {
    private let statement: Statement

    init(_ db: Database) throws {
        statement = try db.cachedStatement(sql: """
            INSERT INTO product (id, json) VALUES (?, ?)
            ON CONFLICT (id) DO UPDATE SET json = excluded.json WHERE product.json IS NOT excluded.json
            """)
    }

    /// Writes the product `id` with the bytes it was sent as; true when a row was added or changed.
    func run(id: String, json: UnsafeRawBufferPointer, in db: Database) throws -> Bool {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        var code = Self.bind(id, at: 1, of: handle)
        if code == SQLITE_OK {
            // A null pointer would bind NULL: an empty blob still needs an address.
            code = sqlite3_bind_blob(handle, 2, json.baseAddress ?? UnsafeRawPointer(Self.emptyText), Int32(json.count), Self.transient)
        }
        if code == SQLITE_OK { code = sqlite3_step(handle) }
        guard code == SQLITE_DONE else {
            let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
            sqlite3_reset(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
        return sqlite3_changes(db.sqliteConnection) > 0
    }

    /// Binds a string with its length (a title holding `\u0000` is kept whole); an empty one is
    /// bound as an empty string, not NULL.
    private static func bind(_ text: String, at index: Int32, of handle: OpaquePointer?) -> Int32 {
        var text = text
        return text.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { chars in
                sqlite3_bind_text(handle, index, chars.baseAddress ?? emptyText, Int32(chars.count), transient)
            }
        }
    }

    private static var emptyText: UnsafePointer<CChar> {
        UnsafeRawPointer(("" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// `SQLITE_TRANSIENT` (SQLite copies what is bound), a C macro Swift cannot import.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
