import Crypto
import Foundation
import KioskCore
import KioskTestSupport
import KioskTransfer
import Testing

@Suite("The resumable downloader against a misbehaving origin")
struct DownloaderTests {
    static let size = 3 << 20
    static let content = TestOrigin.incompressible(size)
    static let digest = FileDigest.sha256(of: content)

    static func request(_ url: String, _ directory: TemporaryDirectory, etag: String?) -> DownloadRequest {
        var request = DownloadRequest(key: "book", url: url, partialFile: directory.path("book.partial"), etag: etag)
        request.lowSpeedTime = 2
        return request
    }

    static func download(_ request: DownloadRequest) async -> DownloadOutcome {
        await Downloader().run([request])["book"] ?? .stopped
    }

    @Test("a whole download is byte-exact, hashed as it arrives")
    func whole() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            let outcome = await Self.download(Self.request(url, directory, etag: nil))
            #expect(outcome == .complete(size: Int64(Self.size), sha256: Self.digest, etag: origin.etag))
            #expect(try Data(contentsOf: directory.path("book.partial")) == Self.content)
        }
    }

    @Test("a partial file the caller opened is written through its descriptor, even once another file holds the name; one the caller found missing is created only if still missing, never emptied when another process made it meanwhile")
    func writesThroughTheOpenedFile() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            var request = Self.request(url, directory, etag: nil)
            // Looking for a file that is not there makes none (a stopped process leaves nothing).
            #expect(try OpenedPartialFile.open(for: request, .existing) == nil)
            #expect(!FileManager.default.fileExists(atPath: request.partialFile.path))

            // Missing when the claim was checked, then made by another process: refused, untouched.
            let theirs = Data(repeating: 7, count: 1000)
            try theirs.write(to: request.partialFile)
            request.partialIsNew = true
            guard case .transport(.localWrite, let message) = await Self.download(request) else {
                Issue.record("a file another process made was written")
                return
            }
            #expect(message.contains("another process made it"), "\(message)")
            #expect(try Data(contentsOf: request.partialFile) == theirs)

            // Opened first, then replaced under its name (a takeover's copy): the bytes go to the
            // opened file, and the one now under the name is left alone.
            request.partialIsNew = false
            request.opened = try OpenedPartialFile.open(for: request, .existing)
            let moved = directory.path("moved.partial")
            try FileManager.default.moveItem(at: request.partialFile, to: moved)
            try theirs.write(to: request.partialFile)
            #expect(await Self.download(request) == .complete(size: Int64(Self.size), sha256: Self.digest, etag: origin.etag))
            #expect(try Data(contentsOf: moved) == Self.content)
            #expect(try Data(contentsOf: request.partialFile) == theirs)
        }
    }

    @Test("a connection reset at several offsets resumes byte-exact, wasting nothing", arguments: [1, 700_000, 2_000_000, (3 << 20) - 1])
    func resetThenResume(offset: Int) async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            origin.behaviour = .resetAfter(offset)
            let cut = await Self.download(Self.request(url, directory, etag: nil))
            guard case .transport(let kind, _) = cut else {
                Issue.record("expected a transport error, got \(cut)")
                return
            }
            #expect(kind == .interrupted)
            let partial = try Data(contentsOf: directory.path("book.partial"))
            #expect(partial.count == offset)

            origin.behaviour = .normal
            let resumed = await Self.download(Self.request(url, directory, etag: origin.etag))
            #expect(resumed == .complete(size: Int64(Self.size), sha256: Self.digest, etag: origin.etag))
            #expect(origin.ranges.last == "bytes=\(offset)-")
            #expect(origin.bytesSent == Self.size)
            #expect(try Data(contentsOf: directory.path("book.partial")) == Self.content)
        }
    }

    @Test("content changed between attempts: If-Range gets the whole new body, nothing spliced")
    func changedContent() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            origin.behaviour = .resetAfter(1_000_000)
            _ = await Self.download(Self.request(url, directory, etag: nil))
            let oldETag = origin.etag
            let newContent = TestOrigin.incompressible(Self.size, seed: "second edition")
            origin.content = newContent
            origin.behaviour = .normal
            let outcome = await Self.download(Self.request(url, directory, etag: oldETag))
            #expect(outcome == .complete(size: Int64(Self.size), sha256: FileDigest.sha256(of: newContent), etag: origin.etag))
            #expect(try Data(contentsOf: directory.path("book.partial")) == newContent)
        }
    }

    @Test("a 200 to a ranged request starts again from zero")
    func rangesIgnored() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            try Self.content.prefix(500_000).write(to: directory.path("book.partial"))
            origin.behaviour = .ignoresRanges
            let outcome = await Self.download(Self.request(url, directory, etag: origin.etag))
            #expect(outcome == .complete(size: Int64(Self.size), sha256: Self.digest, etag: origin.etag))
            #expect(try Data(contentsOf: directory.path("book.partial")) == Self.content)
        }
    }

    @Test("a 206 at the wrong offset is refused and the partial emptied, never spliced")
    func wrongOffset() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            try Self.content.prefix(500_000).write(to: directory.path("book.partial"))
            origin.behaviour = .wrongOffset
            let outcome = await Self.download(Self.request(url, directory, etag: origin.etag))
            guard case .restart = outcome else {
                Issue.record("expected a restart, got \(outcome)")
                return
            }
            #expect(try Data(contentsOf: directory.path("book.partial")).isEmpty)
        }
    }

    @Test("416 means complete only when its size equals the local size")
    func unsatisfiable() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            try Self.content.write(to: directory.path("book.partial"))
            origin.behaviour = .unsatisfiable(size: Self.size)
            let complete = await Self.download(Self.request(url, directory, etag: origin.etag))
            #expect(complete == .complete(size: Int64(Self.size), sha256: Self.digest, etag: origin.etag))

            origin.behaviour = .unsatisfiable(size: Self.size + 10)
            let other = await Self.download(Self.request(url, directory, etag: origin.etag))
            guard case .restart = other else {
                Issue.record("expected a restart, got \(other)")
                return
            }
            #expect(try Data(contentsOf: directory.path("book.partial")).isEmpty)
        }
    }

    @Test("503 with Retry-After is reported with its delay, and writes nothing")
    func unavailable() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            origin.behaviour = .unavailable(retryAfter: 7)
            let outcome = await Self.download(Self.request(url, directory, etag: nil))
            #expect(outcome == .httpError(status: 503, retryAfter: 7, message: "busy"))
            #expect(try Data(contentsOf: directory.path("book.partial")).isEmpty)
        }
    }

    @Test("a stalled connection times out and keeps what arrived")
    func stalled() async throws {
        try await TestOrigin.run(content: Self.content) { origin, url in
            let directory = try TemporaryDirectory()
            origin.behaviour = .stallAfter(400_000)
            // Decided by the outcome, not by how long it took: a busy machine may take longer.
            let outcome = await Self.download(Self.request(url, directory, etag: nil))
            #expect(outcome == .transport(kind: .timedOut, message: (try? Self.message(outcome)) ?? ""))
            #expect(try Data(contentsOf: directory.path("book.partial")).count == 400_000)
        }
    }

    static func message(_ outcome: DownloadOutcome) throws -> String {
        if case .transport(_, let message) = outcome { return message }
        return ""
    }

    @Test("several downloads run at once on one multi handle")
    func concurrent() async throws {
        try await TestOrigin.run(content: Self.content) { _, url in
            let directory = try TemporaryDirectory()
            let requests = (0..<5).map { index in
                DownloadRequest(key: "copy-\(index)", url: url, partialFile: directory.path("copy-\(index).partial"), etag: nil)
            }
            let outcomes = await Downloader(concurrency: 3).run(requests)
            #expect(outcomes.count == 5)
            #expect(outcomes.values.allSatisfy { $0 == .complete(size: Int64(Self.size), sha256: Self.digest, etag: $0.etag) })
        }
    }
}

extension DownloadOutcome {
    var etag: String? {
        if case .complete(_, _, let etag) = self { return etag }
        return nil
    }
}
