import CCurl
import Foundation
import KioskCore

/// One download on one easy handle: writes to the partial file, hashes as it goes, and applies
/// the resume rules (RFC 9110 ranges) the moment the response headers are known.
final class Transfer {
    let request: DownloadRequest
    let easy: CurlEasy
    /// The partial file, written through its descriptor only, never by name.
    private let file: OpenedPartialFile
    private var descriptor: Int32 { file.descriptor }
    private let digest: StreamingDigest
    /// Bytes in the partial file; the next byte is written here.
    private(set) var offset: Int64
    /// Bytes before this offset have been handed to the kernel's write-back.
    private var writebackStart: Int64
    /// Where this attempt asked to start.
    private let requestedOffset: Int64
    private(set) var received: Int64 = 0
    private(set) var total: Int64?

    private enum Mode { case headers, writing, alreadyComplete, wrongRange, collectingError, tooLong }
    private var mode = Mode.headers
    private var head = ResponseHead()
    private var status: Int { head.status }
    private var responseHeaders: [String: String] { head.fields }
    private var errorBody = Data()
    private var writeErrno: Int32 = 0
    private var lastReportTime = DispatchTime.now().uptimeNanoseconds
    private var reportedFirstBytes = false
    private var redirectedTo: String?
    /// No byte is written at or past this offset: the size the caller expects, or the end of the
    /// range the server said it sends.
    private var limit = Int64.max
    let identity: FileIdentity

    /// Sets up the request on its partial file: the one the caller opened already
    /// (``DownloadRequest/opened``), or opened (or created) here.
    init(_ request: DownloadRequest) throws {
        self.request = request
        guard let file = try request.opened ?? OpenedPartialFile.open(for: request, request.partialIsNew ? .new : .existingOrNew) else {
            throw TransferError(url: request.url, kind: .localWrite, message: "cannot open \(request.partialFile.path)")
        }
        self.file = file
        identity = file.identity
        let descriptor = file.descriptor
        var existing = Int64(lseek(descriptor, 0, SEEK_END))
        if existing > 0, request.etag == nil {
            // Bytes of unknown origin: never splice onto them.
            ftruncate(descriptor, 0)
            existing = 0
        }
        offset = existing
        writebackStart = existing
        requestedOffset = existing
        easy = try CurlEasy(url: request.url)
        // The bytes of an earlier attempt are hashed in the background while the rest arrives.
        digest = StreamingDigest(reading: descriptor)
        digest.advance(to: existing)
        limit = request.expectedSize ?? .max
        try configure()
    }

    deinit {
        digest.close()
    }

    private func configure() throws {
        let this = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_WRITEFUNCTION, callback: Transfer.onBody)
        try easy.set(CURLOPT_WRITEDATA, pointer: this)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: Transfer.onHeader)
        try easy.set(CURLOPT_HEADERDATA, pointer: this)
        try easy.set(CURLOPT_FOLLOWLOCATION, 1)
        try easy.set(CURLOPT_MAXREDIRS, 5)
        try easy.set(CURLOPT_CONNECTTIMEOUT, request.connectTimeout)
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, request.lowSpeedLimit)
        try easy.set(CURLOPT_LOW_SPEED_TIME, request.lowSpeedTime)
        // Big receive buffers mean fewer reads. 256 KiB replaces 1 MiB: 1 GiB from nginx took no
        // time that could be told from the disk's noise, and peaked 768 KiB lower (issue 44:
        // 23.1–23.6 MiB against 24.1–24.4 MiB). A rate cap needs small ones: libcurl checks the rate only after draining up to 100 buffers from a readable
        // socket, so a buffer of a 64th of a second's bytes keeps even a slow cap honest.
        if let speed = request.maxReceiveSpeed {
            try easy.set(CURLOPT_MAX_RECV_SPEED_LARGE, offset: speed)
            try easy.set(CURLOPT_BUFFERSIZE, Int(min(16 << 10, max(1 << 10, speed / 64))))
        } else {
            try easy.set(CURLOPT_BUFFERSIZE, 256 << 10)
        }
        var headers = request.headers
        if offset > 0, let etag = request.etag {
            headers.append(("Range", "bytes=\(offset)-"))
            headers.append(("If-Range", etag))
        }
        try easy.setHeaders(headers)
    }

    // MARK: Callbacks

    static let onHeader: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
        transfer.header(UnsafeRawBufferPointer(start: buffer, count: size * count))
        return size * count
    }

    static let onBody: kiosk_curl_data_callback = { buffer, size, count, userdata in
        guard let buffer, let userdata else { return 0 }
        let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
        return transfer.body(UnsafeRawBufferPointer(start: buffer, count: size * count))
    }

    /// One header line (``ResponseHead``); the blank line after the final response's head decides
    /// how its body is taken (a 1xx, or a redirect that libcurl follows, comes before it).
    private func header(_ raw: UnsafeRawBufferPointer) {
        guard head.add(raw) else { return }
        if !(100..<200).contains(status), !(300..<400).contains(status) || responseHeaders["location"] == nil {
            decideMode()
        }
    }

    /// The resume rules, applied once the final response's headers are in.
    private func decideMode() {
        if let effective = easy.info(string: CURLINFO_EFFECTIVE_URL), effective != request.url {
            redirectedTo = effective
        }
        switch status {
        case 200:
            if offset > 0 {
                // A whole body to a ranged request: the bytes changed or ranges are ignored. Start over.
                restartFromZero()
            }
            total = responseHeaders["content-length"].flatMap(Int64.init)
            mode = (total ?? 0) > limit ? .tooLong : .writing
        case 206:
            let range = Self.contentRange(responseHeaders["content-range"])
            if let range, range.start == offset {
                total = range.total
                limit = min(limit, range.end + 1)
                mode = (range.total ?? 0) > (request.expectedSize ?? .max) ? .tooLong : .writing
            } else {
                mode = .wrongRange
            }
        case 416:
            let complete = Self.unsatisfiedLength(responseHeaders["content-range"])
            if let complete, complete == offset, offset > 0 {
                total = complete
                mode = .alreadyComplete
            } else {
                restartFromZero()
                mode = .wrongRange
            }
        default:
            mode = .collectingError
        }
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> Int {
        switch mode {
        case .writing:
            guard offset + Int64(bytes.count) <= limit else {
                // One byte more than the catalog declares (or the range promised): an endless or
                // wrong body. Nothing past the limit is written.
                mode = .tooLong
                return 0
            }
            var written = 0
            while written < bytes.count {
                let result = pwrite(descriptor, bytes.baseAddress?.advanced(by: written), bytes.count - written, off_t(offset) + off_t(written))
                guard result > 0 else {
                    writeErrno = errno
                    return 0
                }
                written += result
            }
            offset += Int64(bytes.count)
            digest.advance(to: offset)
            startWritebackIfDue()
            received += Int64(bytes.count)
            return bytes.count
        case .collectingError:
            if errorBody.count < 64 << 10 { errorBody.append(contentsOf: bytes) }
            return bytes.count
        case .alreadyComplete, .headers:
            return bytes.count
        case .wrongRange, .tooLong:
            // Refuse to splice, or to write past the size the body may have: abort this attempt.
            return 0
        }
    }

    /// Every few MiB, asks the kernel to start writing what arrived to disk, without waiting: the
    /// disk then works while the network does, and the fsync that makes the finished file durable
    /// has little left to flush (it was most of the gap to curl, which never syncs).
    private func startWritebackIfDue() {
        guard offset - writebackStart >= Self.writebackStep else { return }
        Platform.startWriteback(descriptor, offset: writebackStart, length: offset - writebackStart)
        writebackStart = offset
    }

    private static let writebackStep: Int64 = 8 << 20

    private func restartFromZero() {
        ftruncate(descriptor, 0)
        offset = 0
        writebackStart = 0
        digest.reset()
    }

    /// Progress every `period` seconds, and as soon as the first bytes are on disk so the ETag
    /// they belong to is recorded; nil in between.
    func progressIfDue(period: TimeInterval) -> DownloadProgress? {
        let now = DispatchTime.now().uptimeNanoseconds
        let first = !reportedFirstBytes && mode == .writing && received > 0
        guard first || Double(now &- lastReportTime) / 1e9 >= period else { return nil }
        reportedFirstBytes = reportedFirstBytes || first
        lastReportTime = now
        return progress
    }

    /// Ends a transfer the caller stopped: what arrived is made durable and kept for a resume.
    func stop() -> DownloadOutcome {
        fsync(descriptor)
        return .stopped
    }

    var progress: DownloadProgress {
        DownloadProgress(
            key: request.key, bytesOnDisk: offset, totalBytes: total, bytesReceived: received,
            etag: mode == .writing || mode == .alreadyComplete ? responseHeaders["etag"] : (offset > 0 ? request.etag : nil),
            redirectedTo: mode == .writing || mode == .alreadyComplete ? redirectedTo : nil,
            partialIdentity: identity)
    }

    // MARK: Outcome

    /// What the finished transfer amounts to, given libcurl's result code.
    func outcome(_ code: CURLcode) -> DownloadOutcome {
        if mode == .wrongRange {
            restartFromZero()
            return .restart(reason: status == 416
                ? "the server no longer has the bytes this download was resuming from"
                : "the server sent a range that does not continue the partial file")
        }
        if mode == .tooLong {
            let declared = request.expectedSize.map { "the \($0) bytes declared for it" } ?? "the range it announced"
            return .transport(kind: .tooLarge, message: "\(request.url) sent more than \(declared); the download was stopped there")
        }
        if code == CURLE_WRITE_ERROR, writeErrno != 0 {
            return .transport(kind: .localWrite, message: "cannot write \(request.partialFile.path): \(String(cString: strerror(writeErrno)))")
        }
        guard code == CURLE_OK else {
            let error = easy.error(for: code)
            return .transport(kind: error.kind, message: error.message)
        }
        switch mode {
        case .writing, .alreadyComplete:
            fsync(descriptor)
            return .complete(size: offset, sha256: digest.finalize(), etag: responseHeaders["etag"])
        default:
            let message = (try? JSONSerialization.jsonObject(with: errorBody) as? [String: Any])?["message"] as? String
                ?? String(decoding: errorBody.prefix(300), as: UTF8.self)
            return .httpError(status: status, retryAfter: RetryAfter.seconds(responseHeaders["retry-after"]), message: message.isEmpty ? "HTTP \(status)" : message)
        }
    }

    // MARK: Header parsing

    /// `bytes A-B/T` → (A, B, T).
    static func contentRange(_ value: String?) -> (start: Int64, end: Int64, total: Int64?)? {
        guard let value, value.hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst("bytes ".count)
        let parts = spec.split(separator: "/")
        guard parts.count == 2, let dash = parts[0].firstIndex(of: "-"), let start = Int64(parts[0][..<dash]),
              let end = Int64(parts[0][parts[0].index(after: dash)...]), end >= start else { return nil }
        return (start, end, Int64(parts[1]))
    }

    /// `bytes */T` → T.
    static func unsatisfiedLength(_ value: String?) -> Int64? {
        guard let value, value.hasPrefix("bytes */") else { return nil }
        return Int64(value.dropFirst("bytes */".count))
    }
}
