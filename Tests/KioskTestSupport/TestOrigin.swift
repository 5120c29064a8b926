import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore

/// An HTTP origin serving one file at `/file`, which a test can make misbehave.
public final class TestOrigin: @unchecked Sendable {
    public enum Behaviour: Sendable, Equatable {
        /// Ranges per RFC 9110, with If-Range.
        case normal
        /// Always the whole body with 200, whatever the Range.
        case ignoresRanges
        /// A 206 that starts 100 bytes before the requested offset.
        case wrongOffset
        /// 503 with Retry-After.
        case unavailable(retryAfter: Int)
        /// Sends this many bytes of the body, then stops sending (the connection stays open).
        case stallAfter(Int)
        /// Sends this many bytes of the body, then drops the connection.
        case resetAfter(Int)
        /// 416 with `bytes */SIZE` for any Range.
        case unsatisfiable(size: Int)
    }

    private let lock = NSLock()
    private var _content: Data
    private var _behaviour = Behaviour.normal
    private var _bytesSent = 0
    private var _ranges: [String?] = []
    /// Bumped whenever the content changes, so the ETag changes with it.
    private var _version = 1

    init(content: Data) {
        _content = content
    }

    public var content: Data {
        get { lock.withLock { _content } }
        set { lock.withLock { _content = newValue; _version += 1 } }
    }

    public var behaviour: Behaviour {
        get { lock.withLock { _behaviour } }
        set { lock.withLock { _behaviour = newValue } }
    }

    /// Body bytes sent over all requests.
    public var bytesSent: Int { lock.withLock { _bytesSent } }
    /// The Range header of every request, in order.
    public var ranges: [String?] { lock.withLock { _ranges } }

    public var etag: String { lock.withLock { "\"v\(_version)\"" } }

    /// Runs the origin on 127.0.0.1 and a free port for the length of `body`.
    public static func run<T: Sendable>(content: Data, _ body: @Sendable (TestOrigin, String) async throws -> T) async throws -> T {
        let origin = TestOrigin(content: content)
        let router = Router(context: BasicRequestContext.self)
        router.get("file") { request, _ in origin.respond(request) }
        return try await LoopbackServer.run(router, label: "kiosk.test-origin") { port in
            try await body(origin, "http://127.0.0.1:\(port)/file")
        }
    }

    private func respond(_ request: Request) -> Response {
        let (content, behaviour, etag) = lock.withLock { (_content, _behaviour, "\"v\(_version)\"") }
        let range = request.headers[.range]
        lock.withLock { _ranges.append(range) }
        var headers: HTTPFields = [.eTag: etag, .acceptRanges: "bytes"]

        var start = 0
        if let range, range.hasPrefix("bytes="), let value = Int(range.dropFirst(6).dropLast()), range.hasSuffix("-") {
            let ifRange = request.headers[.ifRange]
            if ifRange == nil || ifRange == etag { start = value }
        }
        switch behaviour {
        case .unavailable(let retryAfter):
            return Response(status: .serviceUnavailable, headers: [.retryAfter: String(retryAfter)], body: ResponseBody(byteBuffer: ByteBuffer(string: "busy")))
        case .unsatisfiable(let size):
            headers[.contentRange] = "bytes */\(size)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .ignoresRanges:
            start = 0
        case .wrongOffset:
            start = max(0, start - 100)
            headers[.contentRange] = "bytes \(start)-\(content.count - 1)/\(content.count)"
            return Response(status: .partialContent, headers: headers, body: body(content, from: start, behaviour: .normal))
        case .normal, .stallAfter, .resetAfter:
            if start >= content.count, start > 0 {
                headers[.contentRange] = "bytes */\(content.count)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
        }
        if start > 0 {
            headers[.contentRange] = "bytes \(start)-\(content.count - 1)/\(content.count)"
            return Response(status: .partialContent, headers: headers, body: body(content, from: start, behaviour: behaviour))
        }
        return Response(status: .ok, headers: headers, body: body(content, from: 0, behaviour: behaviour))
    }

    private func body(_ content: Data, from start: Int, behaviour: Behaviour) -> ResponseBody {
        ResponseBody(contentLength: content.count - start) { writer in
            var position = start
            var sentThisResponse = 0
            while position < content.count {
                var chunk = min(64 << 10, content.count - position)
                switch behaviour {
                case .stallAfter(let limit), .resetAfter(let limit):
                    if sentThisResponse >= limit {
                        if case .stallAfter = behaviour { try await Task.sleep(for: .seconds(60)) }
                        throw CancellationError()
                    }
                    chunk = min(chunk, limit - sentThisResponse)
                default: break
                }
                try await writer.write(ByteBuffer(bytes: content[position..<(position + chunk)]))
                position += chunk
                sentThisResponse += chunk
                self.lock.withLock { self._bytesSent += chunk }
            }
            try await writer.finish(nil)
        }
    }

    /// Deterministic bytes that do not compress: a SHA-256 chain.
    public static func incompressible(_ count: Int, seed: String = "kiosk") -> Data {
        var data = Data(capacity: count + 32)
        var block = Data(seed.utf8)
        while data.count < count {
            block = Data(Self.sha256(block))
            data.append(block)
        }
        return data.prefix(count)
    }

    private static func sha256(_ data: Data) -> [UInt8] {
        var hasher = Crypto.SHA256()
        hasher.update(data: data)
        return Array(hasher.finalize())
    }
}
