import Foundation

/// A raw TCP connection that sends what a test says, as slowly as it likes.
/// Used by one task at a time (the tests hand it off the cooperative pool to block on it).
public final class SlowClient: @unchecked Sendable {
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

    /// Closes the sending side (a half-closure): the server reads the end of the input.
    public func finishSending() {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

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

    /// Bytes read ahead of the last response returned (a pipelined answer's start).
    private var pending: [UInt8] = []

    /// The next whole response (head and a body of its `Content-Length`), or nil when none came
    /// within `seconds` of quiet or the server closed first. A generous bound, not a measure: a
    /// test decides by what came, not when.
    public func response(within seconds: Double = 30) -> String? {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while true {
            if let end = pending.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound {
                let head = String(decoding: pending[..<end], as: UTF8.self)
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if pending.count >= end + length {
                    let text = String(decoding: pending[..<(end + length)], as: UTF8.self)
                    pending.removeFirst(end + length)
                    return text
                }
            }
            guard ContinuousClock.now < deadline else { return nil }
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorSet, 1, 100) >= 0 else { return nil }
            guard descriptorSet.revents != 0 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            pending += buffer[..<count]
        }
    }
}
