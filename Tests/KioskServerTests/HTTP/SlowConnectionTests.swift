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

/// A raw TCP connection that sends what a test says, as slowly as it likes.
final class SlowClient {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw CocoaError(.fileReadUnknown) }
    }

    deinit { close(descriptor) }

    func send(_ text: String) {
        _ = text.withCString { Glibc.send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// True when the server has closed the connection: reads reach end of file (or a reset),
    /// after whatever it said last.
    func isClosedByPeer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<8 {
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorSet, 1, 100) > 0 else { return false }
            if recv(descriptor, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }
}
