import Hummingbird
import Logging

/// Runs a Hummingbird router on 127.0.0.1 and a free port for the length of `body`.
public enum LoopbackServer {
    public static func run<Context: RequestContext, T: Sendable>(
        _ router: Router<Context>, label: String, _ body: @Sendable (_ port: Int) async throws -> T
    ) async throws -> T where Context.Source == ApplicationRequestContextSource {
        var logger = Logger(label: label)
        logger.logLevel = .critical
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await app.runService(gracefulShutdownSignals: [])
                return nil
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let result = try await body(port)
            group.cancelAll()
            return result
        }
    }
}
