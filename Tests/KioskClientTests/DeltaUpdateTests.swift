import Foundation
import KioskArchive
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Logging
import Testing

@Suite("Updates that fetch only the entries that changed")
struct DeltaUpdateTests {
    static let book = "com.kiosk.books.three-hundred-pages"
    static let pages = 300

    struct Setup: Sendable {
        let context: LibraryTests.Context
        var source: URL { context.store.content.appendingPathComponent("books/three-hundred-pages") }
        var installed: URL { context.home.appendingPathComponent("Library/\(DeltaUpdateTests.book)") }
        var serverContent: URL { context.store.data.appendingPathComponent("content") }

        func page(_ index: Int) -> URL { source.appendingPathComponent(String(format: "page-%03d.bin", index)) }

        /// The server's manifest of the product's current version.
        func manifest() throws -> (ContentManifest, Data) {
            let sha256 = try #require(try context.client.cachedCatalog().products.first { $0.id == DeltaUpdateTests.book }?.content?.sha256)
            let data = try Data(contentsOf: serverContent.appendingPathComponent("\(sha256).manifest.json"))
            return (try JSONDecoder().decode(ContentManifest.self, from: data), data)
        }

        /// Publishes what the source folder now holds and queues the update.
        func publishAndQueue() async throws {
            #expect(await context.server.catalog.reload())
            _ = try await context.client.sync()
            #expect(try await context.client.queueNewContent(includingUpdates: true) == [DeltaUpdateTests.book])
        }

        func record() throws -> DownloadRecord? {
            try context.client.downloads().first { $0.productId == DeltaUpdateTests.book }
        }
    }

    /// A zip book of 300 incompressible 4 KiB pages, bought and installed whole.
    static func withInstalledBook<T: Sendable>(_ body: @Sendable (Setup) async throws -> T) async throws -> T {
        try await LibraryTests.withStore(prepare: { try $0.addManyFileBook(book, files: pages, kilobytes: 4, format: "zip") }) { context in
            _ = try await context.client.buy(book)
            let setup = Setup(context: context)
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            return try await body(setup)
        }
    }

    @Test("one page changed, one added, one removed: only those entries and the manifest are fetched, and the tree is the new version's, byte for byte")
    func changedAddedRemoved() async throws {
        try await Self.withInstalledBook { setup in
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try TestOrigin.incompressible(4 << 10, seed: "page-300").write(to: setup.page(300))
            try FileManager.default.removeItem(at: setup.page(20))
            try await setup.publishAndQueue()

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))

            let (manifest, manifestBytes) = try setup.manifest()
            let fetched = manifest.entries.filter { $0.path == "page-010.bin" || $0.path == "page-300.bin" }.compactMap(\.length).reduce(0, +)
            #expect(report.bytesReceived == fetched + Int64(manifestBytes.count))
            #expect(report.bytesReceived * 20 < manifest.archiveSize)
            #expect(try setup.record()?.transferNote?.hasSuffix("(3 files changed)") == true)
            #expect(try setup.context.client.libraryEntries().first?.updateAvailable == false)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: setup.context.home.appendingPathComponent("Library").path)
            #expect(leftovers == [Self.book])
        }
    }

    @Test("after an update by entries, every installed file's status is recorded as it is: the next update reads none of them again")
    func updatedTreeTrustedNextTime() async throws {
        try await Self.withInstalledBook { setup in
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            #expect(await setup.context.server.catalog.reload())
            _ = try await setup.context.client.sync()
            let first = try await setup.context.client.queueNewContent(includingUpdates: true)
            let rows = try setup.context.client.downloads().map { "\($0.productId) \($0.state) \($0.sha256.prefix(8))" }
            #expect(first == [Self.book], "queued \(first); downloads \(rows)")
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            // Removing the old tree unlinks the files the new one shares with it, which moves their
            // status change time; the recorded status must be taken after that, or every file is hashed again.
            let statusFile = setup.context.home.appendingPathComponent("manifests/\(Self.book).status.json")
            let recorded = try JSONDecoder().decode([String: String].self, from: Data(contentsOf: statusFile))
            let names = try FileManager.default.contentsOfDirectory(atPath: setup.installed.path)
            #expect(names.count == Self.pages)
            let untrusted = names.filter { name in
                var file = stat()
                guard lstat(setup.installed.appendingPathComponent(name).path, &file) == 0 else { return true }
                return recorded[name] != "\(file.st_ino):\(Int64(file.st_ctim.tv_sec) * 1_000_000_000 + Int64(file.st_ctim.tv_nsec))"
            }
            #expect(untrusted.isEmpty, "not recorded as they are: \(untrusted.prefix(3))")

            // An edit after the install is still seen.
            try Data("edited".utf8).write(to: setup.installed.appendingPathComponent("page-050.bin"))
            try TestOrigin.incompressible(4 << 10, seed: "page-11-corrected").write(to: setup.page(11))
            #expect(await setup.context.server.catalog.reload())
            _ = try await setup.context.client.sync()
            let queued = try await setup.context.client.queueNewContent(includingUpdates: true)
            #expect(queued == [Self.book])
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(try setup.record()?.transferNote?.hasSuffix("(2 files changed)") == true)
        }
    }

    @Test("an installed folder replaced by a link to a copy outside the home: no file outside is linked into the library; the tree is the new version's")
    func linkedFolderNotFollowed() async throws {
        try await Self.withInstalledBook { setup in
            let outside = try TemporaryDirectory()
            let copy = outside.url.appendingPathComponent("copy")
            try FileManager.default.copyItem(at: setup.installed, to: copy)
            try FileManager.default.removeItem(at: setup.installed)
            try FileManager.default.createSymbolicLink(at: setup.installed, withDestinationURL: copy)
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            let shared = try FileManager.default.contentsOfDirectory(atPath: copy.path).filter { name in
                var info = stat()
                return lstat(copy.appendingPathComponent(name).path, &info) == 0 && info.st_nlink > 1
            }
            #expect(shared.isEmpty, "files outside the home linked into the library: \(shared.prefix(3))")
        }
    }

    @Test("an installed page edited by hand is fetched again with the update; the tree is the new version's")
    func handEditedFileRefetched() async throws {
        try await Self.withInstalledBook { setup in
            // Same size, other bytes: only reading the file tells.
            try TestOrigin.incompressible(4 << 10, seed: "scribbled").write(to: setup.installed.appendingPathComponent("page-005.bin"))
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            let (manifest, manifestBytes) = try setup.manifest()
            let fetched = manifest.entries.filter { $0.path == "page-010.bin" || $0.path == "page-005.bin" }.compactMap(\.length).reduce(0, +)
            #expect(report.bytesReceived == fetched + Int64(manifestBytes.count))
            #expect(try setup.record()?.transferNote?.hasSuffix("(2 files changed)") == true)
        }
    }

    @Test("a clock stepped back: a same-size hand edit, stamped earlier than the install, is still fetched again with the update")
    func clockSteppedBackEditRefetched() async throws {
        try await Self.withInstalledBook { setup in
            // The install happened an hour "later" than the clock now says (it was stepped back
            // since): every edit from now on carries an older change time than the install's check.
            let future = Date().addingTimeInterval(3600)
            for name in ["\(Self.book).json", "\(Self.book).status.json"] {
                try FileManager.default.setAttributes([.modificationDate: future], ofItemAtPath: setup.context.home.appendingPathComponent("manifests/\(name)").path)
            }
            try TestOrigin.incompressible(4 << 10, seed: "scribbled").write(to: setup.installed.appendingPathComponent("page-005.bin"))
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()
            #expect(try await setup.context.client.runDownloads().installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source), "the hand edit was installed as the published version")
            #expect(try setup.record()?.transferNote?.hasSuffix("(2 files changed)") == true)
        }
    }

    @Test("a manifest the catalog vouches for whose ranges point at the wrong entries ends in a full download of the right tree")
    func lyingRangesFallBack() async throws {
        try await Self.withInstalledBook { setup in
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            #expect(await setup.context.server.catalog.reload())
            _ = try await setup.context.client.sync()

            // The server's manifest now sends page 10's fetch to page 11's bytes, and the catalog
            // publishes the lying manifest's own SHA-256.
            var (manifest, _) = try setup.manifest()
            let ten = try #require(manifest.entries.firstIndex { $0.path == "page-010.bin" })
            let eleven = try #require(manifest.entries.firstIndex { $0.path == "page-011.bin" })
            manifest.entries[ten].offset = manifest.entries[eleven].offset
            manifest.entries[ten].length = manifest.entries[eleven].length
            let lying = try manifest.encoded()
            try lying.write(to: setup.serverContent.appendingPathComponent("\(manifest.archiveSha256).manifest.json"))
            let recordFile = setup.serverContent.appendingPathComponent("records/\(Self.book).json")
            var record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: recordFile)) as? [String: Any])
            record["manifestSha256"] = FileDigest.sha256(of: lying)
            try JSONSerialization.data(withJSONObject: record).write(to: recordFile)
            try await setup.publishAndQueue()
            #expect(try setup.context.client.cachedCatalog().products.first { $0.id == Self.book }?.content?.manifestSha256 == FileDigest.sha256(of: lying))

            let report = try await setup.context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(report.bytesReceived >= manifest.archiveSize)
            #expect(try setup.record()?.transferNote == nil)
        }
    }

    @Test("an archive replaced under the server: the entries do not match, the full download fails its checksum, and the installed version stays whole")
    func archiveReplacedUnderServer() async throws {
        try await Self.withInstalledBook { setup in
            let before = try FolderSnapshot.files(in: setup.installed)
            let oldSha256 = try #require(try setup.context.client.cachedCatalog().products.first { $0.id == Self.book }?.content?.sha256)
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()
            let (manifest, _) = try setup.manifest()
            // Same size, other bytes: the old version's archive under the new one's name.
            let archive = setup.serverContent.appendingPathComponent("\(manifest.archiveSha256).zip")
            try Data(contentsOf: setup.serverContent.appendingPathComponent("\(oldSha256).zip")).write(to: archive)

            // As `kiosk resume`: the version that failed for good is not tried again round after round.
            let report = try await setup.context.client.resume()
            #expect(try FolderSnapshot.files(in: setup.installed) == before)
            #expect(try setup.record()?.state == .failed)
            #expect(report.downloads.failed == [Self.book])
            #expect(report.downloads.bytesReceived <= 2 * manifest.archiveSize + 64 << 10, "\(report.downloads.bytesReceived) bytes for an archive of \(manifest.archiveSize)")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: setup.context.home.appendingPathComponent("Library").path)
            #expect(leftovers == [Self.book])
            // Nor by the next resume.
            let again = try await setup.context.client.resume()
            #expect(again.downloads.bytesReceived == 0)
            #expect(again.failedEarlier == [Self.book])
        }
    }

    @Test("a tar.gz update downloads the whole archive and installs the new tree")
    func tarGzDownloadsWhole() async throws {
        try await LibraryTests.withStore(prepare: { try $0.addManyFileBook(Self.book, files: 20, kilobytes: 4) }) { context in
            _ = try await context.client.buy(Self.book)
            let setup = Setup(context: context)
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()
            let report = try await context.client.runDownloads()
            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(try setup.record()?.transferNote == nil)
        }
    }

    /// Changes page 10 of the book, publishes it into `folder`, reloads the server and runs the
    /// client's update: the tree is the new version's and the bytes received are the changed
    /// entry's and the manifest's. Returns the new archive as published.
    static func updateChangedPage(store: SampleStore, folder: PublishedFolder, server: KioskServer, client: KioskClient, installed: URL) async throws -> PackedContent {
        let source = store.content.appendingPathComponent("books/three-hundred-pages")
        try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: source.appendingPathComponent("page-010.bin"))
        let republished = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        // nginx tags the catalog file by its mtime (whole seconds) and size, which the new
        // document shares with the old one when written within the same second.
        for name in ["catalog.json", "catalog.json.gz"] {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: folder.url.appendingPathComponent(name).path)
        }
        #expect(await server.catalog.reload())
        _ = try await client.sync()
        #expect(try await client.queueNewContent(includingUpdates: true) == [Self.book])
        let report = try await client.runDownloads()
        #expect(report.installed == [Self.book])
        #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: source))

        let packed = try #require(republished.archives[Self.book])
        let manifestData = try Data(contentsOf: try #require(packed.manifestFile))
        let manifest = try JSONDecoder().decode(ContentManifest.self, from: manifestData)
        let entry = try #require(manifest.entries.first { $0.path == "page-010.bin" })
        #expect(report.bytesReceived == (entry.length ?? 0) + Int64(manifestData.count))
        return packed
    }

    @Test("through nginx x-accel: the manifest from Kiosk, the changed entry's range from nginx as a 206, the tree the new version's")
    func throughXAccel() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.addManyFileBook(Self.book, files: 50, kilobytes: 4, format: "zip")
        let folder = PublishedFolder(directory.path("published"))
        _ = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.publishedDirectory = folder.url
        configuration.contentDelivery = .xAccel(internalPrefix: "/_kiosk/archives/")
        try await LiveServer.run(configuration) { server, url in
            try await TestNginx.with(upstreams: [url.replacingOccurrences(of: "http://", with: "")], published: folder.url, secret: "unused") { nginx in
                let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: nginx.baseURL)
                _ = try await client.sync()
                _ = try await client.buy(Self.book)
                let source = store.content.appendingPathComponent("books/three-hundred-pages")
                let installed = directory.path("home").appendingPathComponent("Library/\(Self.book)")
                #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: source))

                let packed = try await Self.updateChangedPage(store: store, folder: folder, server: server, client: client, installed: installed)
                let ranges = nginx.accessLog().filter { $0.contains("/v1/content/\(Self.book)?version=\(packed.sha256)") && $0.contains("\" 206 ") }
                #expect(ranges.count == 1, "\(nginx.accessLog())")
            }
        }
    }

    @Test("through a signed redirect: the manifest from Kiosk, the changed entry's range from the edge the store redirects to, the tree the new version's")
    func throughSignedRedirect() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.addManyFileBook(Self.book, files: 50, kilobytes: 4, format: "zip")
        let folder = PublishedFolder(directory.path("published"))
        _ = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        let secret = "test-secret-\(UUID().uuidString)"
        // nginx needs no upstream here: the client talks to Kiosk, which redirects the archive to nginx.
        try await TestNginx.with(upstreams: ["127.0.0.1:9"], published: folder.url, secret: secret) { nginx in
            var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
            configuration.publishedDirectory = folder.url
            configuration.contentDelivery = .signedRedirect(baseURL: nginx.baseURL + "/archives/", secret: secret, lifetime: 60)
            try await LiveServer.run(configuration) { server, url in
                let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
                _ = try await client.sync()
                _ = try await client.buy(Self.book)
                let source = store.content.appendingPathComponent("books/three-hundred-pages")
                let installed = directory.path("home").appendingPathComponent("Library/\(Self.book)")
                #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: source))

                let packed = try await Self.updateChangedPage(store: store, folder: folder, server: server, client: client, installed: installed)
                #expect(try client.downloads().first { $0.productId == Self.book }?.transferNote?.hasSuffix("(1 file changed)") == true)
                // The entry's bytes came from the edge, as one 206 of the new archive's signed URL.
                let ranges = nginx.accessLog().filter { $0.contains("/archives/\(packed.file.lastPathComponent)?md5=") && $0.contains("\" 206 ") }
                #expect(ranges.count == 1, "\(nginx.accessLog())")
            }
        }
    }

    @Test("the version replaced twice on the server between the manifest and the ranges: 412, no spliced tree; the run syncs and installs the newest version by entries")
    func versionReplacedMidUpdate() async throws {
        try await Self.withInstalledBook { setup in
            let context = setup.context
            try TestOrigin.incompressible(4 << 10, seed: "page-10-corrected").write(to: setup.page(10))
            try await setup.publishAndQueue()
            let (firstUpdate, _) = try setup.manifest()
            let requests = RequestLog()
            let report = try await ForwardingProxy.run(to: context.url, hook: { target, isRange in
                requests.append(target, isRange: isRange)
                // The first range request of the update: the version it fetches is replaced twice,
                // so the store no longer serves it even as the one a reload just replaced.
                guard isRange, requests.firstRange() else { return }
                try? TestOrigin.incompressible(4 << 10, seed: "page-11-corrected").write(to: setup.page(11))
                _ = await context.server.catalog.reload()
                try? TestOrigin.incompressible(4 << 10, seed: "page-12-corrected").write(to: setup.page(12))
                _ = await context.server.catalog.reload()
            }) { proxy in
                try await KioskClient(home: KioskHome(root: context.home), server: proxy).runDownloads()
            }
            let (newest, newestManifest) = try setup.manifest()
            #expect(newest.archiveSha256 != firstUpdate.archiveSha256)
            #expect(requests.ranges().first?.contains("version=\(firstUpdate.archiveSha256)") == true, "\(requests.ranges())")
            #expect(requests.ranges().contains { $0.contains("version=\(newest.archiveSha256)") }, "\(requests.ranges())")

            #expect(report.installed == [Self.book])
            #expect(try FolderSnapshot.files(in: setup.installed) == FolderSnapshot.files(in: setup.source))
            #expect(try setup.record()?.transferNote?.hasSuffix("(3 files changed)") == true)
            let changed = newest.entries.filter { ["page-010.bin", "page-011.bin", "page-012.bin"].contains($0.path) }.compactMap(\.length).reduce(0, +)
            #expect(report.bytesReceived >= changed + Int64(newestManifest.count))
            #expect(report.bytesReceived * 10 < newest.archiveSize, "no whole archive was fetched")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: context.home.appendingPathComponent("Library").path)
            #expect(leftovers == [Self.book])
        }
    }
}

/// The requests a ``ForwardingProxy`` passed on, in order.
final class RequestLog: @unchecked Sendable {
    private let lock = NSLock()
    private var targets: [(target: String, isRange: Bool)] = []

    func append(_ target: String, isRange: Bool) {
        lock.withLock { targets.append((target, isRange)) }
    }

    /// True for the first range request only.
    func firstRange() -> Bool {
        lock.withLock { targets.filter(\.isRange).count == 1 }
    }

    func ranges() -> [String] {
        lock.withLock { targets.filter(\.isRange).map(\.target) }
    }
}
