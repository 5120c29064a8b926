@preconcurrency import AsyncKit
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresKit
import PostgresNIO
import SQLKit
import Tracing
import Synchronization

/// The store's database, on SQLite or PostgreSQL: one pool of connections and the one way to run a
/// transaction on either. Every rule of the store is written once, in SQL both engines read
/// (double-quoted identifiers, binds that SQLKit renders as `?` or `$n`), against ``write(_:)``
/// and ``read(_:)``; the engines differ only here, in the column types of ``Migrations``, and in
/// a new purchase's write, which PostgreSQL takes as one statement (see `Store.commit(_:over:)`).
/// A purchase's statements are ``StoreStatement``s, kept prepared on each connection.
final class ServerDatabase: Sendable {
    enum Engine: String, Sendable { case sqlite, postgres }

    let location: DatabaseLocation
    let engine: Engine
    private let pool: any ConnectionLeasing
    /// SQLite has one writer per file: this process's write transactions go through one group
    /// commit (many per fsync) on one connection of its own rather than queueing in
    /// `BEGIN IMMEDIATE`, where a waiter would block one of the few threads SQLite waits on while
    /// the holder needs one to finish. Other processes still wait in SQLite's busy timeout. Reads
    /// go through ``SQLiteReaders``; both run statements inline (``InlineSQLite``).
    let groupCommit: GroupCommit?
    /// PostgreSQL only: how to open the connection that listens for other instances' changes.
    private let listenConfiguration: PostgresConnection.Configuration?
    private let threadPool: NIOThreadPool?
    private let closed = Atomic<Bool>(false)

    /// Opens the database and brings its schema up to date (see ``Migrations``).
    /// - Throws: ``ServerSetupError`` when the database cannot be reached or read.
    static func open(_ location: DatabaseLocation, pool: DatabasePool = DatabasePool(), logger: Logger) async throws -> ServerDatabase {
        let database = try await ServerDatabase(location: location, pool: pool, logger: logger)
        do {
            try await Migrations.run(on: database, logger: logger)
        } catch let refusal as ServerSetupError {
            // Already one line naming the database, what is wrong and what to do.
            await database.close()
            throw refusal
        } catch {
            await database.close()
            throw cannotOpen(location, error)
        }
        return database
    }

    /// The database and the -wal and -shm files SQLite keeps beside it must open for writing.
    /// SQLite maps the -shm file into memory; one it cannot write (made immutable, say) was refused
    /// as "the database cannot be opened", or met later as a SIGBUS: refused here, naming the file.
    /// (A -shm file made immutable while the store runs still faults SQLite's mapping.)
    private static func requireWritable(_ path: String) throws {
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            let descriptor = Foundation.open(file, O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw ServerSetupError(path: file, problem: "cannot be opened for writing (\(String(cString: strerror(errno))))",
                    action: "make it writable (chmod u+w; chattr -i if it was made immutable): the store writes its database and the -wal and -shm files beside it")
            }
            Foundation.close(descriptor)
        }
    }

    private static func cannotOpen(_ location: DatabaseLocation, _ error: any Error) -> ServerSetupError {
        ServerSetupError(path: location.description, problem: "cannot be opened (\(describe(error)))",
            action: location.isPostgres
                ? "check that PostgreSQL is running, the URL's user, password and database are right, and the user may create tables"
                : "check that the folder exists and is writable and that the file is a Kiosk store database")
    }

    private init(location: DatabaseLocation, pool poolSettings: DatabasePool, logger: Logger) async throws {
        self.location = location
        // The pool logs each failed connection attempt at error level; the caller reports the
        // failure once, in its own words.
        var logger = logger
        logger.logLevel = .critical
        switch location {
        case .sqlite(let path):
            // The file holds the signing keys: readable by the server's user alone, from the start
            // (SQLite gives its -wal and -shm files the same mode).
            if !FileManager.default.fileExists(atPath: path) {
                let descriptor = Foundation.open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
                if descriptor >= 0 { Foundation.close(descriptor) }
            }
            try Self.requireWritable(path)
            let threads = NIOThreadPool(numberOfThreads: 4)
            threads.start()
            let writer: InlineSQLite
            let checkpoints: InlineSQLite
            do {
                writer = try await InlineSQLite.open(path: path, threadPool: threads, logger: logger)
                // The group commit puts each write in a savepoint, and SQLite keeps the pages a
                // savepoint changes in a statement journal, spilled to a temporary file past 64 KiB:
                // 19,256 writes to it in 2 s of purchases under strace, 5.6 % of the server's time.
                // In memory it costs a copy. The writer's statements are small steps of a plan, so its
                // temporary storage stays small; the readers (whose sorts could be large) keep files.
                // Purchases on SQLite, 3 alternating pairs (a build running meanwhile): 1,126–1,439
                // a second before, 1,439–1,546 after (docs/benchmarks.md).
                try writer.run("PRAGMA temp_store = MEMORY")
                try writer.run("PRAGMA wal_autocheckpoint = \(WALCheckpointer.writerBackstopPages)")
                checkpoints = try await InlineSQLite.open(path: path, threadPool: threads, logger: logger)
            } catch {
                try? await threads.shutdownGracefully()
                throw Self.cannotOpen(location, error)
            }
            threadPool = threads
            listenConfiguration = nil
            engine = .sqlite
            pool = SQLiteReaders(path: path, threadPool: threads, logger: logger)
            groupCommit = GroupCommit(writer: writer, checkpointer: WALCheckpointer(connection: checkpoints, logger: logger))
        case .postgres(let url):
            var configuration: SQLPostgresConfiguration
            do {
                configuration = try SQLPostgresConfiguration(url: url)
            } catch {
                throw ServerSetupError(path: location.description, problem: "is not a PostgreSQL URL Kiosk can read",
                    action: "write postgres://USER:PASSWORD@HOST:PORT/DATABASE")
            }
            // A prepared statement (``StoreStatement``) is planned once, not again for every
            // execution as PostgreSQL's default does while it judges a plan for these values
            // cheaper: each look-up is one step down a unique index whatever the values.
            configuration.coreConfiguration.options.additionalStartupParameters.append(("plan_cache_mode", "force_generic_plan"))
            threadPool = nil
            listenConfiguration = configuration.coreConfiguration
            engine = .postgres
            groupCommit = nil
            // PostgreSQL lets concurrent commits share one WAL flush, so a commit's fsync is
            // shared by as many purchases as there are connections committing at once: with 8
            // connections an event loop, 32 clients bought 1,250–1,350 a second here, with 16
            // (as many as the clients) 1,630, in the same hour.
            pool = Leasing(EventLoopGroupConnectionPool(
                source: PostgresConnectionSource(sqlConfiguration: configuration),
                maxConnectionsPerEventLoop: poolSettings.connectionsPerThread, requestTimeout: TimeAmount(poolSettings.wait), logger: logger,
                on: MultiThreadedEventLoopGroup.singleton))
        }
    }

    /// Runs `body` on one connection outside any transaction: each statement sees committed data.
    func read<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await traced("database read") { try await pool.lease(body) }
    }

    /// Runs `body` in one transaction: committed (durably) before this returns, rolled back when
    /// it throws (nothing of it is left behind on either engine). A body must not call `write`.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await traced("database write") { try await transaction(body) }
    }

    /// A span of the caller's trace (`kiosk serve --otlp-endpoint`) around one use of the
    /// database, from waiting for a connection (or a shared commit) to the answer. Only within a
    /// trace: a worker's polls (the outbox's, every fraction of a second) would each be a trace of
    /// one span, thousands a minute that say nothing; and a store that traces nothing pays nothing.
    private func traced<T: Sendable>(_ name: String, _ body: () async throws -> T) async throws -> T {
        guard ServiceContext.current != nil else { return try await body() }
        return try await withSpan(name, ofKind: .client) { span in
            span.attributes["db.system.name"] = engine == .postgres ? "postgresql" : "sqlite"
            return try await body()
        }
    }

    private func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        if let groupCommit { return try await groupCommit.write(body) }
        return try await pool.lease { db in
            try await db.raw("BEGIN").run()
            do {
                let result = try await body(db)
                try await db.raw("COMMIT").run()
                return result
            } catch {
                try? await db.raw("ROLLBACK").run()
                throw error
            }
        }
    }

    /// Runs one statement that is a transaction by itself: on PostgreSQL straight on a connection
    /// (a statement outside BEGIN commits on its own, durably, all or nothing), saving the two
    /// round trips of BEGIN and COMMIT; on SQLite through ``write(_:)``.
    func statement<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await traced("database statement") {
            if groupCommit != nil { return try await transaction(body) }
            return try await pool.lease(body)
        }
    }

    /// PostgreSQL only: opens a connection of its own, `LISTEN`s on `channel` and calls `received`
    /// with each notification's payload until the calling task is cancelled (then returns) or the
    /// connection fails (then throws). Returns at once on SQLite.
    /// - Parameter listening: called once the `LISTEN` is in place.
    func listen(on channel: String, logger: Logger, listening: @Sendable () -> Void, received: @Sendable (String) -> Void) async throws {
        guard let listenConfiguration else { return }
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: listenConfiguration, id: 0, logger: logger).get()
        do {
            // Cancelled (the server is stopping), the connection is closed outright rather than
            // left to end its LISTEN politely: one that PostgreSQL dropped half-way may never
            // answer, and a stop must not wait on it.
            try await withTaskCancellationHandler {
                try await connection.listen(on: channel) { notifications in
                    listening()
                    for try await notification in notifications {
                        received(notification.payload)
                    }
                }
            } onCancel: {
                _ = connection.close() as EventLoopFuture<Void>
            }
        } catch {
            try? await connection.close()
            if Task.isCancelled { return }
            throw error
        }
        try? await connection.close()
    }

    /// Whether `error` is a unique index or key refusing a row: a rule of the schema held.
    func isUniqueViolation(_ error: any Error) -> Bool {
        if let error = error as? InlineSQLiteError { return error.isUniqueViolation }
        if let error = error as? PSQLError {
            return error.serverInfo?[.sqlState] == "23505"
        }
        return false
    }

    /// PostgreSQL answered the statement with an error of its own (a rule of the schema, a
    /// deadlock): the statement, not the connection, failed, and running it again can succeed.
    func isStatementRefusal(_ error: any Error) -> Bool {
        sqlState(of: error) != nil
    }

    /// PostgreSQL's SQLSTATE for an error it answered with (`42883`: no such function).
    func sqlState(of error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// Closes every connection. The database must not be used afterwards.
    func close() async {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        await groupCommit?.close()
        await pool.shutdown()
        try? await threadPool?.shutdownGracefully()
    }

    /// A database dropped without ``close()`` still lets go of its connections.
    deinit {
        guard !closed.load(ordering: .relaxed) else { return }
        let threadPool = threadPool
        pool.shutdownInBackground { threadPool?.shutdownGracefully { _ in } }
    }

    /// One line for a database error: PostgreSQL's own message rather than a dump of the error value.
    /// Whether `error` came from the database itself (a lost connection, a statement it refused),
    /// not from the store's own rules.
    static func isDatabaseFailure(_ error: any Error) -> Bool {
        error is PSQLError || error is InlineSQLiteError || error is ConnectionUnavailable
    }

    /// Whether the database refused for a reason that lasts until its operator acts: PostgreSQL's
    /// classes 42 (a right revoked, a table or column missing), 28 (the store's role may no longer
    /// sign in) and 25006 (a read-only transaction: a standby, `default_transaction_read_only`),
    /// a full disk (53100) or corrupt data (XX001, XX002); SQLite's SQLITE_PERM, SQLITE_READONLY,
    /// SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN and SQLITE_NOTADB. A lost connection, a lock,
    /// a deadlock or an I/O error may pass, and is not one of them.
    static func needsOperator(_ error: any Error) -> Bool {
        if let error = error as? InlineSQLiteError { return error.needsOperator }
        guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("42") || state.hasPrefix("28") || ["25006", "53100", "XX001", "XX002"].contains(state)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if error.code == .connectionError { return "PostgreSQL cannot be reached there" }
            if error.code == .sslUnsupported { return "this PostgreSQL server does not offer TLS (turn ssl on there, or use tlsmode=disable)" }
            // A PostgreSQL error may wrap another (its own description names no cause).
            if let underlying = error.underlying { return describe(underlying) }
            return "\(error.code)"
        }
        if let error = error as? InlineSQLiteError { return error.message }
        if let error = error as? ConnectionUnavailable { return "no database connection could be had: \(describe(error.underlying))" }
        if let error = error as? ServerSetupError { return error.problem }
        return "\(error)"
    }
}

extension DatabaseLocation {
    var isPostgres: Bool { if case .postgres = self { true } else { false } }
}

// MARK: Connections

/// How many PostgreSQL connections an instance keeps open, and how long a request waits for one
/// before it is answered 503 (SQLite opens a reader for each read in flight and has no such wait).
public struct DatabasePool: Sendable, Equatable {
    /// Connections per event-loop thread (one thread per core). PostgreSQL lets concurrent commits
    /// share one WAL flush, so more connections committing at once share more fsyncs.
    public var connectionsPerThread: Int
    /// How long a request waits for a free connection.
    public var wait: Duration

    public init(connectionsPerThread: Int = 16, wait: Duration = .seconds(30)) {
        self.connectionsPerThread = connectionsPerThread
        self.wait = wait
    }
}

/// A connection the pool could not lend (see ``Leasing/lease(_:)``).
struct ConnectionUnavailable: Error, CustomStringConvertible {
    let underlying: any Error
    var description: String { "no database connection could be had: \(underlying)" }
}

/// A pool that lends a connection to a closure and takes it back whatever the closure does.
protocol ConnectionLeasing: Sendable {
    func lease<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    func shutdown() async
    func shutdownInBackground(then: @escaping @Sendable () -> Void)
}

/// The pool hands out connections under its own lock; it predates Sendable annotations.
private struct Leasing<Source: ConnectionPoolSource>: ConnectionLeasing, @unchecked Sendable where Source.Connection: SQLConvertible & Sendable {
    let pool: EventLoopGroupConnectionPool<Source>

    init(_ pool: EventLoopGroupConnectionPool<Source>) { self.pool = pool }

    func lease<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let connection: Source.Connection
        do {
            connection = try await pool.requestConnection().get()
        } catch {
            // Every connection busy past the pool's wait, the pool shut down, PostgreSQL refusing
            // one more client: the database did not answer this request. Named as such, so the
            // request answers 503 with Retry-After (it answered a 500 before).
            throw ConnectionUnavailable(underlying: error)
        }
        do {
            let result = try await body(connection.sqlDatabase)
            pool.releaseConnection(connection)
            return result
        } catch {
            pool.releaseConnection(connection)
            throw error
        }
    }

    func shutdown() async {
        try? await pool.shutdownAsync()
    }

    func shutdownInBackground(then: @escaping @Sendable () -> Void) {
        pool.shutdownGracefully { _ in then() }
    }
}

/// A connection SQLKit can speak to.
private protocol SQLConvertible { var sqlDatabase: any SQLDatabase { get } }
extension PostgresConnection: SQLConvertible { fileprivate var sqlDatabase: any SQLDatabase { PostgresSession(self) } }

/// A PostgreSQL connection as the store speaks to it: SQLKit's statements through postgres-kit,
/// and ``StoreStatement``s as the connection's own prepared statements (which need the
/// connection itself, not postgres-kit's wrapper of it).
struct PostgresSession: SQLDatabase {
    let connection: PostgresConnection
    private let kit: any SQLDatabase

    init(_ connection: PostgresConnection) {
        self.connection = connection
        kit = connection.sql()
    }

    var logger: Logger { kit.logger }
    var eventLoop: any EventLoop { kit.eventLoop }
    var dialect: any SQLDialect { kit.dialect }
    var version: (any SQLDatabaseReportedVersion)? { kit.version }
    var queryLogLevel: Logger.Level? { kit.queryLogLevel }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) -> EventLoopFuture<Void> {
        kit.execute(sql: query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) async throws {
        try await kit.execute(sql: query, onRow)
    }
}
