import Foundation
import KioskCore
import SQLKit

/// The environment a database was first served in, kept in it (`storeEnvironment`): a sandbox's
/// pretend money and a production store's real money never meet in one database.
///
/// A store run in the sandbox and then restarted in production on the same data honoured the
/// sandbox's purchases: credits bought with `approve` redeemed for production-signed receipts, and
/// the shelf served books the sandbox "sold". Keeping the two apart is the only answer that loses
/// nothing: the database is refused, whole, by a store of the other environment, and the operator
/// starts that one on a database of its own.
enum StoreEnvironmentMark {
    /// Payment methods only a sandbox writes: a database from before the mark that holds one of
    /// them was a sandbox's.
    static let sandboxMethods = PaidBy.sandboxOnly.map(\.rawValue)

    /// Marks a new database with `environment`, or refuses one marked with the other.
    /// - Throws: ``ServerSetupError`` naming the database and both environments.
    static func check(_ environment: StoreEnvironment, database: ServerDatabase, now: Date) async throws {
        let marked = try await database.write { db -> String in
            if let found = try await Self.mark(in: db) { return found }
            var first = environment
            if environment == .production {
                let pretend = try await db.select().column("id").from("storeTransaction")
                    .where("paymentMethod", .in, Self.sandboxMethods).limit(1).first()
                if pretend != nil { first = .sandbox }
            }
            // Two instances starting together on a new database: one insert wins, both read it.
            try await db.raw(#"""
                INSERT INTO "storeEnvironment" ("id", "environment", "markedAt") VALUES (1, \#(bind: first.rawValue), \#(bind: now))
                ON CONFLICT ("id") DO NOTHING
                """#).run()
            return try await Self.mark(in: db) ?? first.rawValue
        }
        guard marked == environment.rawValue else {
            throw ServerSetupError(
                path: database.location.description,
                problem: "was served as a \(marked) store, and a \(environment.rawValue) store honours nothing a \(marked) one made",
                action: environment == .production
                    ? "serve production on a database of its own (a new --data or --database), or serve this one with --environment sandbox"
                    : "serve the sandbox on a database of its own (a new --data or --database), never on a production store's")
        }
    }

    /// The environment the database was first served in; nil before its first start.
    static func recorded(in database: ServerDatabase) async throws -> StoreEnvironment? {
        try await database.read { db in try await Self.mark(in: db) }.flatMap(StoreEnvironment.init(rawValue:))
    }

    private static func mark(in db: any SQLDatabase) async throws -> String? {
        try await db.select().column("environment").from("storeEnvironment").where("id", .equal, 1)
            .first()?.decode(column: "environment", as: String.self)
    }
}
