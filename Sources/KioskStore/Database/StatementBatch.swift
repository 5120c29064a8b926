import Foundation
import SQLKit

/// PostgreSQL only: several instances of one ``PlannedStatement`` in one round trip. A PL/pgSQL
/// function runs the statement's text once for each instance, in the order given, inside the one
/// statement that calls it: one transaction, one commit. Each run sees what the runs before it
/// wrote (each is a statement of its own in the function), so a compare-and-set on the account's
/// row holds or fails for each exactly as if they had been sent one after another.
///
/// **Performance layer.** Replaces a round trip per statement of an ``AccountCommits`` batch
/// (BEGIN, up to 32 statements, COMMIT, each waiting for the one before). One account's 32
/// clients waited up to a whole batch of round trips and a flush: 929 purchases a second at p99
/// 60.5 ms (`make bench-compare`, 2026-11-28 03:25–03:44; docs/benchmarks.md has the figures after).
///
/// The instances' values travel as one JSON array of arrays, since PostgresNIO's arrays carry no
/// NULLs. A date travels as the whole microseconds since 2000-01-01 that PostgresNIO binds for it,
/// truncated the same way, so a row reads back the same whether it was written alone or in a batch.
/// The function's name ends in a hash of its text: instances of different versions each install
/// and call their own (installed with the migrations, under their lock: ``install(on:)``).
struct StatementBatch: Sendable {
    /// The function's quoted name.
    let function: String
    /// `CREATE OR REPLACE FUNCTION …`.
    let definition: String
    /// The columns the statement answers with, as the plan names them.
    let result: [(step: String, column: String)]

    init(_ name: String, template: WritePlan) {
        let answer = ["kiosk_i"] + template.result.map { #"CAST("\#($0.step)"."\#($0.column)" AS BIGINT)"# }
        let rendered = template.postgres(select: answer) { number, value in Self.value(number - 1, as: value) }
        let columns = (["kiosk_index INTEGER"] + template.result.indices.map { "kiosk_\($0 + 1) BIGINT" }).joined(separator: ", ")
        let body = """
            #variable_conflict use_column
            DECLARE kiosk_row jsonb;
            BEGIN
                FOR kiosk_i IN 0 .. jsonb_array_length(kiosk_batch) - 1 LOOP
                    kiosk_row := kiosk_batch -> kiosk_i;
                    RETURN QUERY \(rendered.sql);
                END LOOP;
            END
            """
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        function = #""kiosk_\#(name)_\#(String(hash, radix: 16))""#
        definition = "CREATE OR REPLACE FUNCTION \(function)(kiosk_batch jsonb) RETURNS TABLE (\(columns)) LANGUAGE plpgsql AS $kiosk$\n\(body)\n$kiosk$"
        result = template.result
    }

    /// The instance's `index`th value (from 0), read from its JSON array as the type it binds as.
    private static func value(_ index: Int, as value: StatementParameter) -> String {
        let text = "(kiosk_row ->> \(index))"
        return switch value {
        case .text: text
        case .integer: "CAST(\(text) AS BIGINT)"
        case .flag: "CAST(\(text) AS BOOLEAN)"
        case .real: "CAST(\(text) AS DOUBLE PRECISION)"
        case .date: "(TIMESTAMPTZ '2000-01-01 00:00:00+00' + CAST(\(text) AS BIGINT) * INTERVAL '1 microsecond')"
        }
    }

    /// Creates the function unless it is there already, under the migrations' advisory lock, so
    /// that instances starting together take turns (PostgreSQL's CREATE OR REPLACE is not safe
    /// against itself). One that is there is left alone: its name says its text, replacing it would
    /// make every connection compile it again, and only its owner may replace it.
    func install(on database: ServerDatabase) async throws {
        try await database.write { db in
            try await db.raw("SELECT pg_advisory_xact_lock(7215)").run()
            let present = try await db.raw("SELECT to_regprocedure(\(bind: function + "(jsonb)")) IS NOT NULL AS \"present\"").first()?
                .decode(column: "present", as: Bool.self) ?? false
            if !present { try await db.raw("\(unsafeRaw: definition)").run() }
        }
    }

    /// Runs `plans` (instances of the template) in one statement, in their order.
    /// - Returns: for each plan, its ``result`` columns' values, or nil where it wrote nothing
    ///   (its compare-and-set did not hold).
    func run(_ plans: [WritePlan], on db: any SQLDatabase) async throws -> [[Int64]?] {
        let values = plans.map { plan in plan.binds.map(JSONValue.init) }
        let batch = String(decoding: try JSONEncoder().encode(values), as: UTF8.self)
        var answers = [[Int64]?](repeating: nil, count: plans.count)
        for row in try await db.raw("SELECT * FROM \(unsafeRaw: function)(CAST(\(bind: batch) AS jsonb))").all() {
            let index = try row.decode(column: "kiosk_index", as: Int.self)
            guard answers.indices.contains(index) else { continue }
            answers[index] = try result.indices.map { try row.decode(column: "kiosk_\($0 + 1)", as: Int64.self) }
        }
        return answers
    }

    /// A value as the function reads it (``value(_:as:)``).
    private struct JSONValue: Encodable {
        let parameter: StatementParameter
        init(_ parameter: StatementParameter) { self.parameter = parameter }

        /// PostgresNIO's `Date` encoding: microseconds since 2000-01-01, truncated.
        static func microseconds(_ date: Date) -> Int64 {
            Int64(date.timeIntervalSince(Date(timeIntervalSince1970: 946_684_800)) * 1_000_000)
        }

        /// Text, integers and flags as they encode themselves; a date as its microseconds.
        func encode(to encoder: any Encoder) throws {
            guard case .date(let date) = parameter else { return try parameter.encode(to: encoder) }
            var container = encoder.singleValueContainer()
            try container.encode(date.map(Self.microseconds))
        }
    }
}

extension StatementBatch {
    /// Every batch the store calls (each installed with the migrations on PostgreSQL).
    static let all = [recordPurchases]

    /// A batch of new purchases of one account (``RecordPurchase``, ``AccountCommits``).
    static let recordPurchases = StatementBatch("recordPurchases", template: RecordPurchase.template)
}
