import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// A binary older than its database's schema (issue 66): it serves a database a newer Kiosk only
/// expanded (two versions side by side during an upgrade) and refuses one a contract step changed,
/// naming both schemas.
@Suite("A Kiosk older than its database's schema")
struct SchemaVersionTests: StoreSuite {
    /// Marks the database as a newer Kiosk would leave it: `name` applied, serving from `servesFrom`.
    static func applyFuture(_ name: String, servesFrom: Int?, on server: KioskServer) async throws {
        try await server.store.database.write { db in
            try await db.raw(#"INSERT INTO "kioskMigration" ("name", "appliedAt", "servesFrom") VALUES (\#(bind: name), \#(bind: Date()), \#(bind: servesFrom))"#).run()
        }
    }

    @Test("a newer Kiosk's expand step is served (an upgrade under way); its contract step, or a step that names no floor, refuses the start naming both schemas", arguments: TestEngine.all)
    func refusesNewerContract(engine: TestEngine) async throws {
        let data = try TemporaryDirectory()
        let database = try await engine.freshDatabase()
        let current = Migrations.schemaVersion
        try await Self.withStore(database: database, data: data.url) { server, http, account in
            #expect(try await http.pay(Self.book, token: account.token).status == 200)
            try await Self.applyFuture("\(current + 1)-future-expand", servesFrom: current, on: server)
        }
        // Only expanded: this Kiosk serves it, and buys through it.
        try await Self.withStore(database: database, data: data.url) { server, http, account in
            #expect(try await http.pay(Self.issue, token: account.token).status == 200)
            try await Self.applyFuture("\(current + 2)-future-contract", servesFrom: current + 2, on: server)
        }
        do {
            try await Self.withStore(database: database, data: data.url) { _, _, _ in }
            Issue.record("a Kiosk of schema \(current) started on a database a contract step of schema \(current + 2) changed")
        } catch let error as ServerSetupError {
            #expect(error.problem.contains("schema \(current + 2)") && error.problem.contains("knows schema \(current)"), "\(error)")
            #expect(error.problem.contains("\(current + 2)-future-contract"), "\(error)")
            #expect(error.action.contains("Rollback"), "\(error)")
        }
        // A row with no floor (a Kiosk that did not say) is read as serving only its own schema.
        let unsaidData = try TemporaryDirectory()
        let unsaid = try await engine.freshDatabase()
        try await Self.withStore(database: unsaid, data: unsaidData.url) { server, _, _ in
            try await Self.applyFuture("\(current + 1)-unsaid", servesFrom: nil, on: server)
        }
        await #expect(throws: ServerSetupError.self) {
            try await Self.withStore(database: unsaid, data: unsaidData.url) { _, _, _ in }
        }
    }

    @Test("each migration from the floor on records the oldest schema that may serve after it; the list's numbers run 1 to the schema without a gap", arguments: TestEngine.all)
    func floorsRecorded(engine: TestEngine) async throws {
        #expect(Migrations.all.map(\.version) == Array(1...Migrations.schemaVersion))
        let database = try await engine.freshDatabase()
        try await Self.withStore(database: database) { server, _, _ in
            struct Row: Decodable { var name: String; var servesFrom: Int? }
            let rows = try await server.store.database.read { db in
                try await db.raw(#"SELECT "name", "servesFrom" FROM "kioskMigration""#).all(decoding: Row.self)
            }
            #expect(rows.count == Migrations.all.count)
            for migration in Migrations.all {
                let row = rows.first { $0.name == migration.name }
                let expected = migration.version < Migrations.firstWithFloor ? nil : (migration.earlierMayServe ? migration.version - 1 : migration.version)
                #expect(row?.servesFrom == expected, "\(migration.name)")
            }
        }
    }
}
