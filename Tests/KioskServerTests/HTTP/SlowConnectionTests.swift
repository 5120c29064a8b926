import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// Clients that connect and never finish their request.
@Suite("Slow connections")
struct SlowConnectionTests {
    @Test("connections that never finish their request headers are closed after the request timeout")
    func slowHeaders() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.requestHeaderTimeout = 1
        try await LiveServer.run(configuration) { _, url in
            let port = try #require(Int(url.split(separator: ":").last ?? ""))
            let sockets = try (0..<50).map { _ in try SlowClient(port: port) }
            for socket in sockets { socket.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") }
            try await Task.sleep(for: .seconds(3))
            let closed = sockets.filter { $0.isClosedByPeer() }.count
            #expect(closed == sockets.count, "\(sockets.count - closed) slow connections still open")
            // A connection that completes its request is answered as usual.
            #expect(try await StoreHTTP(baseURL: url).send("GET", "/healthz").status == 200)
        }
    }
}
