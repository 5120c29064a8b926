import Foundation
import KioskCore
import KioskTransfer

/// Downloads any URL to a file with the content downloader: resumes from `FILE.partial` with
/// If-Range (the ETag is kept beside it), retries transient failures with backoff, and checks the
/// SHA-256 at the end. So content can come from any HTTP origin or CDN that honours Range.
public struct URLFetch: Sendable {
    public var url: String
    public var output: URL
    public var expectedSHA256: String?
    public var headers: [(name: String, value: String)]
    public var attempts = 5
    public var backoff = Backoff()
    /// Seconds below 1 KiB/s before a transfer counts as stalled.
    public var stallSeconds = 30
    /// Caps the receive rate, in bytes/s.
    public var maxReceiveSpeed: Int64?

    public init(url: String, output: URL, expectedSHA256: String?, headers: [(name: String, value: String)]) {
        self.url = url
        self.output = output
        self.expectedSHA256 = expectedSHA256?.lowercased()
        self.headers = headers
    }

    public struct Result: Sendable {
        public var size: Int64
        public var sha256: String
        /// Bytes received over the network, over all attempts.
        public var bytesReceived: Int64
        public var attempts: Int
    }

    var partial: URL { output.appendingPathExtension("partial") }
    var etagFile: URL { output.appendingPathExtension("partial.etag") }

    /// Fetches to the end, or throws the last error with what to do about it.
    ///
    /// An HTTP error (404, say) is one line with the status, and leaves no partial file behind
    /// unless one was there before this run (curl `-f`'s habit: the error page is never saved).
    public func run(progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> Result {
        let hadPartial = FileManager.default.fileExists(atPath: partial.path)
        var received: Int64 = 0
        var mismatches = 0
        // The partial file this run wrote: every later attempt, and the final rename, must find
        // that very file under its name, not one swapped in while we waited.
        var written: FileIdentity?
        for attempt in 1...max(1, attempts) {
            var request = DownloadRequest(key: "fetch", url: url, headers: headers, partialFile: partial, etag: savedETag())
            request.lowSpeedTime = stallSeconds
            request.maxReceiveSpeed = maxReceiveSpeed
            request.expectedIdentity = written
            let etagFile = self.etagFile
            let recordedETag = request.etag
            let (updates, reporting) = AsyncStream.makeStream(of: DownloadProgress.self)
            async let ran = Downloader(concurrency: 1).run([request], progress: reporting)
            // Read in a task of its own, which a cancellation (Ctrl-C) does not end: the ETag of the
            // bytes kept is written even then.
            let recording = Task {
                var counter = ReceivedBytes()
                var etagWritten = recordedETag
                for await update in updates {
                    counter.note(update)
                    progress(update)
                    // Written once per new ETag, atomically: a kill must never leave it empty or torn.
                    if let etag = update.etag, update.bytesOnDisk > 0, etag != etagWritten {
                        try? Data(etag.utf8).write(to: etagFile, options: .atomic)
                        etagWritten = etag
                    }
                }
                return counter
            }
            let outcome = await ran["fetch"] ?? .stopped
            let counter = await recording.value
            received += counter.total
            written = counter.partialIdentity ?? written
            var retryAfter: TimeInterval?
            switch outcome {
            case .complete(let size, let sha256, _):
                if let expected = expectedSHA256, expected != sha256 {
                    clearPartial()
                    written = nil
                    mismatches += 1
                    if mismatches >= 2 {
                        throw ClientError.invalidRequest("\(url): the SHA-256 is \(sha256), not \(expectedSHA256 ?? "") (twice); check --sha256 or the origin")
                    }
                    continue
                }
                guard let written, FileIdentity.ofRegularFile(partial.path) == written else {
                    throw ClientError.invalidRequest("\(partial.path) was replaced by another file during the download; nothing was saved, check who else writes in that folder")
                }
                try? FileManager.default.removeItem(at: output)
                guard rename(partial.path, output.path) == 0 else {
                    throw ClientError.invalidRequest("cannot move the download to \(output.path): \(String(cString: strerror(errno)))")
                }
                try? FileManager.default.removeItem(at: etagFile)
                return Result(size: size, sha256: sha256, bytesReceived: received, attempts: attempt)
            case .restart:
                clearPartial()
                written = nil
                continue
            case .httpError(let status, let after, _):
                let refused = ClientError.serverError(url: url, status: status, code: "http_\(status)", message: "\(Self.reason(status)); nothing was saved")
                guard RetryRule.isTransient(status: status) else {
                    if !hadPartial { clearPartial() }
                    throw refused
                }
                retryAfter = after
                if attempt == attempts {
                    if !hadPartial && written == nil { clearPartial() }
                    throw refused
                }
            case .transport(.localWrite, let message) where message.hasPrefix("refusing to write"):
                throw ClientError.invalidRequest("\(message); nothing was saved")
            case .transport(let kind, let message):
                if !kind.isTransient || attempt == attempts {
                    throw ClientError.serverUnreachable(url: url, detail: "\(message); the partial file is kept, run the same command again to resume")
                }
            case .stopped:
                throw ClientError.invalidRequest("the download of \(url) was stopped")
            }
            try await Task.sleep(for: .seconds(backoff.delay(afterAttempts: attempt, retryAfter: retryAfter)))
        }
        throw ClientError.invalidRequest("\(url): gave up after \(attempts) attempts")
    }

    /// The reason phrase of a status a person meets, as curl -f says it.
    static func reason(_ status: Int) -> String {
        let phrases = [
            400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 410: "Gone", 416: "Range Not Satisfiable", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
        ]
        return phrases[status] ?? "an HTTP error"
    }

    private func savedETag() -> String? {
        guard FileManager.default.fileExists(atPath: partial.path) else { return nil }
        return (try? String(contentsOf: etagFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
    }

    private func clearPartial() {
        try? FileManager.default.removeItem(at: partial)
        try? FileManager.default.removeItem(at: etagFile)
    }
}
