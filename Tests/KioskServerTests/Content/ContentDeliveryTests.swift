import Crypto
import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// Content as the server sends it: by sendfile, in ranges, over kept-alive connections, and a
/// one-line 503 when the archive is gone.
@Suite("Content delivery: sendfile, ranges and missing archives")
struct ContentDeliveryTests: LargeBookSuite {
    @Test("stream delivery sends by sendfile: 24 ranged GETs at once each get exactly their slice and Content-Length, a HEAD its size; the internal file field never reaches the wire")
    func sendfileRanges() async throws {
        try await Self.withLargeBook { _, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let (head, archive) = try await Self.headAndArchive(url, auth: auth, store: store)
            let file = try Data(contentsOf: archive)
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == String(file.count))
            #expect(head.body.isEmpty)

            let size = file.count
            var ranges: [ClosedRange<Int>] = [0...0, (size - 1)...(size - 1), 0...(size - 1), 4095...4096, 1...(size - 2)]
            var generator = SystemRandomNumberGenerator()
            while ranges.count < 24 {
                let lower = Int.random(in: 0..<size, using: &generator)
                ranges.append(lower...Int.random(in: lower..<size, using: &generator))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for range in ranges {
                    group.addTask {
                        let response = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")])
                        #expect(response.status == 206)
                        #expect(response.headers["content-length"] == String(range.count))
                        #expect(response.headers["content-range"] == "bytes \(range.lowerBound)-\(range.upperBound)/\(size)")
                        #expect(response.headers["kiosk-sendfile"] == nil)
                        #expect(response.body == file[range], "bytes \(range)")
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("curl reusing one connection for three downloads of the archive gets each byte-exact: a sendfile answer ends where its Content-Length says")
    func sendfileKeepAlive() async throws {
        try await Self.withLargeBook { _, _, url, receipt in
            let directory = try TemporaryDirectory()
            let target = url + "/v1/content/\(Self.large)"
            let curl = Process()
            curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            let outputs = (0..<3).map { directory.path("copy\($0).zip").path }
            // `--next` starts each transfer's own options; curl keeps its connections across them.
            let common = ["-sf", "-w", "%{num_connects} ", "-H", "Authorization: Receipt \(receipt)"]
            curl.arguments = ["curl"] + common + ["-r", "0-99", target, "-o", outputs[0], "--next"]
                + common + [target, "-o", outputs[1], "--next"]
                + common + ["-r", "5-", target, "-o", outputs[2]]
            let pipe = Pipe()
            curl.standardOutput = pipe
            try curl.runAlone()
            let written = try await offCooperativePool { pipe.fileHandleForReading.readDataToEndOfFile() }
            curl.waitForExit()
            #expect(curl.terminationStatus == 0)
            // One connection opened for the first transfer, none for the two after it.
            #expect(String(decoding: written, as: UTF8.self) == "1 0 0 ")
            let whole = try await Self.get(target, headers: [("Authorization", "Receipt \(receipt)")]).body
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[0])) == whole.prefix(100))
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[1])) == whole)
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[2])) == whole.dropFirst(5))
        }
    }

    @Test("an archive gone from the data folder is a one-line 503 naming it, no bytes; the server keeps answering")
    func sendfileMissingArchive() async throws {
        try await Self.withLargeBook { _, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let archive = try await Self.headAndArchive(url, auth: auth, store: store).archive
            try FileManager.default.removeItem(at: archive)

            let gone = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth])
            #expect(gone.status == 503)
            let failure = try JSONDecoder().decode(APIError.self, from: gone.body)
            #expect(failure.code == "content_unavailable")
            #expect(failure.message.contains(archive.path))
            #expect(!failure.message.contains("\n"))
            #expect(try await Self.get(url + "/v1/catalog").status == 200)
        }
    }
}
