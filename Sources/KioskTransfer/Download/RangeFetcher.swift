import CCurl
import Foundation

/// Fetches byte ranges of one representation, one after another on one libcurl handle, so
/// every range after the first reuses the connection (and a redirect's target) of the one before.
///
/// Each answer must be `206` with a `Content-Range` of exactly the range asked for, of a
/// representation of the expected size; anything else (a `200` with the whole body, another
/// range, another size) is refused before its body is used. Ranges are not sent together as one
/// multipart request: Kiosk and nginx's x-accel serve single ranges, and one connection's
/// round trips cost little next to the bytes they save.
public struct RangeFetcher: Sendable {
    public var url: String
    public var headers: [(name: String, value: String)]
    /// The size of the whole representation, which every `Content-Range` must name.
    public var totalSize: Int64
    public var connectTimeout = 10
    public var lowSpeedLimit = 1024
    public var lowSpeedTime = 30
    /// The most bytes a second to receive (the reader's `KIOSK_MAX_RECEIVE_SPEED`), or nil.
    public var maxReceiveSpeed: Int64?

    public init(url: String, headers: [(name: String, value: String)] = [], totalSize: Int64) {
        self.url = url
        self.headers = headers
        self.totalSize = totalSize
    }

    /// Why a range answer was not used.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// The server answered with this status (a 412 means the version changed).
        case status(Int, message: String)
        /// The answer was not the range asked for.
        case wrongRange(String)
        case transport(TransferError)

        public var description: String {
            switch self {
            case .status(let status, let message): "the server answered \(status) to a range request: \(message)"
            case .wrongRange(let detail): "the range answer does not fit: \(detail)"
            case .transport(let error): "\(error)"
            }
        }
    }

    /// Fetches each of `ranges` (first byte, length) in turn and hands its body to `consume`
    /// with the range's index as it arrives. Runs on a thread of its own.
    /// - Returns: bytes received over the network.
    /// - Throws: ``Failure``, or what `consume` throws.
    public func fetch(_ ranges: [(offset: Int64, length: Int64)], consume: @escaping @Sendable (Int, UnsafeRawBufferPointer) throws -> Void) async throws -> Int64 {
        let fetcher = self
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try fetcher.perform(ranges, consume: consume) }) }
            thread.name = "kiosk-ranges"
            thread.start()
        }
    }

    private func perform(_ ranges: [(offset: Int64, length: Int64)], consume: @escaping (Int, UnsafeRawBufferPointer) throws -> Void) throws -> Int64 {
        let easy = try CurlEasy(url: url)
        try easy.set(CURLOPT_FOLLOWLOCATION, 1)
        try easy.set(CURLOPT_MAXREDIRS, 5)
        try easy.set(CURLOPT_CONNECTTIMEOUT, connectTimeout)
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, lowSpeedLimit)
        try easy.set(CURLOPT_LOW_SPEED_TIME, lowSpeedTime)
        if let maxReceiveSpeed {
            // As a download's transfer does: small buffers, so that libcurl keeps a slow cap honest.
            try easy.set(CURLOPT_MAX_RECV_SPEED_LARGE, offset: maxReceiveSpeed)
            try easy.set(CURLOPT_BUFFERSIZE, Int(min(16 << 10, max(1 << 10, maxReceiveSpeed / 64))))
        }
        try easy.setHeaders(headers + [(name: "Accept-Encoding", value: "identity")])
        var received: Int64 = 0
        for (index, range) in ranges.enumerated() {
            guard range.offset >= 0, range.length > 0, range.offset + range.length <= totalSize else {
                throw Failure.wrongRange("bytes \(range.offset)+\(range.length) lie outside the \(totalSize)-byte archive")
            }
            let last = range.offset + range.length - 1
            let sink = RangeSink(index: index, expected: "bytes \(range.offset)-\(last)/\(totalSize)", length: range.length, consume: consume)
            let pointer = Unmanaged.passUnretained(sink).toOpaque()
            try easy.set(CURLOPT_RANGE, "\(range.offset)-\(last)")
            try easy.set(CURLOPT_WRITEFUNCTION, callback: RangeSink.onBody)
            try easy.set(CURLOPT_WRITEDATA, pointer: pointer)
            try easy.set(CURLOPT_HEADERFUNCTION, callback: RangeSink.onHeader)
            try easy.set(CURLOPT_HEADERDATA, pointer: pointer)
            do {
                try easy.perform()
            } catch let error as TransferError {
                if let problem = sink.problem { throw problem }
                throw Failure.transport(error)
            }
            received += sink.received
            if let problem = sink.problem { throw problem }
            guard sink.status == 206 else {
                throw Failure.status(sink.status, message: String(decoding: sink.errorBody.prefix(500), as: UTF8.self))
            }
            guard sink.received == range.length else {
                throw Failure.wrongRange("\(sink.received) bytes arrived for a \(range.length)-byte range")
            }
        }
        return received
    }
}

/// One range answer's headers and body, from libcurl's callbacks.
final class RangeSink {
    let index: Int
    let expected: String
    let length: Int64
    let consume: (Int, UnsafeRawBufferPointer) throws -> Void
    private var head = ResponseHead()
    var status: Int { head.status }
    var contentRange: String? { head["content-range"] }
    var received: Int64 = 0
    var errorBody = Data()
    var problem: (any Error)?

    init(index: Int, expected: String, length: Int64, consume: @escaping (Int, UnsafeRawBufferPointer) throws -> Void) {
        self.index = index
        self.expected = expected
        self.length = length
        self.consume = consume
    }

    static let onHeader: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let sink = Unmanaged<RangeSink>.fromOpaque(userdata).takeUnretainedValue()
        sink.head.add(UnsafeRawBufferPointer(start: buffer, count: size * count))
        return size * count
    }

    static let onBody: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let sink = Unmanaged<RangeSink>.fromOpaque(userdata).takeUnretainedValue()
        let piece = UnsafeRawBufferPointer(start: buffer, count: size * count)
        guard sink.status == 206 else {
            if sink.errorBody.count < 4096 { sink.errorBody.append(contentsOf: piece.prefix(4096 - sink.errorBody.count)) }
            return piece.count
        }
        guard sink.contentRange == sink.expected else {
            sink.problem = RangeFetcher.Failure.wrongRange("asked for \(sink.expected), got \(sink.contentRange ?? "no Content-Range")")
            return 0
        }
        guard sink.received + Int64(piece.count) <= sink.length else {
            sink.problem = RangeFetcher.Failure.wrongRange("more bytes arrived than the \(sink.length) asked for")
            return 0
        }
        do {
            try sink.consume(sink.index, piece)
        } catch {
            sink.problem = error
            return 0
        }
        sink.received += Int64(piece.count)
        return piece.count
    }
}
