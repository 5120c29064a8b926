import Foundation
import Hummingbird
import KioskServer
import Logging

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
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await app.runService(gracefulShutdownSignals: [])
                return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                throw CancellationError()
            }
            try await server.loadCatalog()
            let result = try await body(server, "http://127.0.0.1:\(port)")
            group.cancelAll()
            return result
        }
    }
}
