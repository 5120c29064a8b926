import Foundation
import KioskArchive
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// A zip resumed after a crash continues after the entries of its partial file that match the
/// version's manifest, not after whatever length the crash left.
@Suite("Resumes checked entry by entry against the manifest")
struct PieceVerifiedResumeTests {
    static let book = "com.kiosk.books.three-hundred-pages"

    struct Setup: Sendable {
        let context: LibraryTests.Context
        let archive: Data
        let manifest: ContentManifest
        let sha256: String

        var partial: URL { context.home.appendingPathComponent("downloads/\(PieceVerifiedResumeTests.book).partial") }
        var source: URL { context.store.content.appendingPathComponent("books/three-hundred-pages") }
        var installed: URL { context.home.appendingPathComponent("Library/\(PieceVerifiedResumeTests.book)") }

        /// The file entries in archive order.
        var entries: [ContentManifest.Entry] {
            manifest.entries.filter { $0.kind == .file }.sorted { ($0.offset ?? 0) < ($1.offset ?? 0) }
        }

        /// Leaves `bytes` as the partial file of the bought book, as a crashed run would, with the
        /// progress committed for all of it and the ETag of the server's version.
        func leavePartial(_ bytes: Data) throws {
            try FileManager.default.createDirectory(at: partial.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.write(to: partial)
            try context.sql("UPDATE download SET bytesDone = ?, partialETag = ? WHERE productId = ?", [bytes.count, "\"\(sha256)\"", PieceVerifiedResumeTests.book])
        }
    }

    /// A zip book of 300 incompressible 4 KiB pages, bought but not downloaded.
    static func withBoughtBook<T: Sendable>(_ body: @Sendable (Setup) async throws -> T) async throws -> T {
        try await LibraryTests.withStore(prepare: { try $0.addManyFileBook(book, files: 300, kilobytes: 4, format: "zip") }) { context in
            _ = try await context.client.buy(book, downloadNow: false)
            let packed = try #require(try await context.server.catalog.current.archives[book])
            let manifestData = try Data(contentsOf: try #require(packed.manifestFile))
            let setup = Setup(
                context: context, archive: try Data(contentsOf: packed.file),
                manifest: try JSONDecoder().decode(ContentManifest.self, from: manifestData), sha256: packed.sha256)
            #expect(setup.manifest.hasRanges)
            return try await body(setup)
        }
    }

    @Test("a partial file with a flipped byte in its middle entry resumes from that entry's first byte and installs the right tree")
    func corruptMiddleEntry() async throws {
        try await Self.withBoughtBook { setup in
            let entries = setup.entries
            let bad = entries[100]
            let end = try #require(entries[200].offset)
            var bytes = setup.archive.prefix(Int(end))
            let badOffset = try #require(bad.offset)
            let badLength = try #require(bad.length)
            let flipped = Int(badOffset + badLength / 2)
            bytes[flipped] ^= 0xFF
            try setup.leavePartial(Data(bytes))

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            // Everything from the bad entry on arrives again, and nothing before it.
            let good = badOffset
            #expect(report.bytesReceived == Int64(setup.archive.count) - good,
                    "received \(report.bytesReceived) of a \(setup.archive.count)-byte archive, good prefix \(good)")
            #expect(try await setup.context.download(Self.book)?.mismatches == 0, "the download never failed its whole-archive checksum")
        }
    }

    @Test("a clean partial file resumes from its length")
    func cleanPartial() async throws {
        try await Self.withBoughtBook { setup in
            // Ends inside an entry: the entries before it are checked, its start cannot be yet.
            let length = Int(try #require(setup.entries[150].offset)) + 100
            try setup.leavePartial(setup.archive.prefix(length))

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(report.bytesReceived == Int64(setup.archive.count - length))
        }
    }

    @Test("a partial file whose real bytes end in garbage is cut back to the first entry the garbage reaches")
    func garbageTail() async throws {
        try await Self.withBoughtBook { setup in
            let entries = setup.entries
            let cut = try #require(entries[150].offset)
            let realEnd = Int(cut) + 50
            let garbageEnd = Int(try #require(entries[200].offset)) + 10
            var bytes = setup.archive.prefix(realEnd)
            bytes.append(TestOrigin.incompressible(garbageEnd - realEnd, seed: "garbage"))
            try setup.leavePartial(Data(bytes))

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(report.bytesReceived == Int64(setup.archive.count) - cut,
                    "received \(report.bytesReceived) of a \(setup.archive.count)-byte archive, good prefix \(cut)")
        }
    }

    @Test("a damaged first entry: the resume starts from zero and still installs the right tree")
    func corruptFirstEntry() async throws {
        try await Self.withBoughtBook { setup in
            let first = setup.entries[0]
            var bytes = setup.archive.prefix(Int(try #require(setup.entries[50].offset)))
            bytes[Int(try #require(first.offset) + 40)] ^= 0x01
            try setup.leavePartial(Data(bytes))

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(report.bytesReceived == Int64(setup.archive.count) - (first.offset ?? 0))
        }
    }
}
