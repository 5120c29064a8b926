import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// A production store honours nothing a sandbox made (issue 62, the first of eleven money breaks):
/// a database is kept by the environment it was first served in.
@Suite("A database keeps the environment it was first served in")
struct StoreEnvironmentTests: StoreSuite {
    @Test("a store run in the sandbox and restarted in production on the same data refuses to start, naming both; the sandbox starts again on it", arguments: TestEngine.all)
    func sandboxThenProduction(engine: TestEngine) async throws {
        let data = try TemporaryDirectory()
        let database = try await engine.freshDatabase()
        try await Self.withStore(database: database, data: data.url) { _, http, account in
            let paid = try await http.pay(Self.pack5, token: account.token)
            #expect(paid.status == 200)
        }
        do {
            try await Self.withStore(database: database, environment: .production, data: data.url) { _, _, _ in }
            Issue.record("a production store started on a sandbox's database")
        } catch let error as ServerSetupError {
            #expect(error.problem.contains("sandbox") && error.problem.contains("production"), "\(error)")
            #expect(error.action.contains("--environment sandbox"), "\(error)")
        }
        // The sandbox keeps its database; and a production store keeps its own the other way round.
        try await Self.withStore(database: database, data: data.url) { _, http, account in
            let paid = try await http.pay(Self.pack5, token: account.token)
            #expect(paid.status == 200)
        }
        let production = try TemporaryDirectory()
        let productionDatabase = try await engine.freshDatabase()
        try await Self.withStore(database: productionDatabase, environment: .production, data: production.url) { _, _, _ in }
        await #expect(throws: ServerSetupError.self) {
            try await Self.withStore(database: productionDatabase, environment: .sandbox, data: production.url) { _, _, _ in }
        }
    }

    @Test("a database from before the mark that holds the sandbox's pretend payments is the sandbox's", arguments: TestEngine.all)
    func unmarkedSandboxDatabase(engine: TestEngine) async throws {
        let data = try TemporaryDirectory()
        let database = try await engine.freshDatabase()
        try await Self.withStore(database: database, data: data.url) { server, http, account in
            #expect(try await http.pay(Self.book, token: account.token).status == 200)
            // As an earlier Kiosk left it: no mark.
            try await server.store.database.write { db in try await db.raw(#"DELETE FROM "storeEnvironment""#).run() }
        }
        await #expect(throws: ServerSetupError.self) {
            try await Self.withStore(database: database, environment: .production, data: data.url) { _, _, _ in }
        }
    }
}
