import Foundation
import PostgresKit
import PostgresNIO
import SQLKit
import SQLiteNIO

/// A statement every purchase runs, written once with numbered parameters (`$1`, `$2`, …) and
/// kept compiled on each connection of either engine.
///
/// On PostgreSQL it is a named prepared statement, parsed and planned once per connection rather
/// than once per purchase: profiled at 1,250 purchases a second, parsing and planning the store's
/// statements anew were half of the backends' time and a quarter of the machine's. On SQLite it
/// runs as its own text with `?1`, `?2`, …, which ``InlineSQLite`` compiles once per connection
/// and keeps, as it does every statement.
protocol StoreStatement: PostgresPreparedStatement where Row == any SQLRow {
    /// The parameters' PostgreSQL types, in the order of their numbers: PostgreSQL is told them
    /// when it prepares the statement, since a null carries no type of its own.
    static var parameterTypes: [PostgresDataType] { get }

    /// The parameters' values, in the order of their numbers.
    var parameters: [StatementParameter] { get }
}

/// One parameter's value, of one of the few types the store's statements bind.
enum StatementParameter: Sendable {
    case text(String?)
    case integer(Int64?)
    case flag(Bool)
    case date(Date?)
    case real(Double)

}

/// Bound through SQLKit as itself. On SQLite it is its own `SQLiteData` (the encoder takes that at
/// once, where a wrapped optional went through an `Encoder` per value: a purchase binds about 40);
/// the same values as before, so rows written before read the same. On PostgreSQL it encodes as the
/// value it wraps.
extension StatementParameter: Encodable, SQLiteDataConvertible {
    init?(sqliteData: SQLiteData) { nil }

    var sqliteData: SQLiteData? {
        switch self {
        case .text(let value): value.map { .text($0) } ?? .null
        case .integer(let value): value.map { .integer(Int($0)) } ?? .null
        case .flag(let value): .integer(value ? 1 : 0)
        case .date(let value): value.map { .float($0.timeIntervalSince1970) } ?? .null
        case .real(let value): .float(value)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .flag(let value): try container.encode(value)
        case .date(let value): try container.encode(value)
        case .real(let value): try container.encode(value)
        }
    }
}

extension StoreStatement {
    /// Named after the statement's type: one name per text, on every connection.
    static var name: String { "kiosk.\(Self.self)" }

    static var bindingDataTypes: [PostgresDataType] { parameterTypes }

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: parameters.count)
        for parameter in parameters {
            switch parameter {
            case .text(let value?): bindings.append(value)
            case .integer(let value?): bindings.append(value)
            case .flag(let value): bindings.append(value)
            case .date(let value?): bindings.append(value)
            case .real(let value): bindings.append(value)
            case .text(nil), .integer(nil), .date(nil): bindings.appendNull()
            }
        }
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> any SQLRow { row.sql() }
}

extension SQLDatabase {
    /// Runs `statement` on this connection and returns its rows: prepared once per connection on
    /// PostgreSQL, from the connection's cache of compiled statements on SQLite.
    func rows<Statement: StoreStatement>(_ statement: Statement) async throws -> [any SQLRow] {
        if let session = self as? PostgresSession {
            var rows: [any SQLRow] = []
            for try await row in try await session.connection.execute(statement, logger: logger) {
                rows.append(row)
            }
            return rows
        }
        return try await raw("\(Numbered(statement))").all()
    }
}

/// A statement's text and values as SQLKit serializes them for SQLite: `$n` becomes `?n`, the
/// numbered parameter SQLite reads the same way (the same number twice is the same value).
private struct Numbered: SQLExpression {
    let sql: String
    let values: [any Encodable & Sendable]

    init<Statement: StoreStatement>(_ statement: Statement) {
        // Byte by byte: Foundation's `replacingOccurrences` took 6 % of a Stripe event's CPU here
        // (perf, 2,000 events a second on SQLite), for a statement's few hundred bytes.
        sql = String(decoding: Statement.sql.utf8.map { $0 == UInt8(ascii: "$") ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
        values = statement.parameters
    }

    func serialize(to serializer: inout SQLSerializer) {
        serializer.write(sql)
        serializer.binds.append(contentsOf: values)
    }
}
