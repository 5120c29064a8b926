import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

/// One answer made on the connection's event loop: the response's head, its body (none for a 304
/// or a HEAD) and its log line.
struct EventLoopAnswer {
    var head: HTTPResponse
    var body: ByteBuffer?
    var line: RequestLine
}

/// What answers some requests on the event loop, before Hummingbird, when it certainly answers
/// them as the router would: the catalog's 304s (``CatalogNotModifiedResponder``), the shop's
/// kept pages (``ShopPageResponder``). Nil passes the request on. `date` is the connection's
/// `Date` text, asked only for an answer (most requests are not answered here).
protocol EventLoopAnswerer {
    func answer(_ request: HTTPRequest, context: ChannelHandlerContext, date: inout HTTPDateText) -> EventLoopAnswer?
}

/// Asks its answerers for each request's answer on the event loop, and writes it, as nginx
/// answers a conditional GET or a file: no thread switch into Swift concurrency's pool and back,
/// no router, no middleware. Everything an answerer does not take goes up untouched.
///
/// It answers only when no earlier request of the connection is still being answered, so
/// pipelined responses stay in order, and the connection can take more writes, so a client that
/// never reads is held back by the router's reading (one pipelining 304s and never reading grew the
/// server's memory without bound). A request is answered at its head, as the router answers (a body
/// or an `Expect: 100-continue` does not hold it back); its remaining parts are dropped. It sits
/// last before Hummingbird's own handler, after its connection state handler, which so sees every
/// request and response and keeps its idle timeout and graceful shutdown right.
final class EventLoopResponder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let answerers: [any EventLoopAnswerer]
    private let metrics: ServerMetrics
    private let logger: Logger
    /// Requests passed up whose response has not ended yet.
    private var inFlight = 0
    /// A request answered here whose remaining parts (a body) are still to be dropped.
    private var dropping = false
    private var date = HTTPDateText()

    init(_ answerers: [any EventLoopAnswerer], metrics: ServerMetrics, logger: Logger) {
        self.answerers = answerers
        self.metrics = metrics
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            if !dropping, inFlight == 0, context.channel.isWritable, let answer = answer(request, context: context) {
                dropping = true
                context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
                if let body = answer.body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                answer.line.write(logger, metrics: metrics, bytes: answer.body?.readableBytes ?? 0)
                metrics.request(route: answer.line.route, method: answer.line.method, status: answer.line.status)
                return
            }
            inFlight += 1
        case .body:
            if dropping { return }
        case .end:
            if dropping {
                dropping = false
                return
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), inFlight > 0 {
            inFlight -= 1
        }
        context.write(data, promise: promise)
    }

    private func answer(_ request: HTTPRequest, context: ChannelHandlerContext) -> EventLoopAnswer? {
        for answerer in answerers {
            if let answer = answerer.answer(request, context: context, date: &date) { return answer }
        }
        return nil
    }
}
