import Foundation
import PostgresNIO
import SQLKit

/// One change's writes, each written once: the rows it inserts and updates, in order, with where
/// each value comes from. ``WritePlan/postgresStatement`` renders it for PostgreSQL as one statement
/// of data-modifying CTEs (one round trip, prepared once per connection: see ``StoreStatement``);
/// ``SQLDatabase/run(_:)`` renders the same steps one statement at a time, in the caller's
/// transaction, for SQLite (which cannot put an INSERT inside a WITH) or any engine. A row's
/// columns live in one place (``PlannedRows``), so no engine can write a row another would not.
///
/// A step that names earlier steps (``PlanStep/after``, or a ``PlanSQL/earlier(_:_:)`` value)
/// writes only when each of them wrote a row, as a CTE selecting from them does: a compare-and-set
/// that did not move makes everything after it write nothing.
struct WritePlan: Sendable {
    var steps: [PlanStep]
    /// The columns the plan answers with, each from a step's returned row.
    var result: [(step: String, column: String)]
}

/// A piece of a step's SQL.
enum PlanSQL: Sendable {
    case text(String)
    case bind(StatementParameter)
    /// An integer column of an earlier step's returned row (the sequence or change number it took).
    case earlier(_ step: String, _ column: String)
}

/// One statement of a plan: an insert of one row (or one per row of ``PlanStep/tables``), or an
/// update; optionally only when ``PlanStep/conditions`` hold.
struct PlanStep: Sendable {
    enum Write: Sendable {
        case insert(into: String, columns: [String], values: [[PlanSQL]], onConflict: String?)
        case update(String, set: [(column: String, value: [PlanSQL])])
    }

    var name: String
    var write: Write
    /// Earlier steps this one writes after only (their rows are its source).
    var after: [String] = []
    /// Tables the row's values read from (a delivery per `webhook`).
    var tables: [String] = []
    /// SQL conditions, all of which must hold (a bound flag for "only when").
    var conditions: [[PlanSQL]] = []
    var returning: [String] = []

    /// The steps it reads from: ``after`` and every step an ``PlanSQL/earlier(_:_:)`` value names.
    var sources: [String] {
        var names = after
        func add(_ fragment: [PlanSQL]) {
            for case .earlier(let step, _) in fragment where !names.contains(step) { names.append(step) }
        }
        switch write {
        case .insert(_, _, let values, _): values.forEach(add)
        case .update(_, let set): set.forEach { add($0.value) }
        }
        conditions.forEach(add)
        return names
    }
}

extension WritePlan {
    /// The plan as one PostgreSQL statement: its text with `$1`, `$2`, … and the values in their order.
    var postgres: (sql: String, parameters: [StatementParameter]) {
        postgres { number, _ in "$\(number)" }
    }

    /// The plan as one PostgreSQL statement whose `n`th value (from 1) is written as `placeholder(n, value)`.
    /// - Parameter select: what the statement answers with, in place of the ``result`` columns.
    func postgres(select answer: [String]? = nil, placeholder: (Int, StatementParameter) -> String) -> (sql: String, parameters: [StatementParameter]) {
        var parameters: [StatementParameter] = []
        func render(_ fragment: [PlanSQL]) -> String {
            fragment.map { piece in
                switch piece {
                case .text(let text): return text
                case .bind(let value):
                    parameters.append(value)
                    return placeholder(parameters.count, value)
                case .earlier(let step, let column): return #""\#(step)"."\#(column)""#
                }
            }.joined()
        }
        var parts: [String] = []
        for step in steps {
            let from = (step.sources.map { #""\#($0)""# } + step.tables.map { #""\#($0)""# }).joined(separator: ", ")
            var sql: String
            // Values before conditions: the order ``binds`` numbers them in.
            switch step.write {
            case .insert(let table, let columns, let values, let onConflict):
                let selected = values.map(render).joined(separator: ", ")
                let conditions = step.conditions.map(render)
                sql = #"INSERT INTO "\#(table)" (\#(columns.map { #""\#($0)""# }.joined(separator: ", ")))"#
                    + " SELECT " + selected
                    + (from.isEmpty ? "" : " FROM " + from)
                    + " WHERE " + (conditions.isEmpty ? "true" : conditions.joined(separator: " AND "))
                    + (onConflict.map { " " + $0 } ?? "")
                sql += step.returning.isEmpty ? "" : " RETURNING " + step.returning.map { #""\#($0)""# }.joined(separator: ", ")
            case .update(let table, let set):
                let assignments = set.map { #""\#($0.column)" = "# + render($0.value) }.joined(separator: ", ")
                let conditions = step.conditions.map(render)
                sql = #"UPDATE "\#(table)" SET "# + assignments
                    + (from.isEmpty ? "" : " FROM " + from)
                    + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
                sql += step.returning.isEmpty ? "" : " RETURNING " + step.returning.map { #""\#(table)"."\#($0)""# }.joined(separator: ", ")
            }
            parts.append(#""\#(step.name)" AS (\#(sql))"#)
        }
        var answering: [String] = []
        for (step, _) in result where !answering.contains(step) { answering.append(step) }
        let select = "SELECT " + (answer ?? result.map { #""\#($0.step)"."\#($0.column)""# }).joined(separator: ", ")
            + " FROM " + answering.map { #""\#($0)""# }.joined(separator: ", ")
        return ("WITH " + parts.joined(separator: ", ") + " " + select, parameters)
    }
}

extension WritePlan {
    /// The values ``postgres`` binds, in its order (`$1`, `$2`, …), without rendering its text.
    var binds: [StatementParameter] {
        var values: [StatementParameter] = []
        func collect(_ fragment: [PlanSQL]) {
            for case .bind(let value) in fragment { values.append(value) }
        }
        for step in steps {
            switch step.write {
            case .insert(_, _, let rows, _): rows.forEach(collect)
            case .update(_, let set): set.forEach { collect($0.value) }
            }
            step.conditions.forEach(collect)
        }
        return values
    }
}

/// The rows a plan's steps returned, by step (see ``SQLDatabase/run(_:)``).
struct PlanRows {
    let rows: [String: any SQLRow]

    /// An integer column of a step's row.
    func integer(_ step: String, _ column: String) throws -> Int64 {
        guard let row = rows[step] else { throw MissingStep(step: step) }
        return try row.decode(column: column, as: Int64.self)
    }

    struct MissingStep: Error { var step: String }
}

extension SQLQueryString {
    /// A piece of plan SQL with its values bound, for a statement of its own (no earlier steps).
    init(_ fragment: [PlanSQL], earlier: (String, String) throws -> Int64? = { step, _ in throw PlanRows.MissingStep(step: step) }) rethrows {
        self.init("")
        try append(fragment, earlier: earlier)
    }

    mutating func append(_ fragment: [PlanSQL], earlier: (String, String) throws -> Int64?) rethrows {
        for piece in fragment {
            switch piece {
            case .text(let text): appendInterpolation(unsafeRaw: text)
            case .bind(let value): appendInterpolation(bind: value)
            case .earlier(let step, let column): appendInterpolation(bind: try earlier(step, column))
            }
        }
    }
}

extension SQLDatabase {
    /// Runs `plan` one statement a step, in order, on this connection (call it inside the change's
    /// write transaction). A step whose sources wrote no row, or whose bound flags are false, is
    /// skipped, as the CTE would skip it.
    /// - Returns: the rows the steps returned; nil when a step the plan answers from wrote none.
    @discardableResult
    func run(_ plan: WritePlan) async throws -> PlanRows? {
        var rows: [String: any SQLRow] = [:]
        for step in plan.steps {
            guard step.sources.allSatisfy({ rows[$0] != nil }) else { continue }
            // A condition that is one bound flag is decided here rather than sent.
            var conditions: [[PlanSQL]] = []
            var skipped = false
            for condition in step.conditions {
                if condition.count == 1, case .bind(.flag(let holds)) = condition[0] {
                    if !holds { skipped = true }
                } else {
                    conditions.append(condition)
                }
            }
            if skipped { continue }
            let earlier = { (source: String, column: String) throws -> Int64? in
                try rows[source]?.decode(column: column, as: Int64.self)
            }
            var query = SQLQueryString("")
            func appendConditions() throws {
                for (index, condition) in conditions.enumerated() {
                    query.appendInterpolation(unsafeRaw: index == 0 ? " WHERE " : " AND ")
                    try query.append(condition, earlier: earlier)
                }
            }
            switch step.write {
            case .insert(let table, let columns, let values, let onConflict):
                query.appendInterpolation(unsafeRaw: #"INSERT INTO "\#(table)" (\#(columns.map { #""\#($0)""# }.joined(separator: ", "))) SELECT "#)
                for (index, value) in values.enumerated() {
                    if index > 0 { query.appendInterpolation(unsafeRaw: ", ") }
                    try query.append(value, earlier: earlier)
                }
                if !step.tables.isEmpty { query.appendInterpolation(unsafeRaw: " FROM " + step.tables.map { #""\#($0)""# }.joined(separator: ", ")) }
                // Always a WHERE: SQLite reads an ON CONFLICT after a bare SELECT as a join's ON.
                if conditions.isEmpty { query.appendInterpolation(unsafeRaw: " WHERE true") } else { try appendConditions() }
                if let onConflict { query.appendInterpolation(unsafeRaw: " " + onConflict) }
            case .update(let table, let set):
                query.appendInterpolation(unsafeRaw: #"UPDATE "\#(table)" SET "#)
                for (index, assignment) in set.enumerated() {
                    query.appendInterpolation(unsafeRaw: (index > 0 ? ", " : "") + #""\#(assignment.column)" = "#)
                    try query.append(assignment.value, earlier: earlier)
                }
                try appendConditions()
            }
            if step.returning.isEmpty {
                try await raw(query).run()
            } else {
                query.appendInterpolation(unsafeRaw: " RETURNING " + step.returning.map { #""\#($0)""# }.joined(separator: ", "))
                if let row = try await raw(query).first() { rows[step.name] = row }
            }
        }
        guard plan.result.allSatisfy({ rows[$0.step] != nil }) else { return nil }
        return PlanRows(rows: rows)
    }
}

/// A plan run on PostgreSQL as a prepared statement: ``plan`` is the plan of an instance; its text
/// is the same for every instance (a plan's steps never depend on values: "only when" is a bound
/// flag), so it is rendered once, from ``template``.
protocol PlannedStatement: StoreStatement {
    /// The plan of any instance (values aside, every instance's plan is the same).
    static var template: WritePlan { get }
    var plan: WritePlan { get }
}

extension PlannedStatement {
    /// The text every instance shares (a conforming type keeps it: `static let sql = rendered.sql`).
    static var rendered: (sql: String, parameterTypes: [PostgresDataType]) {
        let postgres = template.postgres
        return (postgres.sql, postgres.parameters.map(\.postgresType))
    }

    var parameters: [StatementParameter] { plan.binds }
}

extension StatementParameter {
    /// The PostgreSQL type it is bound as (a null still needs one).
    var postgresType: PostgresDataType {
        switch self {
        case .text: .text
        case .integer: .int8
        case .flag: .bool
        case .date: .timestamptz
        case .real: .float8
        }
    }
}
