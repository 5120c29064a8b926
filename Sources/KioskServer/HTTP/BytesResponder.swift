import Foundation
import HTTPTypes
import KioskStore
import Logging
import NIOCore

/// Answers a connection's first requests from their bytes, first in the pipeline, while they are
/// conditional GETs of the catalog or the shop's kept pages, and holds a change feed long poll
/// sent that way (``HeldFeedPoll``); at the first other request it hands the connection to the
/// HTTP stack, which is set up only then (``SendfileHTTP1Channel``), and leaves.
///
/// Replaces, for a device that opens a connection to ask whether the catalog changed (what every
/// sync does first, and most of what a store's server is asked), the whole HTTP stack's path:
/// llhttp, the conversion to Swift HTTP Types and back, Hummingbird's connection state, NIO's
/// encoder and ``CatalogNotModifiedResponder``. With that responder alone `kiosk serve` answered
/// 21,500–23,700 304s a second at 62 µs of its CPU each, where nginx answered 56,300–60,000 the
/// same file at 19 µs (`wrk -t2 -c32`, 2026-11-28 00:00); writing a fixed 304 from the raw bytes,
/// as a ceiling, took 10–12 µs. The shop's kept pages took the same way once
/// ``ShopPageResponder`` alone left a product's page at 0.46 × nginx (27 µs of CPU a page, most
/// of it the same stack; docs/benchmarks.md section 15). Measured figures: docs/benchmarks.md.
///
/// What stays the same: the answer (``CatalogNotModifiedResponder/fields(etag:date:)``; a kept
/// page's status line and fields, made once with the page, ``RenderedPages/Page``), the log line,
/// the metrics, and what the connection's idle timeout and a graceful shutdown do. While this
/// handler answers, the connection has no other request in flight and nothing is buffered in the
/// HTTP stack, so it keeps the idle timeout itself (from its last answer) and closes at once on a
/// graceful shutdown; Hummingbird's `HTTPConnectionStateHandler` joins the pipeline when the
/// connection is handed over (it counts only requests it sees, so it would close a connection busy
/// with these as idle). A request it does not certainly recognise (``RawGet``), one whose
/// `If-None-Match` is not the catalog served now, a page not kept yet, a connection that cannot
/// take more writes (a client pipelining and not reading: the stack's reading then holds it back):
/// everything from that byte on goes to the stack, in order, after the answers already written.
///
/// Known and left: the state handler's idle timer starts when it joins, so a request whose
/// first bytes arrive just before the idle timeout and the rest slowly can hold the connection
/// up to twice the timeout, once per connection (Hummingbird's handler takes no earlier start).
final class BytesResponder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What every connection's handler shares, made once per server: one reference a
    /// connection, not a copy of each (a waiting device's memory counts every byte here).
    private let front: ConnectionFront
    /// Given the HTTP stack once it is set up behind this handler (see the type), or told the
    /// connection ended first, so it never will be.
    private let handOff: StackHandOff
    private var handedOver = false
    private var catalog: CatalogService { front.catalog }
    private var shop: ShopPageResponder { front.shop }
    private var metrics: ServerMetrics { front.metrics }
    private var logger: Logger { front.logger }
    private var rateLimits: RateLimits { front.rateLimits }
    private var idleTimeout: TimeAmount? { front.idleTimeout }
    /// The store whose change feed a held poll reads (``HeldFeedPoll``); nil holds none here (a
    /// server exporting traces lets the stack answer polls, with their spans).
    private var feed: HeldFeed? { front.feed }
    /// The long poll being held, from its request until its answer is written.
    private var poll: HeldPollState?
    /// Bytes that came after a held poll's request, read once it is answered.
    private var afterPoll: ByteBuffer?
    /// A graceful shutdown, or the client's half-closure, came while a poll was held: the
    /// connection closes after its answer.
    private var closeAfterPoll = false
    /// The client closed its side while a poll was held: the poll answers what is there at once
    /// instead of waiting (a client that half-closes after its request still gets its answer,
    /// and one that went away lets its waiter go).
    private var inputClosed = false
    /// A read the channel asked for while more than a request's worth of bytes waited behind a
    /// held poll: asked again once the poll is answered (reading stops meanwhile, as the HTTP
    /// stack's does for a client that pipelines and does not read).
    private var readHeld = false

    private var lastAnswer = NIODeadline.now()
    private var idleCheck: Scheduled<Void>?
    private var peerClient: String??
    private var date = HTTPDateText()
    /// The encoded 304s for the served tags and the current second, plain and gzip.
    private var encoded: (tags: CatalogService.ServedTags, second: Int, plain: ByteBuffer, gzip: ByteBuffer)?
    /// A kept page's last fields, `Date` and `Server`, and the empty line, for the current second.
    private var pageTail: (second: Int, bytes: ByteBuffer)?

    init(front: ConnectionFront, handOff: StackHandOff) {
        self.front = front
        self.handOff = handOff
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { scheduleIdleCheck(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        lastAnswer = .now()
        scheduleIdleCheck(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        if !handedOver { handOff.give(nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard poll == nil else {
            // A client that sends more while its poll is held: kept, in order, for after the
            // answer; past a request's worth, the channel stops reading (see `read`).
            if afterPoll == nil { afterPoll = buffer } else { afterPoll?.writeBuffer(&buffer) }
            return
        }
        read(&buffer, context: context, inReadCycle: true)
    }

    /// - Parameter inReadCycle: false for bytes kept while a poll was held, read after its answer:
    ///   the stack above delivers what it read on the read cycle's end, so one is fired for them.
    private func read(_ buffer: inout ByteBuffer, context: ChannelHandlerContext, inReadCycle: Bool) {
        var answered = false
        while buffer.readableBytes > 0, context.channel.isWritable,
              let request = buffer.withUnsafeReadableBytes({ RawGet($0) }) {
            if let feed, let held = HeldFeedPoll(request) {
                buffer.moveReaderIndex(forwardBy: request.length)
                if answered { context.flush() }
                if buffer.readableBytes > 0 { afterPoll = buffer }
                hold(held, request: request, feed: feed, context: context)
                return
            }
            guard !request.hasAuthorization, answer(request, context: context) else { break }
            buffer.moveReaderIndex(forwardBy: request.length)
            answered = true
            lastAnswer = .now()
        }
        if answered { context.flush() }
        guard buffer.readableBytes > 0 else { return }
        // Something else: from here on the HTTP stack reads this connection.
        handedOver = true
        let handOff = handOff
        front.stack(context.channel).whenComplete { handOff.give(try? $0.get()) }
        context.fireChannelRead(wrapInboundOut(buffer))
        if !inReadCycle { context.fireChannelReadComplete() }
        resumeReading(context)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if poll != nil, (afterPoll?.readableBytes ?? 0) > RawGet.maximumLength {
            readHeld = true
            return
        }
        context.read()
    }

    /// Reading goes on if it was held behind a poll.
    private func resumeReading(_ context: ChannelHandlerContext) {
        guard readHeld else { return }
        readHeld = false
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The device went away while its poll waited: nothing will read the answer.
        if let poll, let waiter = poll.waiter {
            poll.timeout?.cancel()
            feed?.store.changes.endWait(waiter, because: .cancelled)
        }
        poll = nil
        if !handedOver {
            handedOver = true
            handOff.give(nil)
        }
        context.fireChannelInactive()
    }

    // MARK: A held poll (``HeldFeedPoll``)

    private func hold(_ held: HeldFeedPoll, request: RawGet, feed: HeldFeed, context: ChannelHandlerContext) {
        let line = RequestLine(method: "GET", route: HeldFeedPoll.route, status: 0, started: .now, account: nil,
                               client: clientAddress(request, context: context), agent: request.userAgent)
        let state = HeldPollState(poll: held, line: line)
        poll = state
        idleCheck?.cancel()
        idleCheck = nil
        let (handler, loop, logger) = (NIOLoopBound(self, eventLoop: context.eventLoop), context.loopBound, logger)
        let (bound, eventLoop) = (NIOLoopBound(state, eventLoop: context.eventLoop), context.eventLoop)
        Task {
            let step = await held.firstLook(feed, logger: logger)
            eventLoop.execute { handler.value.next(step, for: bound.value, context: loop.value) }
        }
    }

    /// Answers, or waits for the account's next change or the deadline.
    private func next(_ step: HeldFeedPoll.Step, for state: HeldPollState, context: ChannelHandlerContext) {
        guard poll === state, let feed else {
            // The connection closed meanwhile: a waiter it registered is let go.
            if case .wait(let waiter, _) = step { feed?.store.changes.endWait(waiter, because: .cancelled) }
            return
        }
        switch step {
        case .answer(let answer):
            finish(state, answer: answer, context: context)
        case .wait(let waiter, let account):
            state.waiter = waiter
            // The client closed its side during the first look: it waits no longer.
            if inputClosed { feed.store.changes.endWait(waiter, because: .cancelled) }
            let (handler, loop, logger) = (NIOLoopBound(self, eventLoop: context.eventLoop), context.loopBound, logger)
            let (bound, poll, deadline, changes) = (NIOLoopBound(state, eventLoop: context.eventLoop), state.poll, state.deadline, feed.store.changes)
            let eventLoop = context.eventLoop
            state.timeout = context.eventLoop.scheduleTask(deadline: deadline) { changes.endWait(waiter, because: .timeout) }
            waiter.whenWoken { reason in
                eventLoop.execute {
                    let state = bound.value
                    guard handler.value.poll === state else { return }
                    state.timeout?.cancel()
                    state.timeout = nil
                    state.waiter = nil
                    changes.endWait(waiter, because: reason)
                    Task {
                        let step = await poll.afterWake(reason, account: account, deadline: deadline, feed: feed, logger: logger)
                        eventLoop.execute { handler.value.next(step, for: bound.value, context: loop.value) }
                    }
                }
            }
        }
    }

    private func finish(_ state: HeldPollState, answer: HeldFeedPoll.Answer, context: ChannelHandlerContext) {
        poll = nil
        let bytes = HeldFeedPoll.encode(answer, date: date.now(), allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        var line = state.line
        line.status = answer.status.code
        line.account = answer.account
        line.write(logger, metrics: metrics, bytes: answer.body.count)
        metrics.request(route: line.route, method: line.method, status: line.status)
        lastAnswer = .now()
        if closeAfterPoll {
            context.close(promise: nil)
            return
        }
        scheduleIdleCheck(context)
        if var rest = afterPoll {
            afterPoll = nil
            read(&rest, context: context, inReadCycle: false)
        }
        resumeReading(context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client closed its side (Hummingbird allows a remote half-closure): no request is
        // coming. A held poll is answered first, at once with what is there (a client that sends
        // its request and half-closes still gets the answer; one that went away lets its waiter go).
        if let event = event as? ChannelEvent, event == .inputClosed {
            guard let poll else {
                context.close(promise: nil)
                return
            }
            // A held poll answers what is there now, then the connection closes.
            inputClosed = true
            closeAfterPoll = true
            if let waiter = poll.waiter { feed?.store.changes.endWait(waiter, because: .cancelled) }
            return
        }
        // A graceful shutdown: nothing of this connection is in flight, so it closes now, as
        // Hummingbird's state handler closes a connection with no request in progress.
        if event is ChannelShouldQuiesceEvent {
            // A held poll answers first: the store wakes every poll as it stops.
            if poll != nil {
                closeAfterPoll = true
            } else {
                context.close(promise: nil)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Writes `request`'s answer and its log line; false, having written nothing, when it is
    /// neither a catalog 304 nor a kept page.
    private func answer(_ request: RawGet, context: ChannelHandlerContext) -> Bool {
        let method = request.isHead ? "HEAD" : "GET"
        if request.target == CatalogNotModifiedResponder.route {
            guard let answer = notModified(request, context: context) else { return false }
            context.write(wrapOutboundOut(answer), promise: nil)
            let line = RequestLine(method: method, route: CatalogNotModifiedResponder.route, status: 304,
                                   started: .now, account: nil, client: clientAddress(request, context: context), agent: request.userAgent)
            CatalogNotModifiedResponder.record(line, logger: logger, metrics: metrics)
            return true
        }
        guard let kept = shop.kept(request.target, ifNoneMatch: request.ifNoneMatch) else { return false }
        let notModified = kept.status == .notModified
        context.write(wrapOutboundOut(notModified ? kept.page.encodedNotModifiedHead : kept.page.encodedHead), promise: nil)
        context.write(wrapOutboundOut(pageTail(context)), promise: nil)
        let body = notModified || request.isHead ? nil : kept.page.body
        if let body { context.write(wrapOutboundOut(body), promise: nil) }
        let line = RequestLine(method: method, route: kept.route, status: kept.status.code, started: .now, account: nil,
                               client: clientAddress(request, context: context), agent: request.userAgent)
        line.write(logger, metrics: metrics, bytes: body?.readableBytes ?? 0)
        metrics.request(route: kept.route, method: method, status: kept.status.code)
        return true
    }

    /// `Date` and `Server`, as ``ShopPageResponder`` adds them after a page's fields, and the empty line.
    private func pageTail(_ context: ChannelHandlerContext) -> ByteBuffer {
        let dateText = date.now()
        if let pageTail, pageTail.second == date.second { return pageTail.bytes }
        var bytes = context.channel.allocator.buffer(capacity: 64)
        bytes.writeString("Date: \(dateText)\r\nServer: kiosk\r\n\r\n")
        pageTail = (date.second, bytes)
        return bytes
    }

    /// The encoded 304 for `request`, or nil when its `If-None-Match` is not the catalog served now.
    private func notModified(_ request: RawGet, context: ChannelHandlerContext) -> ByteBuffer? {
        guard let (tags, gzip) = CatalogNotModifiedResponder.current(catalog, ifNoneMatch: request.ifNoneMatch,
                                                                     acceptEncoding: request.acceptEncoding)
        else { return nil }
        let dateText = date.now()
        if encoded?.tags != tags || encoded?.second != date.second {
            encoded = (tags, date.second, Self.encode(etag: tags.plain, date: dateText, allocator: context.channel.allocator),
                       Self.encode(etag: tags.gzip, date: dateText, allocator: context.channel.allocator))
        }
        guard let encoded else { return nil }
        return gzip ? encoded.gzip : encoded.plain
    }

    /// The 304's bytes, as NIO's encoder writes ``CatalogNotModifiedResponder``'s.
    static func encode(etag: String, date: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 256)
        buffer.writeString("HTTP/1.1 304 Not Modified\r\n")
        for (name, value) in CatalogNotModifiedResponder.fields(etag: etag, date: date) {
            buffer.writeString("\(name.rawName): \(value)\r\n")
        }
        buffer.writeString("\r\n")
        return buffer
    }

    /// The client's address for the log line, as the rate limits name it. Without
    /// `X-Forwarded-For` it is the peer's, the same for every request of the connection, so it is
    /// worked out once (it was 2.6 % of the server's time for each 304).
    private func clientAddress(_ request: RawGet, context: ChannelHandlerContext) -> String? {
        guard request.forwardedFor.isEmpty else {
            return rateLimits.clientAddress(peer: context.channel.remoteAddress?.ipAddress, forwardedFor: request.forwardedFor)
        }
        if let peerClient { return peerClient }
        let client = rateLimits.clientAddress(peer: context.channel.remoteAddress?.ipAddress, forwardedFor: nil)
        peerClient = .some(client)
        return client
    }

    /// Closes the connection once it has been idle for the timeout (no request answered and none
    /// begun: this handler holds no partial request).
    private func scheduleIdleCheck(_ context: ChannelHandlerContext) {
        guard let idleTimeout, idleCheck == nil else { return }
        idleCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: lastAnswer + idleTimeout) { [self] in
            idleCheck = nil
            // A held poll is being answered, not idle; its answer schedules the next check.
            guard poll == nil else { return }
            if NIODeadline.now() >= lastAnswer + idleTimeout {
                context.close(promise: nil)
            } else {
                scheduleIdleCheck(context)
            }
        }
    }
}

/// The `Date` field's text (RFC 9110 §5.6.7), made once a second.
struct HTTPDateText {
    private(set) var second = -1
    private var text = ""

    mutating func now() -> String {
        let now = time(nil)
        guard Int(now) != second else { return text }
        second = Int(now)
        var seconds = now
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        text = "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
        return text
    }
}
