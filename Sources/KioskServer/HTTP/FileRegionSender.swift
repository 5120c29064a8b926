import Foundation
import KioskCore
import KioskStore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Sends a file's bytes with `sendfile(2)`: the in-process counterpart of nginx's X-Accel-Redirect.
///
/// Hummingbird's response body is a stream of `ByteBuffer`s, so a file sent through it is read
/// into memory and copied out again, a chunk at a time. NIO's HTTP/1 encoder also takes a
/// `FileRegion`, which the channel writes with `sendfile`: the kernel moves the page cache to the
/// socket. A route that answers with a file sets `Kiosk-Sendfile: <first>-<last> <path>` (an
/// inclusive byte range) and an empty body with the range's `Content-Length`; this handler, just
/// above the encoder, takes the field off the head (it never reaches the wire), opens the file and
/// writes the range as a `FileRegion` after the head. The route still decides everything else
/// (receipt, version, range, status); the file is only named, as nginx's internal location is.
///
/// Archives are content-addressed and never rewritten, so the path names the same bytes the route
/// chose; one that went missing (the content folder emptied by hand) is answered 503 in place of
/// the head the route wrote, with nothing sent.
final class FileRegionSender: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The field's name on the NIO side (the route sets it as ``HTTPField/Name/kioskSendfile``).
    static let field = "Kiosk-Sendfile"

    private let metrics: ServerMetrics
    private let ends: SendfileEnds
    private let logger: Logger

    init(metrics: ServerMetrics, ends: SendfileEnds, logger: Logger) {
        self.metrics = metrics
        self.ends = ends
        self.logger = logger
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data), let instruction = head.headers.first(name: Self.field) else {
            context.write(data, promise: promise)
            return
        }
        head.headers.remove(name: Self.field)
        let end = head.headers.first(name: SendfileEnds.field)
        head.headers.remove(name: SendfileEnds.field)
        let region: FileRegion
        do {
            region = try Self.open(instruction)
        } catch {
            logger.error("cannot send a file", metadata: ["error": "\(error)"])
            let (unavailable, body) = Self.unavailable(head, error)
            context.write(wrapOutboundOut(.head(unavailable)), promise: promise)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            ends.finish(end, cut: true)
            return
        }
        context.write(wrapOutboundOut(.head(head)), promise: promise)
        metrics.downloadsInFlight.increment()
        let sent = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: sent)
        let (metrics, ends, logger, bytes) = (self.metrics, self.ends, self.logger, region.readableBytes)
        sent.futureResult.whenComplete { result in
            // The region's descriptor is ours to close once the channel is done with it.
            try? region.fileHandle.close()
            metrics.downloadsInFlight.decrement()
            switch result {
            case .success:
                metrics.bytesServed.increment(by: Int64(bytes))
                ends.finish(end, cut: false)
            case .failure(let error):
                logger.info("a file response was cut", metadata: ["bytes": "\(bytes)", "error": "\(error)"])
                ends.finish(end, cut: true)
            }
        }
    }

    /// Opens `<first>-<last> <path>` as a region, checking the file holds the whole range.
    ///
    /// `open` runs on the event loop, as nginx opens files on its own: a local open is microseconds.
    static func open(_ instruction: String) throws(FileRegionError) -> FileRegion {
        let parts = instruction.split(separator: " ", maxSplits: 1)
        let bounds = parts.first?.split(separator: "-").compactMap { Int($0) } ?? []
        guard parts.count == 2, bounds.count == 2, bounds[0] >= 0, bounds[1] >= bounds[0] else {
            throw FileRegionError(path: "?", problem: "malformed \(field) \"\(instruction)\"")
        }
        let path = String(parts[1])
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw FileRegionError(path: path, problem: String(cString: strerror(errno)))
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_size > bounds[1] else {
            Glibc.close(descriptor)
            throw FileRegionError(path: path, problem: "shorter than the \(bounds[1] + 1) bytes the response needs")
        }
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        return FileRegion(fileHandle: handle, readerIndex: bounds[0], endIndex: bounds[1] + 1)
    }

    /// A 503 (head and JSON body) in place of a response whose file could not be opened.
    private static func unavailable(_ head: HTTPResponseHead, _ error: FileRegionError) -> (HTTPResponseHead, ByteBuffer) {
        let body = (try? JSONEncoder.kiosk.encode(APIError(code: "content_unavailable", message: error.description))) ?? Data()
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Retry-After", value: "60")
        return (HTTPResponseHead(version: head.version, status: .serviceUnavailable, headers: headers), ByteBuffer(bytes: body))
    }
}

/// A file the server meant to send that is gone or shorter than its catalog says.
struct FileRegionError: Error, CustomStringConvertible {
    let path: String
    let problem: String
    var description: String { "the archive \(path) cannot be sent (\(problem)); the publisher should run kiosk serve again over its Content folder" }
}

extension HTTPField.Name {
    /// ``FileRegionSender``'s field: a valid token, so never nil.
    static let kioskSendfile = HTTPField.Name(FileRegionSender.field)
    /// ``SendfileEnds``'s field: a valid token, so never nil.
    static let kioskSendfileEnd = HTTPField.Name(SendfileEnds.field)
}

/// Hummingbird's HTTP/1 channel with a ``FileRegionSender`` put in just above NIO's encoder, below
/// the conversion to Swift HTTP Types (which carries only `ByteBuffer` bodies), behind a
/// ``BytesResponder`` that answers what it can from the bytes first.
struct SendfileHTTP1Channel: ServerChildChannel {
    /// A connection, and its HTTP stack once it has one (see ``setup(channel:logger:)``).
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        let stack: StackHandOff
    }
    let front: ConnectionFront

    /// Puts only ``BytesResponder`` on a new connection; the HTTP stack (NIO's codec, the
    /// conversion to Swift HTTP Types, Hummingbird's connection state) joins when the connection
    /// first asks what that handler does not answer. Until then Hummingbird's task for the
    /// connection waits in ``handle(value:logger:)``, its stack one frame deep; it ends without a
    /// word if the connection closes first.
    ///
    /// Replaces setting the whole stack up at accept: with it, a connection that only ever asks
    /// for the catalog's 304s or holds a long poll (``HeldFeedPoll``) cost 16–17 KiB of server
    /// memory doing nothing (`heaptrack`, 2,000 connections answered from their bytes,
    /// 2026-11-30: a task of Hummingbird's with its slabs, the async channel's buffers, the
    /// codec's), the floor under a waiting device's cost (docs/benchmarks.md section 8).
    /// Hummingbird's graceful shutdown still reaches such a connection: its quiescing handler,
    /// on the listening channel, sees every accepted connection, and its task group waits for the
    /// task that waits here.
    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let front = front
        return channel.eventLoop.makeCompletedFuture {
            // The buffer a connection reads into is kept with it between reads; a device's
            // requests are a few hundred bytes (NIO starts at 2 KiB and grows it when reads fill it).
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.readBuffers)
            let handOff = StackHandOff()
            try channel.pipeline.syncOperations.addHandler(BytesResponder(front: front, handOff: handOff))
            return Value(channel: channel, stack: handOff)
        }
    }

    /// How a connection's reads are sized: 512 bytes first, growing as reads fill them.
    static let readBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    func handle(value: Value, logger: Logger) async {
        guard let stack = await value.stack.stack() else { return }
        await Self.serve(stack, base: front.base, logger: logger)
    }

    /// Hummingbird's connection loop, in a frame of its own: inlined into ``handle(value:logger:)``
    /// it made the frame that waits for the stack as large as the loop's.
    @inline(never)
    private static func serve(_ stack: HTTP1Channel.Value, base: HTTP1Channel, logger: Logger) async {
        await base.handle(value: stack, logger: logger)
    }
}

/// What every connection's ``BytesResponder`` shares, and how its HTTP stack is set up.
final class ConnectionFront: Sendable {
    let base: HTTP1Channel
    let metrics: ServerMetrics
    let ends: SendfileEnds
    /// For the catalog's 304s answered on the event loop (``CatalogNotModifiedResponder``).
    let catalog: CatalogService
    let rateLimits: RateLimits
    /// The shop's pages kept for the catalog served now.
    let shop: ShopPageResponder
    /// The store whose change feed's long polls are held on the event loop (``HeldFeedPoll``), or nil.
    let feed: HeldFeed?
    let logger: Logger
    var idleTimeout: TimeAmount? { base.configuration.idleTimeout }

    init(base: HTTP1Channel, metrics: ServerMetrics, ends: SendfileEnds, catalog: CatalogService, rateLimits: RateLimits,
         shopPages: RenderedPages, feed: HeldFeed?, logger: Logger) {
        self.base = base
        self.metrics = metrics
        self.ends = ends
        self.catalog = catalog
        self.rateLimits = rateLimits
        self.shop = ShopPageResponder(pages: shopPages, catalog: catalog, rateLimits: rateLimits)
        self.feed = feed
        self.logger = logger
    }

    /// The HTTP stack behind ``BytesResponder``. HTTP1Channel adds its handlers at once on the
    /// event loop (a completed future), so they are in place when the bytes go up.
    func stack(_ channel: any Channel) -> EventLoopFuture<HTTP1Channel.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { [self] (value: HTTP1Channel.Value) -> HTTP1Channel.Value in
            let pipeline = channel.pipeline.syncOperations
            let encoder = try pipeline.handler(type: HTTPResponseEncoder.self)
            try pipeline.addHandler(FileRegionSender(metrics: metrics, ends: ends, logger: logger), position: .after(encoder))
            let state = try pipeline.handler(type: HTTPConnectionStateHandler.self)
            let responder = EventLoopResponder([CatalogNotModifiedResponder(catalog: catalog, rateLimits: rateLimits), shop],
                                               metrics: metrics, logger: logger)
            try pipeline.addHandler(responder, position: .after(state))
            return value
        }
    }
}

/// Hands a connection's HTTP stack from the event loop (``BytesResponder``, once it is set up)
/// to Hummingbird's task for the connection, which waits for it; nil when the connection ended
/// first. A continuation in a lock, not a future: waiting on a future's `get()` took a second
/// kilobyte slab of the task's stack (`heaptrack`, 2026-11-30).
final class StackHandOff: Sendable {
    private enum State {
        case waiting(UnsafeContinuation<HTTP1Channel.Value?, Never>?)
        case given(HTTP1Channel.Value?)
    }
    private let state = Mutex(State.waiting(nil))

    /// The stack, or nil; the first call wins.
    func give(_ stack: HTTP1Channel.Value?) {
        let waiting = state.withLock { state -> UnsafeContinuation<HTTP1Channel.Value?, Never>?? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .given(stack)
            return .some(continuation)
        }
        if case .some(.some(let continuation)) = waiting { continuation.resume(returning: stack) }
    }

    /// Waits for ``give(_:)``; one caller.
    func stack() async -> HTTP1Channel.Value? {
        await withUnsafeContinuation { continuation in
            let given = state.withLock { state -> HTTP1Channel.Value?? in
                if case .given(let stack) = state { return .some(stack) }
                state = .waiting(continuation)
                return nil
            }
            if case .some(let stack) = given { continuation.resume(returning: stack) }
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1 whose responses can name a file to send with `sendfile` (see ``FileRegionSender``).
    static func http1WithSendfile(configuration: HTTP1Channel.Configuration, metrics: ServerMetrics, ends: SendfileEnds,
                                  catalog: CatalogService, rateLimits: RateLimits, shopPages: RenderedPages, feed: HeldFeed?,
                                  logger: Logger) -> HTTPServerBuilder {
        .init { responder in
            SendfileHTTP1Channel(front: ConnectionFront(
                base: HTTP1Channel(responder: responder, configuration: configuration), metrics: metrics, ends: ends,
                catalog: catalog, rateLimits: rateLimits, shopPages: shopPages, feed: feed, logger: logger))
        }
    }
}
