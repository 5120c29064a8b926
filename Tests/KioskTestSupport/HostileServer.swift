import Foundation
import Hummingbird
import Logging
import NIOCore

/// A server that answers whatever a test scripts, the way a hostile or broken store might:
/// any catalog body with any headers, streamed so a huge one costs the test nothing.
public final class HostileServer: @unchecked Sendable {
    /// One scripted answer: headers and a body produced chunk by chunk.
    public struct Answer: Sendable {
        public var status: HTTPResponse.Status = .ok
        public var headers: HTTPFields = [.contentType: "application/json"]
        public var chunks: @Sendable () -> AnyIterator<Data>
        /// Waited before each chunk after the first: a slow server.
        public var pause: Duration = .zero

        public init(status: HTTPResponse.Status = .ok, headers: HTTPFields = [.contentType: "application/json"], pause: Duration = .zero, chunks: @escaping @Sendable () -> AnyIterator<Data>) {
            self.status = status
            self.headers = headers
            self.pause = pause
            self.chunks = chunks
        }

        /// `text` in `count` chunks of about equal size, `pause` apart.
        public static func slowJSON(_ text: String, chunks count: Int, pause: Duration) -> Answer {
            let bytes = Data(text.utf8)
            let size = (bytes.count + count - 1) / count
            let pieces = stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min($0 + size, bytes.count)] }
            return Answer(pause: pause) { AnyIterator(pieces.makeIterator()) }
        }

        public static func json(_ text: String) -> Answer {
            Answer { AnyIterator([Data(text.utf8)].makeIterator()) }
        }

        /// `{"products": [], "padding": "   …"}` of about `bytes` bytes, never held whole.
        public static func huge(_ bytes: Int) -> Answer {
            Answer {
                var sent = 0
                let space = Data(repeating: 0x20, count: 1 << 20)
                var started = false
                return AnyIterator {
                    if !started { started = true; return Data(#"{"products": [], "padding": ""#.utf8) }
                    if sent >= bytes { sent = -1; return Data("\"}".utf8) }
                    if sent < 0 { return nil }
                    sent += space.count
                    return space
                }
            }
        }

        /// A file's bytes, sent as they are with extra headers (a gzip bomb with Content-Encoding).
        public static func file(_ url: URL, headers: HTTPFields) -> Answer {
            Answer(headers: headers) {
                let handle = try? FileHandle(forReadingFrom: url)
                return AnyIterator {
                    guard let data = try? handle?.read(upToCount: 1 << 20), !data.isEmpty else { return nil }
                    return data
                }
            }
        }
    }

    private let lock = NSLock()
    private var _catalog = Answer.json(#"{"products": []}"#)
    private var _chunksSent = 0

    private var _content: Answer?

    /// What `GET /v1/content/…` answers; nil answers like any other path.
    public var content: Answer? {
        get { lock.withLock { _content } }
        set { lock.withLock { _content = newValue } }
    }

    /// An endless body of `byte`s in 64 KiB chunks, with no Content-Length: a proxy gone wrong.
    public static func endless(_ byte: UInt8 = 0x41) -> Answer {
        Answer(headers: [.contentType: "application/octet-stream"]) {
            let chunk = Data(repeating: byte, count: 64 << 10)
            return AnyIterator { chunk }
        }
    }

    /// Catalog chunks written so far, over every answer.
    public var chunksSent: Int { lock.withLock { _chunksSent } }

    /// What `GET /v1/catalog` answers.
    public var catalog: Answer {
        get { lock.withLock { _catalog } }
        set { lock.withLock { _catalog = newValue } }
    }

    /// Runs on 127.0.0.1 and a free port for the length of `body`. Any other GET path answers
    /// `pwned` as a file, for download-name tests.
    public static func run<T: Sendable>(_ body: @Sendable (HostileServer, String) async throws -> T) async throws -> T {
        let server = HostileServer()
        let router = Router(context: BasicRequestContext.self)
        router.get("v1/catalog") { _, _ in server.respond(server.catalog) }
        router.get("v1/content/**") { _, _ in
            guard let content = server.content else { return Response(status: .ok, headers: [.contentType: "text/plain"], body: ResponseBody(byteBuffer: ByteBuffer(string: "pwned\n"))) }
            return server.respond(content)
        }
        router.get("**") { _, _ in Response(status: .ok, headers: [.contentType: "text/plain"], body: ResponseBody(byteBuffer: ByteBuffer(string: "pwned\n"))) }
        return try await LoopbackServer.run(router, label: "kiosk.test-hostile") { port in
            try await body(server, "http://127.0.0.1:\(port)")
        }
    }

    private func respond(_ answer: Answer) -> Response {
        Response(status: answer.status, headers: answer.headers, body: ResponseBody { writer in
            let chunks = answer.chunks()
            var first = true
            while let chunk = chunks.next() {
                if !first && answer.pause > .zero { try await Task.sleep(for: answer.pause) }
                first = false
                try await writer.write(ByteBuffer(bytes: chunk))
                self.lock.withLock { self._chunksSent += 1 }
            }
            try await writer.finish(nil)
        })
    }
}
