import Logging
import NIOPosix
import SQLKit
import Synchronization

/// The connections a SQLite store's reads run on: one per read in flight, opened when none is
/// idle and kept (up to ``maxIdle``) for the next. Reads in WAL mode run side by side and never
/// wait for the writer, so there is nothing to queue for; the number in flight is bounded by the
/// requests in flight.
final class SQLiteReaders: ConnectionLeasing {
    /// Idle connections kept open; more are closed as they come back.
    static let maxIdle = 8

    private let path: String
    private let threadPool: NIOThreadPool
    private let logger: Logger
    private let state = Mutex<(idle: [InlineSQLite], closed: Bool)>(([], false))

    init(path: String, threadPool: NIOThreadPool, logger: Logger) {
        self.path = path
        self.threadPool = threadPool
        self.logger = logger
    }

    func lease<T: Sendable>(_ body: @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let idle = state.withLock { $0.idle.popLast() }
        let connection = if let idle { idle } else { try await InlineSQLite.open(path: path, threadPool: threadPool, logger: logger) }
        defer { giveBack(connection) }
        return try await body(connection)
    }

    private func giveBack(_ connection: InlineSQLite) {
        let kept = state.withLock { state in
            guard !state.closed, state.idle.count < Self.maxIdle else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    func shutdown() async {
        let idle = state.withLock { state in
            state.closed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { connection.close() }
    }

    func shutdownInBackground(then: @escaping @Sendable () -> Void) {
        Task {
            await shutdown()
            then()
        }
    }
}
