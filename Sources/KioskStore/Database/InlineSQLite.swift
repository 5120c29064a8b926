import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit
import SQLiteNIO
import Synchronization
// SQLiteNIO's own copy of SQLite (its symbols carry a `sqlite_nio_` prefix), for every connection
// to a store file: two copies of SQLite in one process (GRDB, for the client, links the system's)
// do not see each other's POSIX locks, and closing one copy's descriptor would drop the other's.
import VaporCSQLite

/// A connection to the store's SQLite file whose statements run on the caller's own thread, from
/// a cache of prepared statements. The group commit's writer is one; ``SQLiteReaders`` lends others.
///
/// Why not SQLiteNIO's connections: they compile every statement afresh, hand it to a thread
/// pool, and hand its answer back to an event loop and then to the waiting task — a parse and three
/// thread switches per statement, several statements a purchase. Under the benchmark's 32 clients
/// that was half of the server's CPU and, in the group commit's serial writer, its ceiling.
///
/// Running a statement inline is safe because none of the store's statements waits on anything
/// but memory and the OS's page cache: a reader in WAL mode never waits for the writer, and the
/// writer runs its statements inside `BEGIN IMMEDIATE`, when it already holds the write lock.
/// What does wait — taking that lock (another process may hold it, up to the busy timeout) and the
/// commit's fsync — runs on the thread pool (``begin()``, ``commit()``). A reader can still meet a
/// busy timeout while another process recovers the WAL after a crash; it then blocks its thread
/// as SQLiteNIO's would have blocked a pool thread.
///
/// Each connection is used by one task at a time (GroupCommit drains serially, a reader is leased
/// to one body); the lock around its handle makes that a rule rather than an assumption.
///
/// **Performance layer.** Replaces SQLiteNIO's `SQLiteConnection` pool for the store's file. The
/// figure (docs/benchmarks.md, `BENCH_ONLY=purchases`, 2026-11-23, wrk with 32 connections buying
/// credit packs over 200 accounts on SQLite): 700 purchases/s at p99 157 ms on SQLiteNIO (02:45),
/// 1,765 /s at p99 38 ms with the writer inline (03:14), 2,128 /s at p99 32 ms with the readers
/// inline too (03:52). Go back to SQLiteNIO's connections only with a bench run showing the same.
final class InlineSQLite: SQLDatabase {
    let logger: Logger
    let eventLoop: any EventLoop
    var dialect: any SQLDialect { SQLiteDialect() }
    var queryLogLevel: Logger.Level? { nil }

    private let connection: Mutex<Connection>
    private let threadPool: NIOThreadPool
    private let encoder = SQLiteDataEncoder()
    private let decoder = SQLiteDataDecoder()

    /// Opens the store's file, on the thread pool (setting WAL mode may wait for another process's
    /// lock): WAL so that readers never wait for the writer, a full sync per commit (a receipt
    /// handed out must survive a power cut), and a busy timeout for the writer of another process.
    static func open(path: String, threadPool: NIOThreadPool, logger: Logger) async throws -> InlineSQLite {
        try await threadPool.runIfActive {
            let connection = try Connection(path: path)
            return InlineSQLite(connection: connection, threadPool: threadPool, logger: logger)
        }
    }

    private init(connection: consuming Connection, threadPool: NIOThreadPool, logger: Logger) {
        self.connection = Mutex(connection)
        self.threadPool = threadPool
        self.logger = logger
        self.eventLoop = MultiThreadedEventLoopGroup.singleton.any()
    }

    // MARK: The group commit's transaction

    /// Takes the write lock: on the thread pool, since another process may hold it.
    func begin() async throws {
        try await onThreadPool("BEGIN IMMEDIATE")
    }

    /// Commits durably (`synchronous = FULL`): on the thread pool, since it waits for the fsync.
    func commit() async throws {
        try await onThreadPool("COMMIT")
    }

    /// Copies the WAL's committed pages into the database file as far as no reader still needs
    /// them, without waiting for any lock (``WALCheckpointer``); on the thread pool, since it writes
    /// and syncs the file.
    func checkpoint() async throws {
        try await onThreadPool("PRAGMA wal_checkpoint(PASSIVE)")
    }

    func rollback() async {
        try? await onThreadPool("ROLLBACK")
    }

    /// A statement without binds or rows, inline (the batch's savepoints).
    func run(_ sql: String) throws {
        try connection.withLock { try $0.execute(sql, binds: []) { _, _ in } }
    }

    private func onThreadPool(_ sql: String) async throws {
        try await threadPool.runIfActive { [self] in try run(sql) }
    }

    // MARK: SQLDatabase

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) async throws {
        try executeInline(query, onRow)
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) -> EventLoopFuture<Void> {
        eventLoop.makeCompletedFuture { try executeInline(query, onRow) }
    }

    private func executeInline(_ query: any SQLExpression, _ onRow: (any SQLRow) -> ()) throws {
        let (sql, values) = serialize(query)
        let binds = try values.map { try encoder.encode($0) }
        try connection.withLock { connection in
            try connection.execute(sql, binds: binds) { columns, values in
                onRow(Row(columns: columns, values: values, decoder: decoder))
            }
        }
    }

    /// Finalizes the cached statements and closes the file.
    func close() {
        connection.withLock { $0.close() }
    }

    deinit {
        connection.withLock { $0.close() }
    }

    // MARK: The handle

    /// The `sqlite3` handle and its prepared statements, keyed by their SQL. It moves between
    /// threads (a task resumes where it may) but is touched only under the connection's lock, one
    /// thread at a time, which is all a `SQLITE_OPEN_NOMUTEX` handle asks.
    private struct Connection: ~Copyable, @unchecked Sendable {
        private var handle: OpaquePointer?
        private var statements: [String: Prepared] = [:]

        /// Enough for every statement the store writes with; a statement beyond it (an `IN` list
        /// of a new length) empties the cache rather than letting it grow without end.
        private static let cacheLimit = 64

        struct Prepared {
            let statement: OpaquePointer
            let columns: [String]
        }

        init(path: String) throws {
            var handle: OpaquePointer?
            let flags = SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
            let opened = sqlite_nio_sqlite3_open_v2(path, &handle, flags, nil)
            self.handle = handle
            guard opened == SQLITE_OK else {
                let error = InlineSQLiteError(code: opened, handle: handle)
                close()
                throw error
            }
            do {
                try execute("PRAGMA busy_timeout = 30000", binds: []) { _, _ in }
                try enterWAL()
                try execute("PRAGMA synchronous = FULL", binds: []) { _, _ in }
            } catch {
                close()
                throw error
            }
        }

        /// Switches a new file to WAL. Two connections doing so at once (two servers starting on
        /// one new data folder) both hold a read lock and want the write lock; SQLite answers one
        /// of them SQLITE_BUSY at once rather than call the busy handler, which could deadlock. So
        /// that one tries again, within the same 30 seconds the busy timeout gives a writer.
        private mutating func enterWAL() throws {
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                do {
                    try execute("PRAGMA journal_mode = WAL", binds: []) { _, _ in }
                    return
                } catch let error as InlineSQLiteError where error.code & 0xff == SQLITE_BUSY && ContinuousClock.now < deadline {
                    usleep(10_000)  // on the thread pool (see `open`), never a task's thread
                }
            }
        }

        /// Runs one statement, handing each row to `onRow`; the statement is reset for its next use
        /// whatever happens, so it never holds a read open. Its binds are not cleared: the same SQL
        /// always comes with all of its binds, and clearing them would make SQLite compile again
        /// a statement whose plan depends on a bound value (one a partial index was chosen for).
        mutating func execute(_ sql: String, binds: [SQLiteData], _ onRow: ([String], [SQLiteData]) throws -> Void) throws {
            let prepared = try prepare(sql)
            let statement = prepared.statement
            defer { sqlite_nio_sqlite3_reset(statement) }
            for (index, value) in binds.enumerated() {
                try check(bind(value, at: Int32(index + 1), in: statement))
            }
            while true {
                let stepped = sqlite_nio_sqlite3_step(statement)
                if stepped == SQLITE_DONE { return }
                guard stepped == SQLITE_ROW else { throw InlineSQLiteError(code: stepped, handle: handle) }
                try onRow(prepared.columns, (0..<Int32(prepared.columns.count)).map { column(at: $0, of: statement) })
            }
        }

        private mutating func prepare(_ sql: String) throws -> Prepared {
            if let cached = statements[sql] { return cached }
            var statement: OpaquePointer?
            let prepared = sqlite_nio_sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            guard prepared == SQLITE_OK, let statement else { throw InlineSQLiteError(code: prepared, handle: handle) }
            let columns = (0..<sqlite_nio_sqlite3_column_count(statement)).map { index in
                sqlite_nio_sqlite3_column_name(statement, index).map { String(cString: $0) } ?? ""
            }
            if statements.count >= Self.cacheLimit { finalizeAll() }
            let entry = Prepared(statement: statement, columns: columns)
            statements[sql] = entry
            return entry
        }

        private func bind(_ value: SQLiteData, at index: Int32, in statement: OpaquePointer) -> Int32 {
            switch value {
            case .integer(let value): sqlite_nio_sqlite3_bind_int64(statement, index, Int64(value))
            case .float(let value): sqlite_nio_sqlite3_bind_double(statement, index, value)
            case .null: sqlite_nio_sqlite3_bind_null(statement, index)
            case .text(let value):
                sqlite_nio_sqlite3_bind_text64(statement, index, value, UInt64(value.utf8.count), transient, UInt8(SQLITE_UTF8))
            case .blob(let value):
                value.withUnsafeReadableBytes {
                    sqlite_nio_sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), transient)
                }
            }
        }

        private func column(at index: Int32, of statement: OpaquePointer) -> SQLiteData {
            switch sqlite_nio_sqlite3_column_type(statement, index) {
            case SQLITE_INTEGER: return .integer(SQLiteInt64(sqlite_nio_sqlite3_column_int64(statement, index)))
            case SQLITE_FLOAT: return .float(sqlite_nio_sqlite3_column_double(statement, index))
            case SQLITE_TEXT:
                guard let text = sqlite_nio_sqlite3_column_text(statement, index) else { return .null }
                let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
                return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
            case SQLITE_BLOB:
                let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
                var buffer = ByteBufferAllocator().buffer(capacity: count)
                if let bytes = sqlite_nio_sqlite3_column_blob(statement, index) {
                    buffer.writeBytes(UnsafeRawBufferPointer(start: bytes, count: count))
                }
                return .blob(buffer)
            default: return .null
            }
        }

        private func check(_ code: Int32) throws {
            guard code == SQLITE_OK else { throw InlineSQLiteError(code: code, handle: handle) }
        }

        private mutating func finalizeAll() {
            for prepared in statements.values { sqlite_nio_sqlite3_finalize(prepared.statement) }
            statements = [:]
        }

        mutating func close() {
            finalizeAll()
            if let handle { sqlite_nio_sqlite3_close_v2(handle) }
            handle = nil
        }
    }

    /// A row of an answer, read through SQLiteKit's decoder, as SQLiteKit reads SQLiteNIO's rows.
    private struct Row: SQLRow {
        let columns: [String]
        let values: [SQLiteData]
        let decoder: SQLiteDataDecoder

        var allColumns: [String] { columns }

        func contains(column: String) -> Bool { columns.contains(column) }

        func decodeNil(column: String) throws -> Bool {
            (value(column) ?? .null) == .null
        }

        func decode<D: Decodable>(column: String, as: D.Type) throws -> D {
            guard let value = value(column) else {
                throw InlineSQLiteError(code: SQLITE_ERROR, message: "no column \(column) in the answer")
            }
            return try decoder.decode(D.self, from: value)
        }

        private func value(_ column: String) -> SQLiteData? {
            columns.firstIndex(of: column).map { values[$0] }
        }
    }
}

/// SQLite's destructor value that makes it copy a bound text or blob before the call returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// An error of an inline connection: SQLite's extended result code and its message.
struct InlineSQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    init(code: Int32, handle: OpaquePointer?) {
        self.code = code
        self.message = handle.flatMap { sqlite_nio_sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? String(cString: sqlite_nio_sqlite3_errstr(code))
    }

    /// A unique index or primary key refused a row (SQLite's extended codes
    /// SQLITE_CONSTRAINT_UNIQUE and SQLITE_CONSTRAINT_PRIMARYKEY, which Swift does not import).
    var isUniqueViolation: Bool {
        [SQLITE_CONSTRAINT, SQLITE_CONSTRAINT | 8 << 8, SQLITE_CONSTRAINT | 6 << 8].contains(code)
    }

    /// A refusal that lasts until the operator acts (``ServerDatabase/needsOperator(_:)``), by
    /// its primary code (the low byte of an extended one).
    var needsOperator: Bool {
        [SQLITE_PERM, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB].contains(code & 0xff)
    }

    var description: String { message }
}
