import Foundation
import KioskArchive
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// Updates of publication files (issue 47): a second edition of an EPUB made by Python's zipfile
/// (`scripts/make_epub.py --revise`) fetched as the chunks the installed edition lacks.
@Suite("Updates of publication files by content-defined chunks")
struct ChunkedUpdateTests {
    static let book = "com.kiosk.books.harbor-tales"

    struct Setup: Sendable {
        let context: LibraryTests.Context
        var publisherFile: URL { context.store.content.appendingPathComponent("publications/harbor-tales.epub") }
        var installedFile: URL { context.home.appendingPathComponent("Library/\(ChunkedUpdateTests.book)/harbor-tales.epub") }
        var partial: URL { context.home.appendingPathComponent("downloads/\(ChunkedUpdateTests.book).partial") }

        /// Publishes the book's next edition and queues its update; returns the edition's bytes.
        func publishEdition(revising chapter: Int) async throws -> Data {
            try ChunkedUpdateTests.makeEpub(publisherFile, revise: chapter)
            #expect(await context.server.catalog.reload())
            _ = try await context.client.sync()
            #expect(try await context.client.queueNewContent(includingUpdates: true) == [ChunkedUpdateTests.book])
            return try Data(contentsOf: publisherFile)
        }

        /// The store's manifest of the current edition.
        func manifest() async throws -> (ContentManifest, Int) {
            let packed = try #require(try await context.server.catalog.current.archives[ChunkedUpdateTests.book])
            let data = try Data(contentsOf: try #require(packed.manifestFile))
            return (try JSONDecoder().decode(ContentManifest.self, from: data), data.count)
        }
    }

    /// Forty chapters and two stored plates, about 2.6 MB: a picture book's shape, small.
    static func makeEpub(_ file: URL, revise: Int = 0) throws {
        let script = SampleStore.repository.appendingPathComponent("scripts/make_epub.py").path
        let made = try ToolProcess.run("/usr/bin/python3", [script, file.path, "--title", "Harbor Tales", "--author", "M. Ferris",
                                                                 "--chapters", "40", "--chapter-bytes", "30000", "--plates", "2", "--plate-bytes", "1200000",
                                                                 "--revise", String(revise)])
        try #require(made.status == 0, "make_epub.py failed: \(made.output)")
    }

    /// The EPUB bought and installed (its first edition).
    static func withInstalledBook<T: Sendable>(_ body: @Sendable (Setup) async throws -> T) async throws -> T {
        try await LibraryTests.withStore(prepare: { store in
            let folder = store.content.appendingPathComponent("publications")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try makeEpub(folder.appendingPathComponent("harbor-tales.epub"))
            try store.editCatalog("books.json") { products in
                var product = products[0]
                product["id"] = book
                product["title"] = "Harbor Tales"
                product["content"] = ["path": "publications/harbor-tales.epub", "format": "epub"]
                products.append(product)
            }
        }) { context in
            _ = try await context.client.buy(book)
            let setup = Setup(context: context)
            #expect(try Data(contentsOf: setup.installedFile) == Data(contentsOf: setup.publisherFile))
            return try await body(setup)
        }
    }

    @Test("the store's manifest of an EPUB lists its chunks, which make up the file; a chapter revised changes few of them")
    func manifestChunks() async throws {
        let directory = try TemporaryDirectory()
        let first = directory.path("first.epub")
        let second = directory.path("second.epub")
        try Self.makeEpub(first)
        try Self.makeEpub(second, revise: 7)
        let before = try ContentChunks.chunks(of: first)
        let after = try ContentChunks.chunks(of: second)
        let size = try Data(contentsOf: second).count
        #expect(after.reduce(0) { $0 + $1.chunk.length } == Int64(size))
        #expect(after.allSatisfy { $0.chunk.length <= Int64(ContentChunks.maximumSize) })
        let held = Set(before.map(\.chunk.sha256))
        let new = after.filter { !held.contains($0.chunk.sha256) }
        #expect(new.count >= 1 && new.count * 10 < after.count, "\(new.count) of \(after.count) chunks are new")
        // A manifest the store wrote has the same chunks.
        let manifest = try ContentManifest.chunked(file: second, format: .epub, sha256: FileDigest.sha256(of: second))
        #expect(manifest.chunks == after.map(\.chunk))
        #expect(manifest.chunking == ContentChunks.scheme)
    }

    @Test("a revised chapter: the update fetches the manifest and the new chunks only (under 5 % of the file) and installs the publisher's second edition byte for byte")
    func updatedByChunks() async throws {
        try await Self.withInstalledBook { setup in
            let edition = try await setup.publishEdition(revising: 12)
            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == edition)
            #expect(report.bytesReceived > 0 && report.bytesReceived * 20 < Int64(edition.count), "received \(report.bytesReceived) of \(edition.count)")
            let note = try #require(try await setup.context.download(Self.book)?.transferNote)
            #expect(note.contains("chunks fetched"), "\(note)")
            let (manifest, _) = try await setup.manifest()
            #expect(manifest.chunks?.isEmpty == false)
            #expect(!FileManager.default.fileExists(atPath: setup.partial.path))
            let library = try FileManager.default.contentsOfDirectory(atPath: setup.context.home.appendingPathComponent("Library").path)
            #expect(library.filter { $0.contains(Self.book) } == [Self.book])
        }
    }

    @Test("a second update uses the chunks the first one kept (the installed file is not cut again); one edited by hand after it is cut again; both install the right edition")
    func keptChunksReused() async throws {
        try await Self.withInstalledBook { setup in
            _ = try await setup.publishEdition(revising: 12)
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            let kept = setup.context.home.appendingPathComponent("manifests/\(Self.book).chunks.json")
            #expect(FileManager.default.fileExists(atPath: kept.path), "the first update keeps the installed file's chunks")
            let third = try await setup.publishEdition(revising: 20)
            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book] && report.bytesReceived * 20 < Int64(third.count))
            #expect(try Data(contentsOf: setup.installedFile) == third)
            // Written to in place since: the kept chunks no longer describe it; the update cuts it again.
            let handle = try FileHandle(forWritingTo: setup.installedFile)
            try handle.seek(toOffset: 300_000)
            try handle.write(contentsOf: Data(repeating: 0x42, count: 30_000))
            try handle.close()
            let fourth = try await setup.publishEdition(revising: 33)
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == fourth)
        }
    }

    @Test("an update interrupted half-way (its partial file ends inside a chunk, one byte before it flipped): resumed from the last good chunk, the installed file the second edition's")
    func interruptedUpdateResumes() async throws {
        try await Self.withInstalledBook { setup in
            let edition = try await setup.publishEdition(revising: 30)
            let (manifest, _) = try await setup.manifest()
            let chunks = try #require(manifest.chunks)
            // What a crash part-way through leaves: a prefix of the new edition, its last bytes torn.
            let cut = chunks.prefix(chunks.count / 2).reduce(0) { $0 + Int($1.length) } + 100
            var left = edition.prefix(cut)
            left[left.startIndex + cut - 2000] ^= 0xFF
            try FileManager.default.createDirectory(at: setup.partial.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(left).write(to: setup.partial)
            let sha256 = FileDigest.sha256(of: edition)
            try setup.context.sql("UPDATE download SET bytesDone = ?, partialETag = ? WHERE productId = ?", [cut, "\"\(sha256)\"", Self.book])

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == edition)
            #expect(report.bytesReceived * 20 < Int64(edition.count), "received \(report.bytesReceived) of \(edition.count)")
            #expect(try await setup.context.download(Self.book)?.mismatches == 0)
        }
    }

    @Test("the installed file edited by hand: the chunks it no longer holds are fetched; the installed file is the second edition's")
    func handEditedInstalledFile() async throws {
        try await Self.withInstalledBook { setup in
            // Overwrite a stretch in the middle of the installed (first) edition.
            let handle = try FileHandle(forWritingTo: setup.installedFile)
            try handle.seek(toOffset: 600_000)
            try handle.write(contentsOf: Data(repeating: 0x41, count: 50_000))
            try handle.close()
            let edition = try await setup.publishEdition(revising: 3)
            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == edition)
            #expect(report.bytesReceived < Int64(edition.count) / 5, "received \(report.bytesReceived) of \(edition.count)")
        }
    }

    @Test("a manifest the catalog does not vouch for (changed on the server's disk): no chunk of it is used; the full download installs the right edition")
    func tamperedManifestRefused() async throws {
        try await Self.withInstalledBook { setup in
            let edition = try await setup.publishEdition(revising: 5)
            let packed = try #require(try await setup.context.server.catalog.current.archives[Self.book])
            let file = try #require(packed.manifestFile)
            var manifest = try JSONDecoder().decode(ContentManifest.self, from: Data(contentsOf: file))
            manifest.chunks?.reverse()
            try manifest.encoded().write(to: file)
            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == edition)
            #expect(report.bytesReceived == Int64(edition.count), "the whole file, once")
        }
    }

    @Test("a first download of an EPUB resumed after a crash is checked chunk by chunk: a flipped byte is fetched again, nothing before it")
    func firstDownloadResumeChecked() async throws {
        try await LibraryTests.withStore(prepare: { store in
            let folder = store.content.appendingPathComponent("publications")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Self.makeEpub(folder.appendingPathComponent("harbor-tales.epub"))
            try store.editCatalog("books.json") { products in
                var product = products[0]
                product["id"] = Self.book
                product["content"] = ["path": "publications/harbor-tales.epub", "format": "epub"]
                products.append(product)
            }
        }) { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            let setup = Setup(context: context)
            let whole = try Data(contentsOf: setup.publisherFile)
            let (manifest, _) = try await setup.manifest()
            let chunks = try #require(manifest.chunks)
            let badChunk = chunks.count / 3
            let badOffset = chunks.prefix(badChunk).reduce(0) { $0 + Int($1.length) }
            var left = whole.prefix(whole.count * 2 / 3)
            left[left.startIndex + badOffset + 10] ^= 0xFF
            try FileManager.default.createDirectory(at: setup.partial.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(left).write(to: setup.partial)
            try context.sql("UPDATE download SET bytesDone = ?, partialETag = ? WHERE productId = ?", [left.count, "\"\(FileDigest.sha256(of: whole))\"", Self.book])
            let report = try await context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try Data(contentsOf: setup.installedFile) == whole)
            #expect(report.bytesReceived == Int64(whole.count - badOffset), "from the bad chunk on, nothing before it")
        }
    }
}
