import CCurl
import Foundation
import Synchronization

/// A request with its body in memory: API calls, not content downloads.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: Data?
    /// Seconds for the whole exchange.
    public var timeout: Int
    /// The most body bytes accepted, counted after decompression, so a small gzip bomb is cut
    /// off as soon as it unpacks past the limit.
    public var maxResponseBytes: Int
    /// False when only the status and headers matter (a webhook's answer): the transfer stops at
    /// the body's first byte, whatever its size, and the response has an empty body.
    public var wantsBody: Bool

    public init(method: String = "GET", url: String, headers: [(name: String, value: String)] = [], body: Data? = nil, timeout: Int = 60,
                maxResponseBytes: Int = 4 << 20, wantsBody: Bool = true) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.wantsBody = wantsBody
    }
}

/// A response with its body in memory. Header names are lowercased.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: Data
    /// The connections opened for this exchange (0 when it reused one kept open).
    public var connectionsOpened = 0

    /// A 2xx: the request was done.
    public var isSuccess: Bool { (200..<300).contains(status) }

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Sends small API requests with libcurl, one easy handle each, on a background thread.
public struct HTTPClient: Sendable {
    /// Where handles, and with them open connections, wait between requests; nil: a new handle
    /// (and connection) per request.
    let connections: ConnectionCache?

    public init(keepingConnectionsIn connections: ConnectionCache? = nil) {
        self.connections = connections
    }

    /// Sends `request` and returns whatever status the server answered.
    /// - Throws: ``TransferError`` when no complete response arrived.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let connections = self.connections
        return try await onThreadOfItsOwn { try Self.perform(request, connections: connections, stop: $0) }
    }

    /// Sends `request`; a 2xx answer's body is handed to `consume` a piece at a time as it
    /// arrives (decompressed, on the transfer's thread, in order) instead of being kept, so a large
    /// document is never held whole. Any other answer's body is kept in the response, as ``send(_:)``
    /// keeps it, for its error message. An error `consume` throws stops the transfer and is
    /// rethrown as it is.
    /// - Throws: ``TransferError`` when no complete response arrived.
    public func send(_ request: HTTPRequest, consumingSuccessfulBody consume: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void) async throws -> HTTPResponse {
        let connections = self.connections
        return try await onThreadOfItsOwn { try Self.perform(request, connections: connections, consume: consume, stop: $0) }
    }

    /// Sends each turn's requests one after another, and the turns one after another, all on one
    /// thread over the connection each request leaves open for the next. A turn stops after its
    /// first request that fails or is answered with anything but a 2xx (its later requests must
    /// not arrive before it: a webhook endpoint hears of one account's changes in order); nothing
    /// more is sent once `deadline` has passed. Returns the outcome of each request sent, by turn,
    /// in order (a turn's list is shorter than its requests when it stopped early).
    ///
    /// **Performance layer.** Replaces a ``send(_:)`` per request, each on a thread started for it,
    /// for the notification outbox: at 2,100 purchases a second (`BENCH_ONLY=purchases`, a webhook
    /// registered) delivery fell behind, 15,425 waiting after 12 s; with runs on 32 threads a pass,
    /// 141–149 wait (``NotificationDeliveryConfiguration/batch`` has the figures).
    public func sendInTurns(_ turns: [[HTTPRequest]], until deadline: ContinuousClock.Instant) async throws -> [[Result<HTTPResponse, any Error>]] {
        let connections = self.connections
        return try await onThreadOfItsOwn { stop in
            var outcomes: [[Result<HTTPResponse, any Error>]] = []
            for requests in turns {
                var turn: [Result<HTTPResponse, any Error>] = []
                for request in requests {
                    // The first always goes, so that a pass late to start still makes progress.
                    if !(outcomes.isEmpty && turn.isEmpty) && ContinuousClock.now >= deadline { break }
                    if stop.requested { throw CancellationError() }
                    let outcome = Result { try Self.perform(request, connections: connections, stop: stop) }
                    turn.append(outcome)
                    guard case .success(let response) = outcome, response.isSuccess else { break }
                }
                outcomes.append(turn)
            }
            return outcomes
        }
    }

    /// A blocking libcurl call must not hold one of libdispatch's or Swift's few pool threads,
    /// which is what makes many requests at once crawl: it runs on a thread of its own, one kept
    /// from earlier calls when one is idle (``SpareThreads``). Cancelling the calling Task stops the
    /// transfer within a tenth of a second (libcurl asks its progress callback that often, also
    /// while a server that accepted the connection says nothing) and throws `CancellationError`.
    private func onThreadOfItsOwn<T: Sendable>(_ work: @escaping @Sendable (ResponseSink.Stop) throws -> T) async throws -> T {
        let stop = ResponseSink.Stop()
        return try await withTaskCancellationHandler {
            let response = try await withCheckedThrowingContinuation { continuation in
                SpareThreads.shared.run(named: "kiosk-http") { continuation.resume(with: Result { try work(stop) }) }
            }
            return response
        } onCancel: {
            stop.request()
        }
    }

    static func perform(_ request: HTTPRequest, connections: ConnectionCache? = nil, consume: ((UnsafeRawBufferPointer) throws -> Void)? = nil,
                        stop: ResponseSink.Stop = .init()) throws -> HTTPResponse {
        let easy = try connections?.take(for: request.url) ?? CurlEasy(url: request.url)
        defer { connections?.give(easy) }
        let sink = ResponseSink(limit: request.wantsBody ? request.maxResponseBytes : 0, consume: consume, stop: stop)
        let sinkPointer = Unmanaged.passUnretained(sink).toOpaque()
        try easy.set(CURLOPT_WRITEFUNCTION, callback: ResponseSink.onBody)
        try easy.set(CURLOPT_WRITEDATA, pointer: sinkPointer)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: ResponseSink.onHeader)
        try easy.set(CURLOPT_HEADERDATA, pointer: sinkPointer)
        try easy.set(CURLOPT_XFERINFOFUNCTION, progress: ResponseSink.onProgress)
        try easy.set(CURLOPT_XFERINFODATA, pointer: sinkPointer)
        try easy.set(CURLOPT_NOPROGRESS, 0)
        // An empty string asks for every encoding libcurl can decode, and decodes it.
        try easy.set(CURLOPT_ACCEPT_ENCODING, "")
        try easy.set(CURLOPT_CONNECTTIMEOUT, 10)
        try easy.set(CURLOPT_TIMEOUT, request.timeout)
        // Refused before the body when the server declares a larger size (a HEAD has none: its
        // Content-Length is what a GET would send).
        if request.method != "HEAD" && request.wantsBody {
            try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(request.maxResponseBytes))
        }
        switch request.method {
        case "GET": break
        case "HEAD": try easy.set(CURLOPT_NOBODY, 1)
        case "POST": try easy.set(CURLOPT_POST, 1)
        default: try easy.set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        var headers = request.headers
        if let body = request.body {
            try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(body.count))
            // Checked on the bytes: `String.contains` went through Foundation's `range(of:)`, 2 % of
            // the server's time while it delivered 2,000 notifications a second; `Data.contains`
            // then stepped through `Data`'s iterator a byte at a time (0.6 % of the machine at
            // 1,300 a second; gone from the profile on the bytes, 2026-11-28).
            let text = body.withUnsafeBytes { bytes -> String? in
                guard !bytes.contains(0) else { return nil }
                return String(validating: bytes, as: UTF8.self)
            }
            if let text {
                try easy.set(CURLOPT_COPYPOSTFIELDS, text)
            } else {
                throw TransferError(url: request.url, kind: .failed, message: "request bodies must be UTF-8 text")
            }
            if !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                headers.append((name: "Content-Type", value: "application/json"))
            }
        } else if request.method == "POST" {
            try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: 0)
        }
        headers.append((name: "Expect", value: ""))
        try easy.setHeaders(headers)
        do {
            try easy.perform()
        } catch let error as TransferError {
            if stop.requested { throw CancellationError() }
            // Stopped at the first byte of a body not wanted: the answer is its status and headers.
            if !request.wantsBody && sink.overflowed && sink.status > 0 {
                return HTTPResponse(status: sink.status, headers: sink.headers, body: Data())
            }
            // The write callback stopped the transfer: say why, not libcurl's "write error".
            if let consumerError = sink.consumerError { throw consumerError }
            if sink.overflowed || error.message.contains("Maximum file size exceeded") {
                throw TransferError(url: request.url, kind: .tooLarge, message: "the answer is larger than \(request.maxResponseBytes >= 1 << 20 ? "\(request.maxResponseBytes >> 20) MiB" : "\(request.maxResponseBytes >> 10) KiB")")
            }
            throw error
        }
        var response = HTTPResponse(status: easy.info(CURLINFO_RESPONSE_CODE), headers: sink.headers, body: sink.body)
        response.connectionsOpened = easy.info(CURLINFO_NUM_CONNECTS)
        return response
    }
}

/// Easy handles kept between requests, each with the connections it opened: libcurl keeps a
/// connection open in the handle that made it, so a server sending many requests to one endpoint
/// (the publisher's webhooks) reuses connections, and TLS sessions, instead of opening one per
/// request. A handle serves one request at a time; at most `capacity` wait, the rest are closed.
public final class ConnectionCache: Sendable {
    private let idle = Mutex<[IdleHandle]>([])
    private let capacity: Int

    /// A handle is only ever used by the one thread that took it; the lock hands it over.
    private struct IdleHandle: @unchecked Sendable {
        let easy: CurlEasy
    }

    public init(capacity: Int) {
        self.capacity = capacity
    }

    func take(for url: String) throws -> CurlEasy {
        guard let handle = idle.withLock({ $0.popLast() }) else { return try CurlEasy(url: url) }
        try handle.easy.reuse(for: url)
        return handle.easy
    }

    func give(_ easy: CurlEasy) {
        easy.clear()
        let handle = IdleHandle(easy: easy)
        idle.withLock { handles in
            if handles.count < capacity { handles.append(handle) }
        }
    }
}

/// Collects a response's headers and body from libcurl's callbacks.
final class ResponseSink {
    private var head = ResponseHead()
    var headers: [String: String] { head.fields }
    /// The status of the last status line (a 100 Continue or a redirect comes before the answer).
    var status: Int { head.status }
    var body = Data()
    let limit: Int
    /// Takes a 2xx body's pieces instead of `body`.
    let consume: ((UnsafeRawBufferPointer) throws -> Void)?
    private var received = 0
    private(set) var overflowed = false
    private(set) var consumerError: (any Error)?

    /// Set by the caller's Task cancellation; read by the progress callback on the transfer's thread.
    let stop: Stop

    init(limit: Int, consume: ((UnsafeRawBufferPointer) throws -> Void)? = nil, stop: Stop = Stop()) {
        self.limit = limit
        self.consume = consume
        self.stop = stop
    }

    /// A request to stop a transfer, made from any thread.
    final class Stop: Sendable {
        private let flag = Atomic<Bool>(false)
        func request() { flag.store(true, ordering: .relaxed) }
        var requested: Bool { flag.load(ordering: .relaxed) }
    }

    /// Non-zero stops the transfer (libcurl then fails it with "callback aborted").
    static let onProgress: kiosk_curl_xferinfo_callback = { userdata, _, _, _, _ in
        guard let userdata else { return 0 }
        return Unmanaged<ResponseSink>.fromOpaque(userdata).takeUnretainedValue().stop.requested ? 1 : 0
    }

    static let onBody: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let sink = Unmanaged<ResponseSink>.fromOpaque(userdata).takeUnretainedValue()
        let piece = UnsafeRawBufferPointer(start: buffer, count: size * count)
        // Returning short makes libcurl stop the transfer with a write error.
        guard sink.received + piece.count <= sink.limit else {
            sink.overflowed = true
            return 0
        }
        sink.received += piece.count
        if let consume = sink.consume, (200..<300).contains(sink.status) {
            do {
                try consume(piece)
            } catch {
                sink.consumerError = error
                return 0
            }
        } else {
            sink.body.append(contentsOf: piece)
        }
        return piece.count
    }

    static let onHeader: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let sink = Unmanaged<ResponseSink>.fromOpaque(userdata).takeUnretainedValue()
        sink.addHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
        return size * count
    }

    /// One line as libcurl hands it over (``ResponseHead``).
    func addHeaderLine(_ raw: UnsafeRawBufferPointer) {
        head.add(raw)
    }
}
