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
        } catch let error as SocketAddressError.UnknownHost {
            // A host name that does not resolve (or is not a name at all).
            throw ListenError(listener: listener, host: host, port: port, code: 0, unresolved: "\(error)")
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
        /// The publisher's console (`--console-host`, `--console-port`).
        case console
    }

    public var listener: Listener
    public var host: String
    public var port: Int
    /// The `errno` of the failed bind, e.g. `EADDRINUSE`.
    public var code: Int32

    /// Why the host could not be resolved, when that is what failed.
    public var unresolved: String?

    public init(listener: Listener, host: String, port: Int, code: Int32, unresolved: String? = nil) {
        self.listener = listener
        self.host = host
        self.port = port
        self.code = code
        self.unresolved = unresolved
    }

    public var isAddressInUse: Bool { code == EADDRINUSE }

    public var description: String {
        if unresolved != nil {
            return "cannot listen on \(host):\(port): \"\(host)\" is not an address or a host name this machine resolves"
        }
        return "cannot listen on \(host):\(port): \(isAddressInUse ? "the address is already in use" : String(cString: strerror(code)))"
    }
}
