import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// SQLite's group commit: many write transactions per commit, each still all or nothing.
@Suite("Group commit")
struct GroupCommitTests: StoreSuite {
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

    @Test("what the writer commits reaches the database file by the background checkpoint, without the writer's own (which waits for 20,000 pages)")
    func backgroundCheckpoint() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.path("store.sqlite").path
        let database = try await ServerDatabase.open(.sqlite(path: file), logger: Logger(label: "test"))
        func fileSize() throws -> Int {
            try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        }
        try await Task.sleep(for: .milliseconds(200))
        let before = try fileSize()
        // About 2 MB of rows: some 500 pages, far below the writer's own checkpoint.
        for batch in 0..<20 {
            try await database.write { db in
                for index in 0..<50 {
                    let product = "p\(batch)-\(index)-" + String(repeating: "x", count: 2000)
                    try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES (\#(bind: product), 'd', 1, 1)"#).run()
                }
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while try fileSize() < before + 1_000_000, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let after = try fileSize()
        #expect(after >= before + 1_000_000, "the database file stayed at \(after) bytes (\(before) before)")
        await database.close()
    }

    @Test("16 credit packs bought at once on one account, each sent twice: 16 charges, a balance of exactly 80, and on SQLite they share commits instead of taking turns", arguments: TestEngine.all)
    func packsOfOneAccountShareCommits(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            // PostgreSQL has no group commit of Kiosk's: there the charges meet on the account's row.
            let groupCommit = server.store.database.groupCommit
            #expect((groupCommit == nil) == (engine == .postgres))
            let before = groupCommit?.commits.load(ordering: .relaxed) ?? 0
            let replies = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for index in 0..<32 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, key: "pack-\(index / 2)").decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            if let groupCommit {
                // Taking turns, each charge would wait for the one before it to commit: 16 commits.
                let commits = groupCommit.commits.load(ordering: .relaxed) - before
                #expect(commits < 16, "\(commits) commits for 16 charges")
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 16)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == Array(repeating: 499, count: 16))
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 80)
        }
    }

    @Test("PostgreSQL: 32 credit packs bought at once on one account share commits (AccountCommits, a batch one statement); replays of a key in the same batch still answer the first charge; a batch function dropped by hand is put back")
    func packsOfOneAccountShareCommitsOnPostgres() async throws {
        try await Self.withStore(engine: .postgres) { server, http, account in
            let commits = server.store.base.accountCommits
            let before = commits.sharedCommits.load(ordering: .relaxed)
            let replies = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for index in 0..<32 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, key: "pack-\(index)").decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 32)
            #expect(commits.sharedCommits.load(ordering: .relaxed) > before, "no commit carried more than one charge")
            // A batch with a key sent twice fails on the unique index and runs again one by one.
            let again = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for index in 0..<32 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, key: "again-\(index / 4)").decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(again.map(\.transaction.transactionId)).count == 8)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == Array(repeating: 499, count: 40))
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 200)

            // The batch's function dropped by hand: its batch runs one by one, and puts it back.
            let database = server.store.base.database
            let function = StatementBatch.recordPurchases.function
            @Sendable func installed() async throws -> Bool {
                try await database.read { db in
                    try await db.raw("SELECT to_regprocedure(\(bind: function + "(jsonb)")) IS NOT NULL AS \"present\"").first()?.decode(column: "present", as: Bool.self) ?? false
                }
            }
            #expect(try await installed())
            try await database.statement { try await $0.raw("DROP FUNCTION \(unsafeRaw: function)(jsonb)").run() }
            #expect(try await !installed())
            // (One round: the account's purchase limit allows a burst of 120.)
            let bought = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for index in 0..<32 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, key: "dropped-\(index)").decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(bought.map(\.transaction.transactionId)).count == 32)
            #expect(try await installed())
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 360)
        }
    }

    @Test("inline connections: every SQLite type reads back the same through the writer and a reader, a duplicate key is a unique violation in one line, more statements than its cache holds still answer, and a reopen finds what it committed")
    func writerConnection() async throws {
        let directory = try TemporaryDirectory()
        let location = DatabaseLocation.sqlite(path: directory.path("store.sqlite").path)
        var database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        try await database.write { db in
            try await db.raw(#"CREATE TABLE "sample" ("id" INTEGER PRIMARY KEY, "real" REAL, "text" TEXT, "blob" BLOB, "none" TEXT)"#).run()
            for id in 1...3 {
                try await db.raw(#"INSERT INTO "sample" VALUES (\#(bind: id), \#(bind: Double(id) / 4), \#(bind: "é\(id) ✓"), \#(bind: Data([0, UInt8(id), 255])), NULL)"#).run()
            }
        }
        struct Sample: Equatable { let id: Int; let real: Double; let text: String; let blob: Data; let none: String? }
        @Sendable func samples(_ db: any SQLDatabase) async throws -> [Sample] {
            try await db.raw(#"SELECT * FROM "sample" ORDER BY "id""#).all().map { row in
                Sample(id: try row.decode(column: "id", as: Int.self), real: try row.decode(column: "real", as: Double.self),
                       text: try row.decode(column: "text", as: String.self), blob: try row.decode(column: "blob", as: Data.self),
                       none: try row.decode(column: "none", as: String?.self))
            }
        }
        let written = try await database.write { db in try await samples(db).map { "\($0)" } }
        let read = try await database.read { db in try await samples(db).map { "\($0)" } }
        #expect(written.count == 3)
        #expect(written == read)
        #expect(written.first == "\(Sample(id: 1, real: 0.25, text: "é1 ✓", blob: Data([0, 1, 255]), none: nil))")

        // A duplicate key: the statement fails, is recognised as the schema's rule, and leaves nothing.
        let duplicate = await #expect(throws: (any Error).self) {
            try await database.write { db in
                try await db.raw(#"INSERT INTO "sample" ("id") VALUES (4)"#).run()
                try await db.raw(#"INSERT INTO "sample" ("id") VALUES (1)"#).run()
            }
        }
        #expect(duplicate.map(database.isUniqueViolation) == true)
        #expect(duplicate.map(ServerDatabase.describe) == "UNIQUE constraint failed: sample.id")
        #expect(try await database.read { db in try await samples(db).count } == 3)

        // Twice the cache's statements in one transaction, then the first again after the cache emptied.
        let answers = try await database.write { db in
            var answers: [Int] = []
            for value in 0..<130 {
                answers.append(try await db.raw(#"SELECT \#(literal: value) AS "value""#).first(decodingColumn: "value", as: Int.self) ?? -1)
            }
            answers.append(try await db.raw(#"SELECT COUNT(*) AS "count" FROM "sample""#).first(decodingColumn: "count", as: Int.self) ?? -1)
            return answers
        }
        #expect(answers == Array(0..<130) + [3])

        await database.close()
        database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        #expect(try await database.read { db in try await samples(db).map { "\($0)" } } == written)
        await database.close()
    }

    @Test("32 reads at once run while a write transaction is open, each seeing the last commit and none of the open one")
    func readsBesideAnOpenWrite() async throws {
        let directory = try TemporaryDirectory()
        let database = try await ServerDatabase.open(.sqlite(path: directory.path("store.sqlite").path), logger: Logger(label: "test"))
        try await database.write { db in
            try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES ('committed', 'd', 1, 1)"#).run()
        }
        let (readsDone, finishReads) = AsyncStream<Void>.makeStream()
        let (writeOpen, openWrite) = AsyncStream<Void>.makeStream()
        async let written: Void = database.write { db in
            try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES ('open', 'd', 1, 1)"#).run()
            openWrite.yield()
            // Held open until every read has answered: a read that waited for the writer would never finish.
            for await _ in readsDone { break }
        }
        for await _ in writeOpen { break }
        let seen = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<32 {
                group.addTask {
                    try await database.read { db in
                        try await Task.sleep(for: .milliseconds(20))  // hold the connection so 32 are open at once
                        return try await db.raw(#"SELECT "productId" FROM "downloadStat" ORDER BY "productId""#).all()
                            .map { try $0.decode(column: "productId", as: String.self) }
                    }
                }
            }
            return try await group.reduce(into: [[String]]()) { $0.append($1) }
        }
        finishReads.yield()
        try await written
        #expect(seen.count == 32)
        #expect(seen.allSatisfy { $0 == ["committed"] })
        let after = try await database.read { db in
            try await db.raw(#"SELECT "productId" FROM "downloadStat" ORDER BY "productId""#).all().map { try $0.decode(column: "productId", as: String.self) }
        }
        #expect(after == ["committed", "open"])
        await database.close()
    }

    @Test("two stores on one SQLite file (two instances' writers) write at once: each waits for the other's lock, no write is lost, no update overwrites another")
    func twoWritersOnOneFile() async throws {
        let directory = try TemporaryDirectory()
        let location = DatabaseLocation.sqlite(path: directory.path("store.sqlite").path)
        let first = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        let second = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        try await first.write { db in
            try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES ('shared', 'd', 0, 0)"#).run()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (name, database) in [("a", first), ("b", second)] {
                for index in 0..<48 {
                    group.addTask {
                        try await database.write { db in
                            // A read-modify-write of one shared row: a lost update would leave the count short.
                            let requests = try await db.raw(#"SELECT "requests" FROM "downloadStat" WHERE "productId" = 'shared'"#)
                                .first(decodingColumn: "requests", as: Int.self) ?? -1
                            try await db.raw(#"UPDATE "downloadStat" SET "requests" = \#(bind: requests + 1) WHERE "productId" = 'shared'"#).run()
                            try await db.raw(#"INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES (\#(bind: "\(name)\(index)"), 'd', 1, 1)"#).run()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let (shared, rows) = try await second.read { db in
            (try await db.raw(#"SELECT "requests" FROM "downloadStat" WHERE "productId" = 'shared'"#).first(decodingColumn: "requests", as: Int.self),
             try await db.raw(#"SELECT COUNT(*) AS "count" FROM "downloadStat""#).first(decodingColumn: "count", as: Int.self))
        }
        #expect(shared == 96)
        #expect(rows == 97)
        await first.close()
        await second.close()
    }

    @Test("eight stores opening one new SQLite file at once all open it (the switch to WAL is retried, not refused as locked)")
    func concurrentOpensOfANewFile() async throws {
        for _ in 0..<40 {
            let directory = try TemporaryDirectory()
            let location = DatabaseLocation.sqlite(path: directory.path("store.sqlite").path)
            let opened = try await withThrowingTaskGroup(of: ServerDatabase.self) { group in
                for _ in 0..<8 { group.addTask { try await ServerDatabase.open(location, logger: Logger(label: "test")) } }
                return try await group.reduce(into: [ServerDatabase]()) { $0.append($1) }
            }
            #expect(opened.count == 8)
            for database in opened { await database.close() }
        }
    }
}
