import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import Logging
import NIOCore
import Synchronization

/// The context of every request: who is asking, decided once by ``AccountMiddleware``.
public struct KioskRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The ID of the account an `Authorization: Bearer` token acts for; nil without a known token.
    var accountId: String?
    /// The IP address of the connection's peer (the client, or the proxy in front of Kiosk).
    let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.peerAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The account, or 401 saying how to get one.
    func requireAccount() throws -> String {
        guard let accountId else {
            throw APIFailure.unauthorized("this call needs Authorization: Bearer <account token> of an account this store knows")
        }
        return accountId
    }
}

/// Resolves a bearer token to its account once, for every handler and the request log.
struct AccountMiddleware: RouterMiddleware {
    let store: Store

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        if let token = JSONBody.bearerToken(request), !token.isEmpty {
            context.accountId = try await store.accountId(forToken: token)
        }
        return try await next(request, context)
    }
}

/// One log line per request, once its body is sent: method, route, status, duration, bytes sent
/// and account. Never the path's query, a token or a receipt.
struct RequestLogMiddleware: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        do {
            var response = try await next(request, context)
            let status = response.status.code
            let account = context.accountId
            let logger = self.logger
            let method = request.method.rawValue
            let endpoint = context.endpointPath ?? route
            let sent = ByteCounter()
            // `map` forgets the body's length; given back, the Content-Length the handler set stays
            // (without it every answer went chunked, and a HEAD told no size).
            let length = response.body.contentLength
            // A file handed to sendfile (FileRegionSender) sends no bytes through the body.
            if let sendfile = HTTPField.Name.kioskSendfile, response.headers[sendfile] != nil {
                sent.add(Int(response.headers[.contentLength] ?? "") ?? 0)
            }
            let counted = response.body.map { buffer in
                sent.add(buffer.readableBytes)
                return buffer
            }
            response.body = ResponseBody(contentLength: length) { writer in
                do {
                    try await counted.write(writer)
                    Self.log(logger, method: method, route: endpoint, status: status, started: started, bytes: sent.value, account: account)
                } catch {
                    Self.log(logger, method: method, route: endpoint, status: status, started: started, bytes: sent.value, account: account, cut: true)
                    throw error
                }
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            Self.log(logger, method: request.method.rawValue, route: context.endpointPath ?? route, status: status, started: started, bytes: 0, account: context.accountId)
            throw error
        }
    }

    static func log(_ logger: Logger, method: String, route: String, status: Int, started: ContinuousClock.Instant, bytes: Int, account: String?, cut: Bool = false) {
        let elapsed = ContinuousClock.now - started
        // Tenths of a millisecond by integer arithmetic, not String(format:) through CoreFoundation per request.
        let tenths = elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
        var metadata: Logger.Metadata = [
            "status": "\(status)", "route": "\(route)", "duration_ms": "\(tenths / 10).\(tenths % 10)",
            "bytes": "\(bytes)", "account": "\(account ?? "-")",
        ]
        if cut { metadata["cut"] = "true" }
        logger.info("\(method) \(route) \(status)", metadata: metadata)
    }
}

/// Bytes sent, counted from the body's writer.
final class ByteCounter: Sendable {
    private let count = Mutex(0)
    func add(_ n: Int) { count.withLock { $0 += n } }
    var value: Int { count.withLock { $0 } }
}

