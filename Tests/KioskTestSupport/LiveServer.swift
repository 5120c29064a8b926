import Foundation
import Hummingbird
import KioskServer
import Logging
import Synchronization

/// Runs a real Kiosk server on 127.0.0.1 and a free port for the length of `body`.
public enum LiveServer {
    public static func run<T: Sendable>(
        _ configuration: ServerConfiguration,
        _ body: @Sendable (_ server: KioskServer, _ baseURL: String) async throws -> T
    ) async throws -> T {
        var configuration = configuration
        configuration.host = "127.0.0.1"
        configuration.port = 0
        var logger = Logger(label: "kiosk.test-server")
        // Cancelling the server at the end of a test logs a harmless "already closed" at error level.
        logger.logLevel = ProcessInfo.processInfo.environment["KIOSK_TEST_SERVER_LOG"] != nil ? .warning : .critical
        let server = try await KioskServer(configuration: configuration, logger: logger)
        do {
            let result = try await run(server, body)
            await server.shutdown()
            return result
        } catch {
            await server.shutdown()
            throw error
        }
    }

    private static func run<T: Sendable>(
        _ server: KioskServer, _ body: @Sendable (_ server: KioskServer, _ baseURL: String) async throws -> T
    ) async throws -> T {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = server.makeApplication { port in continuation.yield(port) }
        // Not a child task: a child must be awaited, and a server whose stop waits on a stuck
        // request would then stall the whole test run without a word. Ended, the stream of ports
        // ends too, so a server that failed to start is not waited for either.
        let service = Task {
            defer { continuation.finish() }
            try await app.runService(gracefulShutdownSignals: [])
        }
        do {
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                try await service.value
                throw ServerDidNotStart()
            }
            try await server.loadCatalog()
            let result = try await body(server, "http://127.0.0.1:\(port)")
            try await stop(service)
            return result
        } catch {
            try? await stop(service)
            throw error
        }
    }

    /// How long a stopping server may take to finish the requests it is answering.
    static let stopLimit: Duration = .seconds(30)

    private static func stop(_ service: Task<Void, any Error>) async throws {
        service.cancel()
        // Awaiting a task's value cannot be cancelled, so the wait races a timer through one
        // continuation rather than in a task group (which would wait for both).
        let stopped = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer = Mutex<CheckedContinuation<Bool, Never>?>(continuation)
            let give = { @Sendable (stopped: Bool) in answer.withLock { $0.take() }?.resume(returning: stopped) }
            Task { _ = try? await service.value; give(true) }
            Task { try? await Task.sleep(for: stopLimit); give(false) }
        }
        if !stopped { throw ServerDidNotStop() }
    }

    public struct ServerDidNotStart: Error, CustomStringConvertible {
        public var description: String { "the test server ended before it listened" }
    }

    /// A request the server was answering never ended: a hang in the store, left running so the
    /// test fails with this instead of stalling the run.
    public struct ServerDidNotStop: Error, CustomStringConvertible {
        public var description: String { "the test server did not stop within \(LiveServer.stopLimit): a request it was answering is stuck" }
    }
}
