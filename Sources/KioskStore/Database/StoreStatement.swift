import Foundation
import PostgresKit
import PostgresNIO
import SQLKit

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

    /// The value as SQLKit binds it on SQLite.
    var sqlValue: any Encodable & Sendable {
        switch self {
        case .text(let value): value
        case .integer(let value): value
        case .flag(let value): value
        case .date(let value): value
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
        sql = Statement.sql.replacingOccurrences(of: "$", with: "?")
        values = statement.parameters.map(\.sqlValue)
    }

    func serialize(to serializer: inout SQLSerializer) {
        serializer.write(sql)
        serializer.binds.append(contentsOf: values)
    }
}
