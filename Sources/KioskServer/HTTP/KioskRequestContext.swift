import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore
import Logging
import NIOCore
import Synchronization

/// The context of every request: who is asking, decided once by ``AccountMiddleware``.
public struct KioskRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The device an `Authorization: Bearer` token signs in; nil without a known token.
    var device: DeviceIdentity?
    /// The ID of the account the bearer token acts for; nil without a known token.
    var accountId: String? { device?.accountId }
    /// Why the bearer token could not be looked up (the database failed underneath), for the
    /// handlers that need the account to answer with: a token that may be good is not a 401.
    var tokenLookupFailure: (any Error)?
    /// The IP address of the connection's peer (the client, or the proxy in front of Kiosk).
    let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.peerAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The device the bearer token signs in, nil without a known token; the look-up's failure when
    /// it failed.
    func presentedDevice() throws -> DeviceIdentity? {
        if let tokenLookupFailure { throw tokenLookupFailure }
        return device
    }

    /// The account the bearer token acts for (``presentedDevice()``).
    func presentedAccount() throws -> String? {
        try presentedDevice()?.accountId
    }

    /// The account, or 401 saying how to get one.
    func requireAccount() throws -> String {
        guard let accountId = try presentedAccount() else {
            throw APIFailure.unauthorized("this call needs Authorization: Bearer <account token> of an account this store knows")
        }
        return accountId
    }

    /// The device asking, or 401 saying how to sign in.
    func requireDevice() throws -> DeviceIdentity {
        guard let device = try presentedDevice() else {
            throw APIFailure.unauthorized("this call needs Authorization: Bearer <device token> of a device signed in to this store; a device removed from its account signs in again (kiosk login)")
        }
        return device
    }
}

/// Resolves a bearer token to its account once, for every handler and the request log.
struct AccountMiddleware: RouterMiddleware {
    let store: Store

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        if let token = JSONBody.bearerToken(request), !token.isEmpty {
            // The account page's browser session is the page's alone: a stolen cookie is no API token.
            do {
                context.device = try await store.accounts.device(forToken: token).flatMap { $0.kind == .app ? $0 : nil }
            } catch {
                // Thrown here, before the request log, a database failure was an empty 500 with no
                // log line; handlers that need the account throw it (``presentedAccount()``), where
                // it is logged and answered as any database failure.
                context.tokenLookupFailure = error
            }
        }
        return try await next(request, context)
    }
}

/// One log line per request, once its last byte is sent: method, route, status, duration, bytes
/// sent, account, the client's address and its `User-Agent`. Never the path's query, a token or a
/// receipt. The same duration goes to the route's latency histogram.
///
/// A body streamed through Hummingbird ends when its writer returns; a file sent with `sendfile`
/// ends later, in the channel (``FileRegionSender``), so its line waits in ``SendfileEnds``.
struct RequestLogMiddleware: RouterMiddleware {
    let logger: Logger
    let metrics: ServerMetrics
    let ends: SendfileEnds
    /// Which proxies' `X-Forwarded-For` names the client (as for rate limits).
    let rateLimits: RateLimits

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        var line = RequestLine(
            method: request.method.rawValue, route: route, status: 0, started: started, account: context.accountId,
            client: rateLimits.clientAddress(peer: context.peerAddress, fields: request.headers), agent: request.headers[.userAgent])
        do {
            var response = try await next(request, context)
            line.status = response.status.code
            line.account = context.accountId
            line.route = context.endpointPath ?? route
            let (logger, metrics) = (self.logger, self.metrics)
            let sent = ByteCounter()
            // `map` forgets the body's length; given back, the Content-Length the handler set stays
            // (without it every answer went chunked, and a HEAD told no size).
            let length = response.body.contentLength
            // A file handed to sendfile (FileRegionSender) sends no bytes through the body: its line
            // is written when the channel has sent the file.
            if let sendfile = HTTPField.Name.kioskSendfile, response.headers[sendfile] != nil,
               let endField = HTTPField.Name.kioskSendfileEnd {
                let bytes = Int(response.headers[.contentLength] ?? "") ?? 0
                let finished = line
                let number = ends.register { cut in
                    finished.write(logger, metrics: metrics, bytes: cut ? nil : bytes, cut: cut)
                }
                response.headers[endField] = String(number)
                return response
            }
            // Hummingbird's generated HEAD route (`createHeadResponse`) drops the body without
            // writing it, so a HEAD's line, with no body bytes, is written now.
            if request.method == .head {
                line.write(logger, metrics: metrics, bytes: 0)
                return response
            }
            let counted = response.body.map { buffer in
                sent.add(buffer.readableBytes)
                return buffer
            }
            let finished = line
            response.body = ResponseBody(contentLength: length) { writer in
                do {
                    try await counted.write(writer)
                    finished.write(logger, metrics: metrics, bytes: sent.value)
                } catch {
                    finished.write(logger, metrics: metrics, bytes: sent.value, cut: true)
                    throw error
                }
            }
            return response
        } catch {
            line.route = context.endpointPath ?? route
            let answer = Self.answer(for: error, route: line.route, logger: logger)
            line.status = (answer as? any HTTPResponseError)?.status.code ?? 500
            line.write(logger, metrics: metrics, bytes: 0)
            throw answer
        }
    }

    /// What a request that threw answers. The store's own refusals answer as they are. Anything
    /// else failed underneath (the database went away mid-request, a disk error): the operator
    /// gets its cause in the log, and the client a JSON answer it can act on instead of an empty
    /// 500 — a database failure is a 503 to send again (every payment carries its idempotency
    /// key, so sending it again never charges twice). One that lasts until the operator acts (a
    /// right revoked, a read-only database, a full disk) says so, and asks for a later retry: it
    /// was answered "did not answer; send the request again", though it had answered, and every
    /// retry a second later failed the same way.
    static func answer(for error: any Error, route: String, logger: Logger) -> any Error {
        if error is any HTTPResponseError || error is CancellationError { return error }
        if Store.needsOperator(error) {
            logger.error("a request failed: the store's database refused it, and will until this is mended",
                         metadata: ["route": "\(route)", "error": "\(Store.describe(error))",
                                    "action": "give the store's database user back its rights, make the database writable or free its disk"])
            return APIFailure(.serviceUnavailable, code: "unavailable",
                              message: "the store's database refused this request; its operator must mend that (the store's log says what), so try again later",
                              retryAfter: 60)
        }
        logger.error("a request failed", metadata: ["route": "\(route)", "error": "\(Store.describe(error))"])
        if Store.isDatabaseFailure(error) {
            return APIFailure(.serviceUnavailable, code: "unavailable",
                              message: "the store's database did not answer; send the request again", retryAfter: 1)
        }
        return APIFailure(.internalServerError, code: "internal", message: "the store failed to answer this request; its log says why")
    }
}

/// What one request log line says, written once its last byte is sent (or it was cut).
struct RequestLine: Sendable {
    var method: String
    var route: String
    var status: Int
    let started: ContinuousClock.Instant
    var account: String?
    let client: String?
    let agent: String?

    /// Logs the line and records the duration in the route's latency histogram.
    /// - Parameter bytes: bytes sent; nil when a file was cut part-way and the count is unknown.
    func write(_ logger: Logger, metrics: ServerMetrics, bytes: Int?, cut: Bool = false) {
        let elapsed = ContinuousClock.now - started
        metrics.latency(route: route, method: method, elapsed: elapsed)
        // The line's fields are made only when it is written (`KIOSK_LOG_LEVEL` above info writes
        // none): made and dropped they cost a shop page served on the event loop 5 % of its rate.
        guard logger.logLevel <= .info else { return }
        // Tenths of a millisecond by integer arithmetic, not String(format:) through CoreFoundation per request.
        let tenths = elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
        var metadata: Logger.Metadata = [
            "status": "\(status)", "route": "\(route)", "duration_ms": "\(tenths / 10).\(tenths % 10)",
            "bytes": "\(bytes.map(String.init) ?? "-")", "account": "\(account ?? "-")",
            "client": "\(client ?? "-")", "agent": "\(Self.quoted(agent))",
        ]
        if cut { metadata["cut"] = "true" }
        logger.info("\(method) \(route) \(status)", metadata: metadata)
    }

    /// A header value as one quoted word: at most 200 characters, quotes and controls escaped, so a
    /// client cannot forge a second field or line.
    static func quoted(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        var text = ""
        for scalar in value.unicodeScalars.prefix(200) {
            switch scalar {
            case "\"", "\\": text += "\\\(scalar)"
            // C0, DEL and C1 controls (U+0085 is a line break to some readers), and the line
            // and paragraph separators.
            case _ where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                text += "?"
            default: text.unicodeScalars.append(scalar)
            }
        }
        return "\"\(text)\""
    }
}

/// Bytes sent, counted from the body's writer.
final class ByteCounter: Sendable {
    private let count = Mutex(0)
    func add(_ n: Int) { count.withLock { $0 += n } }
    var value: Int { count.withLock { $0 } }
}

