import Foundation
@testable import KioskServer
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// SQLite's group commit: many write transactions per commit, each still all or nothing.
@Suite("Group commit")
struct GroupCommitTests {
    @Test("64 concurrent writes share a few commits; the ones that throw leave nothing, the others are all there")
    func sharedCommits() async throws {
        let directory = try TemporaryDirectory()
        let database = try await ServerDatabase.open(.sqlite(path: directory.path("store.sqlite").path), logger: Logger(label: "test"))
        let commitsBefore = database.groupCommit?.commits.load(ordering: .relaxed) ?? 0
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    do {
                        try await database.write { db in
                            try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES (\#(bind: "p\(index)"), 'd', 1, 1)"#).run()
                            if index.isMultiple(of: 8) { throw CancellationError() }
                        }
                        return true
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 }.count == 56)
        let rows = try await database.read { db in
            try await db.raw(#"SELECT "productId" FROM "downloadStat""#).all().map { try $0.decode(column: "productId", as: String.self) }
        }
        #expect(Set(rows) == Set((0..<64).filter { !$0.isMultiple(of: 8) }.map { "p\($0)" }))
        let commits = (database.groupCommit?.commits.load(ordering: .relaxed) ?? 0) - commitsBefore
        #expect(commits >= 1 && commits < 64, "\(commits) commits for 64 writes")
        await database.close()
    }
}
