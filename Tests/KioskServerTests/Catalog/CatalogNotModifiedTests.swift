import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The catalog's 304 answered on the event loop (``CatalogNotModifiedResponder``), seen from a
/// raw connection: the same answer as the route's, in order among pipelined requests.
@Suite("Catalog 304s on the event loop")
struct CatalogNotModifiedTests {
    /// One response read off a raw connection.
    struct Answer {
        let status: Int
        let headers: [String: String]
        let body: [UInt8]
    }

    static func withServer(requestTimeout: Int = 30, _ body: @escaping @Sendable (_ port: Int, _ url: String) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.requestHeaderTimeout = requestTimeout
        try await LiveServer.run(configuration) { _, url in
            try await body(try #require(Int(url.split(separator: ":").last ?? "")), url)
        }
    }

    /// Reads `count` responses from `client`, in the order they come. It never blocks a thread
    /// (the server answers on the same few).
    /// - Parameter bodiless: the answers are a HEAD's (fields, no body).
    static func answers(_ client: SlowClient, count: Int, bodiless: Bool = false) async throws -> [Answer] {
        var bytes: [UInt8] = []
        var answers: [Answer] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while answers.count < count {
            if let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) {
                let lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
                let status = Int(lines[0].split(separator: " ")[1]) ?? 0
                var headers: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = status == 304 || bodiless ? 0 : Int(headers["content-length"] ?? "0") ?? 0
                if bytes.count - end.upperBound >= length {
                    answers.append(Answer(status: status, headers: headers, body: Array(bytes[end.upperBound..<end.upperBound + length])))
                    bytes.removeFirst(end.upperBound + length)
                    continue
                }
            }
            guard ContinuousClock.now < deadline else {
                Issue.record("no whole answer in 10 s (\(answers.count) of \(count) read: \(answers.map(\.status))); received \(bytes.count) bytes: \(String(decoding: bytes.prefix(300), as: UTF8.self))")
                throw CocoaError(.fileReadUnknown)
            }
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var descriptorSet = pollfd(fd: client.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorSet, 1, 0) > 0 else {
                try await Task.sleep(for: .milliseconds(5))
                continue
            }
            let count = recv(client.descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { throw CocoaError(.fileReadUnknown) }
            bytes += buffer[..<count]
        }
        return answers
    }

    /// The catalog's current ETag, asked on a connection of its own.
    static func etag(port: Int) async throws -> String {
        let client = try SlowClient(port: port)
        client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return try #require(try await answers(client, count: 1).first?.headers["etag"])
    }

    @Test("a fresh connection's 304s are answered from their bytes, pipelined in one read: the route's fields, counted and logged as the route's")
    func fromBytes() async throws {
        try await Self.withServer { port, url in
            let etag = try await Self.etag(port: port)
            let routedClient = try SlowClient(port: port)
            routedClient.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nConnection: close\r\n\r\n")
            let routed = try #require(try await Self.answers(routedClient, count: 1).first)
            let client = try SlowClient(port: port)
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
                + "HEAD /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \"other\", \(etag)\r\nAccept-Encoding: gzip\r\n\r\n"
                + "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: W/\(etag)\r\nUser-Agent: test\r\n\r\n")
            let answers = try await Self.answers(client, count: 3)
            #expect(answers.map(\.status) == [304, 304, 304] && routed.status == 304)
            #expect(answers.map { $0.headers["etag"] } == [etag, String(etag.dropLast()) + "-gzip\"", etag])
            #expect(answers.map { Set($0.headers.keys) } == Array(repeating: Set(routed.headers.keys), count: 3))
            let fields = ["vary", "cache-control", "server"]
            #expect(fields.map { answers[0].headers[$0] } == fields.map { routed.headers[$0] })
            let metrics = try await StoreHTTP(baseURL: url).send("GET", "/metrics")
            let text = String(decoding: metrics.body, as: UTF8.self)
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/catalog",method="GET",status="304"} 3"#), "\(text)")
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/catalog",method="HEAD",status="304"} 1"#), "\(text)")
        }
    }

    /// Requests the byte-level reader must leave to the HTTP stack, or answer exactly as it does.
    static let unusual = [
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nContent-Length: 0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nConnection: keep-alive\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"x\",\r\n ETAG\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\nHost: h\nIf-None-Match: ETAG\n\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match : ETAG\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nUser-Agent: Lesegerät\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\u{1}\r\n\r\n",
        "GET /v1/catalog?x=1 HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"stale\"\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nAuthorization: Bearer forged\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nX-Forwarded-For: 10.1.2.3\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"a\"\r\nIf-None-Match: ETAG\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: *\r\nAccept-Encoding: gzip;q=0\r\n\r\n",
        "GET /v1/catalog HTTP/1.0\r\nIf-None-Match: ETAG\r\n\r\n",
        "get /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\n\r\n",
        "POST /v1/catalog HTTP/1.1\r\nHost: h\r\nIf-None-Match: ETAG\r\nContent-Length: 0\r\n\r\n",
    ]

    @Test("a request the byte-level reader does not certainly recognise is answered as the HTTP stack answers it later on a connection",
          arguments: unusual)
    func sameAsTheStack(request: String) async throws {
        try await Self.withServer { port, _ in
            let etag = try await Self.etag(port: port)
            let text = request.replacingOccurrences(of: "ETAG", with: etag)
            let fresh = try SlowClient(port: port)
            fresh.send(text)
            let first = try #require(try await Self.answers(fresh, count: 1).first)
            let later = try SlowClient(port: port)
            later.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            _ = try await Self.answers(later, count: 1)
            later.send(text)
            let second = try #require(try await Self.answers(later, count: 1).first)
            #expect(first.status == second.status && first.body == second.body, "\(first.status) \(second.status)")
            var (one, two) = (first.headers, second.headers)
            one["date"] = nil
            two["date"] = nil
            #expect(one == two)
        }
    }

    @Test("a fresh connection busy only with 304s answered from bytes is not idle; quiet past the timeout (1 s here) it is closed, as is one that never asks")
    func idleFromBytes() async throws {
        try await Self.withServer(requestTimeout: 1) { port, _ in
            let etag = try await Self.etag(port: port)
            let silent = try SlowClient(port: port)
            let client = try SlowClient(port: port)
            for _ in 0..<8 {
                try await Task.sleep(for: .milliseconds(300))
                client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n")
                #expect(try await Self.answers(client, count: 1).first?.status == 304)
            }
            #expect(silent.isClosedByPeer())
            try await Task.sleep(for: .milliseconds(1_500))
            #expect(client.isClosedByPeer())
        }
    }

    @Test("its 304 carries the route's fields (the ETag of the encoding asked for), for GET and HEAD, and is counted as the route's")
    func sameAnswer() async throws {
        try await Self.withServer { port, url in
            let client = try SlowClient(port: port)
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let first = try #require(try await Self.answers(client, count: 1).first)
            let etag = try #require(first.headers["etag"])
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n")
            let fast = try #require(try await Self.answers(client, count: 1).first)
            client.send("HEAD /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \"other\", \(etag)\r\nAccept-Encoding: gzip\r\n\r\n")
            let head = try #require(try await Self.answers(client, count: 1).first)
            // With Connection: close the request goes through the router, as before.
            let routedClient = try SlowClient(port: port)
            routedClient.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nConnection: close\r\n\r\n")
            let routed = try #require(try await Self.answers(routedClient, count: 1).first)
            #expect(fast.status == 304 && routed.status == 304 && head.status == 304)
            for answer in [fast, routed] {
                #expect(answer.headers["etag"] == etag)
            }
            #expect(head.headers["etag"] == String(etag.dropLast()) + "-gzip\"")
            let fields = ["vary", "cache-control", "server"]
            #expect(fields.map { fast.headers[$0] } == fields.map { routed.headers[$0] })
            #expect(fast.headers["date"] != nil && fast.headers["content-length"] == nil)
            let metrics = try await StoreHTTP(baseURL: url).send("GET", "/metrics")
            let text = String(decoding: metrics.body, as: UTF8.self)
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/catalog",method="GET",status="304"} 2"#), "\(text)")
            #expect(text.contains(#"kiosk_http_requests_total{route="/v1/catalog",method="HEAD",status="304"} 1"#), "\(text)")
        }
    }

    @Test("pipelined behind a request still being answered, a current If-None-Match waits its turn: the answers come in the order asked")
    func pipelinedInOrder() async throws {
        try await Self.withServer { port, _ in
            let client = try SlowClient(port: port)
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let etag = try #require(try await Self.answers(client, count: 1).first?.headers["etag"])
            for _ in 0..<3 {
                client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \"stale\"\r\n\r\n"
                    + "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    + "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n")
                let answers = try await Self.answers(client, count: 4)
                #expect(answers.map(\.status) == [200, 304, 200, 304])
                #expect(answers[0].body.count > 1000 && String(decoding: answers[2].body, as: UTF8.self) == "ok")
            }
        }
    }

    @Test("a connection busy with 304s answered here is not idle: Hummingbird's idle timeout (1 s here) does not close it")
    func notIdle() async throws {
        try await Self.withServer(requestTimeout: 1) { port, _ in
            let client = try SlowClient(port: port)
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let etag = try #require(try await Self.answers(client, count: 1).first?.headers["etag"])
            for _ in 0..<10 {
                try await Task.sleep(for: .milliseconds(300))
                client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n")
                #expect(try await Self.answers(client, count: 1).first?.status == 304)
            }
        }
    }

    @Test("a request with a body is answered at its head, as the router answers it (Expect: 100-continue does not wait), and its body is dropped")
    func answeredAtHead() async throws {
        try await Self.withServer { port, _ in
            let client = try SlowClient(port: port)
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let etag = try #require(try await Self.answers(client, count: 1).first?.headers["etag"])
            client.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
            #expect(try await Self.answers(client, count: 1).first?.status == 304)
            client.send("hello" + "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n")
            #expect(try await Self.answers(client, count: 1).first?.status == 304)
        }
    }

    @Test("a client that pipelines 304s and never reads is stopped by the server reading no more, not buffered without end (from the first request, answered from bytes, or after another)",
          arguments: [false, true])
    func backpressure(afterAnother: Bool) async throws {
        try await Self.withServer { port, _ in
            let client = try SlowClient(port: port)
            let etag = try await Self.etag(port: port)
            if afterAnother {
                client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                _ = try await Self.answers(client, count: 1)
            }
            var small: Int32 = 4096
            setsockopt(client.descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client.descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let requests = Array(String(repeating: "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n", count: 1000).utf8)
            let descriptor = client.descriptor
            // Blocking sends on a thread of their own (never one the server answers on), until a
            // send waits 2 s (the server reads no more) or 30 MB went in (it buffers without end).
            let accepted = await withCheckedContinuation { continuation in
                Thread {
                    var accepted = 0
                    while accepted < 30_000_000 {
                        let sent = requests.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        guard sent > 0 else { break }
                        accepted += sent
                    }
                    continuation.resume(returning: accepted)
                }.start()
            }
            #expect(accepted < 30_000_000, "the server took \(accepted) bytes of requests whose answers nobody read")
        }
    }
}
