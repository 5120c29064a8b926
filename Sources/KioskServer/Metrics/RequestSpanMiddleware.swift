import Hummingbird
import KioskStore
import HTTPTypes
import Tracing

/// A server span per request (`kiosk serve --otlp-endpoint`), holding what the request log holds
/// and nothing more: the method, the route (its template, `/v1/content/{productId}`), the status.
/// Never the path's values, a query, a header or an error's words, which carry codes, tokens,
/// addresses and what a reader typed (Hummingbird's `TracingMiddleware` records the path, the
/// query and each error's description, and passes any `traceparent` to the propagator, whose
/// complaint about a malformed one logs every header of the request).
///
/// A client's `traceparent` is continued only when it is well formed (W3C Trace Context, version
/// 00, ids not all zeros); its `tracestate` is not read.
struct RequestSpanMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let parent = TraceParent.context(Self.wellFormed(request.headers[.traceparent]))
        let span = startSpan("\(request.method.rawValue) request", context: parent, ofKind: .server)
        span.attributes["http.request.method"] = request.method.rawValue
        do {
            let response = try await ServiceContext.$current.withValue(span.context) { try await next(request, context) }
            let route = context.endpointPath ?? "unmatched"
            span.operationName = "\(request.method.rawValue) \(route)"
            span.attributes["http.route"] = route
            span.attributes["http.response.status_code"] = Int(response.status.code)
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            // Ended with the answer's head: the work a request does (its database, its outbox) is
            // done by then; a download's bytes are the request log's to time.
            span.end()
            return response
        } catch {
            let route = context.endpointPath ?? "unmatched"
            span.operationName = "\(request.method.rawValue) \(route)"
            span.attributes["http.route"] = route
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            span.attributes["http.response.status_code"] = Int(status)
            // The error's kind, never its words (an address, a code a reader typed).
            span.attributes["error.type"] = String(describing: type(of: error))
            if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
            span.end()
            throw error
        }
    }

    /// `traceparent` when it is W3C Trace Context's version 00 form, else nil.
    static func wellFormed(_ value: String?) -> String? {
        guard let value, value.utf8.count == 55 else { return nil }
        let fields = value.split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0] == "00", fields[1].count == 32, fields[2].count == 16, fields[3].count == 2 else { return nil }
        let hex = Set("0123456789abcdef")
        guard fields.allSatisfy({ $0.allSatisfy(hex.contains) }),
              fields[1].contains(where: { $0 != "0" }), fields[2].contains(where: { $0 != "0" }) else { return nil }
        return value
    }
}

extension HTTPField.Name {
    static let traceparent = Self("traceparent")!
}
