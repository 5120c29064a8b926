import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// A ranged download resumed across catalog reloads: If-Range and If-Match name the version, and a
/// resume is never a splice of two.
@Suite("Resuming content across reloads: If-Range, If-Match and ETags")
struct ResumeTests: LargeBookSuite {
    @Test("a reload that changes a book while a ranged download of the old version is in flight: the resume finishes the old version byte-exact, an unknown If-Range restarts, never a splice")
    func reloadDuringResume() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=0-1048575")])
            #expect(first.status == 206)
            let oldTag = try #require(first.headers["etag"])

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            // The resume of the old version finishes from the old bytes: byte-exact, one version.
            let resumed = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", oldTag)])
            #expect(resumed.status == 206)
            #expect(resumed.headers["etag"] == oldTag)
            #expect("\"\(FileDigest.sha256(of: first.body + resumed.body))\"" == oldTag)

            // A tag the store no longer has restarts with the whole new version, never a splice.
            let restarted = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", "\"0000\"")])
            #expect(restarted.status == 200)
            let newTag = try #require(restarted.headers["etag"])
            #expect(newTag != oldTag)
            #expect("\"\(FileDigest.sha256(of: restarted.body))\"" == newTag)

            // The old archive is still there under its own name, with its own bytes.
            let oldFile = store.data.appendingPathComponent("content/\(oldTag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))).zip")
            #expect("\"\(try FileDigest.sha256(of: oldFile))\"" == oldTag)
        }
    }

    @Test("a reload that changes nothing, right after one that changed a book, keeps the replaced version: its resume is still 206 from its own bytes")
    func noOpReloadKeepsPrevious() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=0-1048575")])
            #expect(first.status == 206)
            let oldTag = try #require(first.headers["etag"])

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            // A second SIGHUP with nothing changed (a deploy script reloading every instance, say).
            #expect(await server.catalog.reload())

            let resumed = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", oldTag)])
            #expect(resumed.status == 206)
            #expect(resumed.headers["etag"] == oldTag)
            #expect("\"\(FileDigest.sha256(of: first.body + resumed.body))\"" == oldTag)
            let named = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", oldTag), ("Range", "bytes=0-99")])
            #expect(named.status == 206)
        }
    }

    @Test("If-Match names the version: the current one or the one a reload replaced is served, any other is 412 and no bytes")
    func ifMatch() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth])
            let firstTag = try #require(first.headers["etag"])
            #expect(try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag)]).status == 200)

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            let replaced = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag), ("Range", "bytes=0-99")])
            #expect(replaced.status == 206)
            #expect(replaced.headers["etag"] == firstTag)
            #expect(replaced.body == first.body.prefix(100))

            try Self.rewriteLargeBook(store, seed: "third edition")
            #expect(await server.catalog.reload())
            let gone = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag)])
            #expect(gone.status == 412)
            #expect(String(decoding: gone.body, as: UTF8.self).contains("version_changed"))
            #expect(gone.body.count < 1024)
        }
    }

    @Test("GETs racing reloads: every body's SHA-256 is its ETag")
    func racingReloads() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for round in 0..<4 {
                        try Self.rewriteLargeBook(store, seed: "edition \(round)")
                        _ = await server.catalog.reload()
                    }
                }
                for _ in 0..<3 {
                    group.addTask {
                        for _ in 0..<4 {
                            let response = try await Self.get(url + "/v1/content/\(Self.large)", headers: [("Authorization", "Receipt \(receipt)")])
                            #expect(response.status == 200)
                            #expect("\"\(FileDigest.sha256(of: response.body))\"" == response.headers["etag"])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}
