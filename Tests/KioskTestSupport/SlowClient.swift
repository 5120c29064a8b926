import Foundation

/// A raw TCP connection that sends what a test says, as slowly as it likes.
public final class SlowClient {
    public let descriptor: Int32

    public init(port: Int) throws {
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

    public func send(_ text: String) {
        _ = text.withCString { Glibc.send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// True when the server has closed the connection: reads reach end of file (or a reset),
    /// after whatever it said last.
    public func isClosedByPeer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<8 {
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorSet, 1, 100) > 0 else { return false }
            if recv(descriptor, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }
}
