import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

/// One of the server's HTTP applications as a service of the group: a port it cannot bind becomes
/// a ``ListenError`` naming the address, and the end of its run, however it ends, ends `bound`.
struct ListeningService<App: ApplicationProtocol>: Service {
    let application: App
    let listener: ListenError.Listener
    let host: String
    let port: Int
    /// Finished when the application stops, so that nobody waits for a port that never comes.
    let bound: AsyncStream<Int>.Continuation?

    func run() async throws {
        defer { bound?.finish() }
        do {
            try await application.run()
        } catch let error as IOError {
            throw ListenError(listener: listener, host: host, port: port, code: error.errnoCode)
        }
    }
}

/// An address the server cannot listen on.
public struct ListenError: Error, Sendable, CustomStringConvertible {
    /// Which of the server's addresses it is.
    public enum Listener: Sendable {
        /// The store's own address (`--host`, `--port`).
        case store
        /// The address of `/metrics` alone (`--metrics-host`, `--metrics-port`).
        case metrics
    }

    public var listener: Listener
    public var host: String
    public var port: Int
    /// The `errno` of the failed bind, e.g. `EADDRINUSE`.
    public var code: Int32

    public var isAddressInUse: Bool { code == EADDRINUSE }

    public var description: String {
        "cannot listen on \(host):\(port): \(isAddressInUse ? "the address is already in use" : String(cString: strerror(code)))"
    }
}
