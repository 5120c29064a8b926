import Foundation
import GRDB
import KioskArchive
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Logging
import Testing

@Suite("Downloads against a live store")
struct LibraryTests {
    static let book = "com.kiosk.books.lighthouse-keeper"
    static let otherBook = "com.kiosk.books.small-engines"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    struct Context: Sendable {
        let server: KioskServer
        let client: KioskClient
        let url: String
        let store: SampleStore
        let directory: TemporaryDirectory

        var home: URL { directory.path("home") }

        func sql(_ statement: String, _ arguments: StatementArguments = []) throws {
            let database = try DatabaseQueue(path: home.appendingPathComponent("kiosk.sqlite").path)
            try database.write { try $0.execute(sql: statement, arguments: arguments) }
        }

        func download(_ id: String) async throws -> DownloadRecord? {
            try client.downloads().first { $0.productId == id }
        }
    }

    static func withStore<T: Sendable>(prepare: @Sendable (SampleStore) throws -> Void = { _ in }, _ body: @Sendable (Context) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try prepare(store)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        return try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            _ = try await client.sync()
            return try await body(Context(server: server, client: client, url: url, store: store, directory: directory))
        }
    }

    @Test("a link where the partial download goes: refused, nothing outside written, and the reader told to remove it (not to free space)")
    func linkInPlaceOfPartial() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            let outside = context.directory.url.appendingPathComponent("outside.txt")
            try Data("mine".utf8).write(to: outside)
            let downloads = context.home.appendingPathComponent("downloads")
            try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: downloads.appendingPathComponent("\(Self.book).partial"), withDestinationURL: outside)
            let report = try await context.client.runDownloads()
            #expect(report.installed.isEmpty)
            let error = try #require(try context.client.downloads().first { $0.productId == Self.book }?.lastError)
            #expect(error.contains("remove it and the download starts again") && !error.contains("free some space"), "\(error)")
            #expect(try Data(contentsOf: outside) == Data("mine".utf8))
        }
    }

    @Test("a bought book is downloaded, verified, unpacked into the library and its transaction finished")
    func buyAndInstall() async throws {
        try await Self.withStore { context in
            let bought = try await context.client.buy(Self.book)
            #expect(bought.record.state == .finished)
            #expect(bought.downloads?.installed == [Self.book])
            let installed = context.home.appendingPathComponent("Library/\(Self.book)")
            let original = context.store.content.appendingPathComponent("books/lighthouse-keeper")
            #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: original))
            #expect(try await context.client.transactions().first?.record.state == .finished)
            #expect(try context.client.libraryEntries().map(\.item.productId) == [Self.book])
            #expect(!FileManager.default.fileExists(atPath: context.home.appendingPathComponent("downloads/\(Self.book).partial").path))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: context.home.appendingPathComponent("Library").path)
            #expect(leftovers == [Self.book])
        }
    }

    @Test("a receipt that does not verify: 401, failed with the reason, no retry storm")
    func unauthorized() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            try context.sql("UPDATE download SET receipt = 'forged.receipt.value'")
            let report = try await context.client.runDownloads()
            #expect(report.failed == [Self.book])
            let record = try #require(try await context.download(Self.book))
            #expect(record.state == .failed)
            #expect(record.lastError?.contains("401") == true)
            #expect(try await context.client.runDownloads() == DownloadRunReport())
            #expect(try await context.download(Self.book)?.attempts == 1)
        }
    }

    @Test("a receipt for another book: 403, failed, nothing installed")
    func forbidden() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            try context.sql("INSERT INTO download SELECT ?, state, sha256, size, version, format, receipt, 0, NULL, 0, NULL, NULL, 0, createdAt, updatedAt, NULL, NULL, transactionId, 0, NULL, NULL, proofKind, NULL, fileName, NULL FROM download", [Self.otherBook])
            let report = try await context.client.runDownloads(only: [Self.otherBook])
            #expect(report.failed == [Self.otherBook])
            #expect(try await context.download(Self.otherBook)?.lastError?.contains("403") == true)
            #expect(!FileManager.default.fileExists(atPath: context.home.appendingPathComponent("Library/\(Self.otherBook)").path))
        }
    }

    @Test("a product the operator removed from the store for good: 404, failed with the reason")
    func notFound() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            try context.store.editCatalog("books.json") { $0.removeAll { ($0["id"] as? String) == Self.book } }
            #expect(await context.server.catalog.reload())
            // Gone from the files it stays deliverable to its owners; removed on purpose, it is gone.
            try await context.server.catalog.removeWithdrawn(Self.book)
            let report = try await context.client.runDownloads()
            #expect(report.failed == [Self.book])
            #expect(try await context.download(Self.book)?.lastError?.contains("404") == true)
        }
    }

    @Test("a checksum mismatch (the server's copy went bad on its disk) downloads once more from zero; a second one fails; the library is unchanged")
    func checksumMismatch() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            // Same name, same size, other bytes: the server still calls it the catalog's version.
            let queued = try #require(try await context.download(Self.book))
            let packed = context.store.data.appendingPathComponent("content/\(queued.sha256).zip")
            var bytes = try Data(contentsOf: packed)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: packed)
            let report = try await context.client.runDownloads()
            #expect(report.failed == [Self.book])
            let record = try #require(try await context.download(Self.book))
            #expect(record.mismatches == 2)
            #expect(record.lastError?.contains("checksum twice") == true)
            #expect(report.bytesReceived >= 2 * record.size)
            #expect(try FileManager.default.contentsOfDirectory(atPath: context.home.appendingPathComponent("Library").path).isEmpty)
        }
    }

    @Test("a hostile archive from the server is refused by name; nothing is written outside staging")
    func hostileArchive() async throws {
        let hostile = "com.kiosk.books.trojan"
        // The store refuses such an archive in its catalog, so it comes from an origin folder
        // tampered with after `kiosk publish`: a catalog naming the hostile archive's bytes.
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let origin = PublishedFolder(directory.path("published"))
        let published = try origin.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        let trojan = directory.path("trojan.tar.gz")
        try HostileContent.write(to: trojan)
        let sha256 = try FileDigest.sha256(of: trojan)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: trojan.path)[.size] as? Int64)
        try FileManager.default.copyItem(at: trojan, to: origin.archives.appendingPathComponent("\(sha256).tar.gz"))
        var product = try #require(published.products[Self.book])
        product.id = hostile
        product.content = ContentDescriptor(format: .tarGz, size: size, sha256: sha256, version: String(sha256.prefix(12)))
        let document = CatalogDocument(products: Array(published.products.values) + [product])
        try JSONEncoder.kiosk.encode(document).write(to: origin.catalogFile)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.publishedDirectory = origin.url
        try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            _ = try await client.sync()
            let context = Context(server: server, client: client, url: url, store: store, directory: directory)
            let bought = try await context.client.buy(hostile)
            let report = try #require(bought.downloads)
            #expect(bought.record.state == .delivering)
            #expect(report.failed == [hostile])
            let record = try #require(try await context.download(hostile))
            #expect(record.lastError == "archive entry \"../../escaped.txt\" escapes the destination; the download was discarded")
            #expect(try FileManager.default.contentsOfDirectory(atPath: context.home.appendingPathComponent("Library").path).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: context.home.appendingPathComponent("escaped.txt").path))
            #expect(!FileManager.default.fileExists(atPath: context.directory.path("escaped.txt").path))
        }
    }

    @Test("an unreachable server: waiting with a next attempt, then installed once it is back")
    func unreachableThenBack() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        let home = KioskHome(root: directory.path("home"))
        let client = try await LiveServer.run(configuration) { _, url in
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()
            _ = try await client.buy(Self.book, downloadNow: false)
            return client
        }
        // Bracketed by the clock the client reads, before and after: a busy machine may take longer
        // than the first back-off between the attempt and this check.
        let before = Date()
        let report = try await client.runDownloads()
        let after = Date()
        #expect(report.waiting == [Self.book])
        let record = try #require(try client.downloads().first)
        #expect(record.state == .waiting)
        #expect(record.attempts == 1)
        let next = try #require(record.nextAttemptAt)
        #expect(next > before && next < after.addingTimeInterval(5))
        #expect(record.lastError?.isEmpty == false)
        #expect(try await client.runDownloads() == DownloadRunReport())

        try await LiveServer.run(configuration) { (_, url) async throws -> Void in
            try await Task.sleep(for: .seconds(max(0, next.timeIntervalSinceNow) + 0.1))
            let retried = try await KioskClient(home: home, server: url).runDownloads()
            #expect(retried.installed == [Self.book])
        }
    }

    @Test("an active subscription queues a newly published issue at sync, and it installs")
    func subscriptionQueuesNewIssue() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.subscription, downloadNow: false)
            let issue03 = try #require(try await context.download("com.kiosk.magazines.harbor-monthly.issue-03"))
            #expect(issue03.state == .queued)

            let inFiveDays = SubscriptionDates.day(Date().addingTimeInterval(5 * 86_400))
            try FileManager.default.copyItem(
                at: context.store.content.appendingPathComponent("magazines/harbor-monthly/issue-03"),
                to: context.store.content.appendingPathComponent("magazines/harbor-monthly/issue-04"))
            try context.store.editCatalog("magazines.json") { products in
                var issue = products[2]
                issue["id"] = "com.kiosk.magazines.harbor-monthly.issue-04"
                issue["issueNumber"] = 4
                issue["publicationDate"] = inFiveDays
                issue["content"] = ["path": "magazines/harbor-monthly/issue-04", "format": "tar.gz"]
                products.append(issue)
            }
            #expect(await context.server.catalog.reload())
            let synced = try await context.client.sync()
            #expect(synced.queued == ["com.kiosk.magazines.harbor-monthly.issue-04"])
            let report = try await context.client.runDownloads()
            #expect(Set(report.installed) == ["com.kiosk.magazines.harbor-monthly.issue-03", "com.kiosk.magazines.harbor-monthly.issue-04"])
            #expect(try await context.download("com.kiosk.magazines.harbor-monthly.issue-01") == nil)
        }
    }

    @Test("client and store agree issue by issue on what a subscription period covers: the current issue at purchase, up to the expiry day inclusive, nothing before or after")
    func coverageAgreement() async throws {
        try await Self.withStore { context in
            let bought = try await context.client.buy(Self.subscription, downloadNow: false)
            let receipt = try #require(bought.record.receipt)
            let period = try #require(try await context.client.accountSummary().subscriptions.first)
            let day = { (offset: Double, from: Date) in SubscriptionCoverage.day(from.addingTimeInterval(offset * 86_400)) }
            // Issues around the period's edges (dates are UTC days, as the catalog writes them).
            let added: [(id: String, date: String, covered: Bool)] = [
                ("com.kiosk.magazines.harbor-monthly.issue-10", "2026-10-15", false),  // before the issue current at purchase
                ("com.kiosk.magazines.harbor-monthly.issue-11", day(1, Date()), true),  // the day after purchase
                ("com.kiosk.magazines.harbor-monthly.issue-12", day(0, period.expiresDate), true),  // the expiry day itself
                ("com.kiosk.magazines.harbor-monthly.issue-13", day(1, period.expiresDate), false),  // the day after it expires
            ]
            try context.store.editCatalog("magazines.json") { products in
                for (number, issue) in added.enumerated() {
                    var product = products[2]
                    product["id"] = issue.id
                    product["issueNumber"] = 10 + number
                    product["publicationDate"] = issue.date
                    products.append(product)
                }
            }
            #expect(await context.server.catalog.reload())
            _ = try await context.client.sync()
            let queued = Set(try context.client.downloads().map(\.productId))
            let http = StoreHTTP(baseURL: context.url)
            let expected = added + [
                ("com.kiosk.magazines.harbor-monthly.issue-01", "2026-09-01", false),
                ("com.kiosk.magazines.harbor-monthly.issue-03", "2026-11-01", true),  // current at purchase
            ]
            for issue in expected {
                let product = try #require(try context.client.cachedCatalog().products.first { $0.id == issue.id })
                let content = try #require(product.content)
                let answer = try await http.send("GET", "/v1/content/\(issue.id)?version=\(content.sha256)", authorization: "Receipt \(receipt)")
                #expect(queued.contains(issue.id) == issue.covered, "the client on \(issue.id) (\(issue.date))")
                #expect((answer.status == 200) == issue.covered, "the store on \(issue.id) (\(issue.date)): \(answer.status)")
            }
        }
    }

    @Test("a download whose version two reloads replaced: the server answers 412, the client syncs and installs the current version, no mismatch counted")
    func versionGoneMidway() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            let queued = try #require(try await context.download(Self.book))
            let errata = context.store.content.appendingPathComponent("books/lighthouse-keeper/errata.md")
            for edition in 1...2 {
                try Data("# Errata, edition \(edition)\n".utf8).write(to: errata)
                #expect(await context.server.catalog.reload())
            }
            let report = try await context.client.runDownloads()
            #expect(report.installed == [Self.book])
            let installed = try #require(try await context.download(Self.book))
            #expect(installed.sha256 != queued.sha256)
            #expect(installed.mismatches == 0)
            #expect(try context.client.libraryEntries().first?.updateAvailable == false)
            let text = try String(contentsOf: context.home.appendingPathComponent("Library/\(Self.book)/errata.md"), encoding: .utf8)
            #expect(text.contains("edition 2"))
        }
    }

    @Test("a sync that finds new content points a download not yet running at the new version; a paused one stays paused")
    func syncRetargets() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            _ = try await context.client.buy(Self.otherBook, downloadNow: false)
            _ = try context.client.pauseDownload(Self.otherBook)
            let before = try #require(try await context.download(Self.book))
            for folder in ["books/lighthouse-keeper", "books/small-engines"] {
                try Data("# Errata\n".utf8).write(to: context.store.content.appendingPathComponent("\(folder)/errata.md"))
            }
            #expect(await context.server.catalog.reload())
            _ = try await context.client.sync()
            let after = try #require(try await context.download(Self.book))
            #expect(after.sha256 != before.sha256)
            #expect(after.state == .queued)
            let paused = try #require(try await context.download(Self.otherBook))
            #expect(paused.state == .paused)
            #expect(paused.sha256 == (try context.client.cachedCatalog().products.first { $0.id == Self.otherBook }?.content?.sha256))
        }
    }

    @Test("a new content version marks the book updatable; resume installs it in place")
    func updateInstalled() async throws {
        try await Self.withStore { context in
            _ = try await context.client.buy(Self.book)
            let before = try #require(try context.client.libraryEntries().first)
            #expect(!before.updateAvailable)

            let errata = context.store.content.appendingPathComponent("books/lighthouse-keeper/errata.md")
            try Data("# Errata\n\nPage 3: the lamp was lit at six, not seven.\n".utf8).write(to: errata)
            #expect(await context.server.catalog.reload())
            _ = try await context.client.sync()
            #expect(try context.client.libraryEntries().first?.updateAvailable == true)

            #expect(try await context.client.queueNewContent(includingUpdates: true) == [Self.book])
            let report = try await context.client.runDownloads()
            #expect(report.installed == [Self.book])
            let after = try #require(try context.client.libraryEntries().first)
            #expect(after.item.version != before.item.version)
            #expect(!after.updateAvailable)
            #expect(FileManager.default.fileExists(atPath: context.home.appendingPathComponent("Library/\(Self.book)/errata.md").path))
        }
    }

    @Test("backoff doubles from 2 s with jitter, caps at an hour and honours Retry-After")
    func backoff() {
        let backoff = Backoff()
        for attempts in 1...20 {
            let delay = backoff.delay(afterAttempts: attempts, retryAfter: nil)
            let full = min(3600, 2 * pow(2, Double(attempts - 1)))
            #expect(delay >= full / 2 && delay <= full)
        }
        #expect(backoff.delay(afterAttempts: 1, retryAfter: 120) == 120)
    }
}

enum SubscriptionDates {
    static func day(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: date)
    }
}

extension LibraryTests {
    // MARK: Unpacking while downloading

    static let manyFiles = "com.kiosk.books.many-pages"

    /// Where the many-file book is unpacked while it downloads, and where it is installed.
    struct Folders: Sendable {
        let library: URL
        let productId: String
        let installed: URL

        /// The staging folder of the product's current claim (`.staging-<id>+<claim>`); a path that
        /// does not exist when there is none.
        var staging: URL {
            let prefix = ".staging-\(productId)+"
            let name = (try? FileManager.default.contentsOfDirectory(atPath: library.path))?.first { $0.hasPrefix(prefix) }
            return library.appendingPathComponent(name ?? prefix + "none")
        }
    }

    static func withManyFileBook<T: Sendable>(_ body: @Sendable (Context, KioskClient, Folders) async throws -> T) async throws -> T {
        try await withStore(prepare: { try $0.addManyFileBook(manyFiles, files: 32, kilobytes: 256) }) { context in
            var throttled = KioskClient.Configuration()
            throttled.maxReceiveSpeed = 3_000_000
            let client = try KioskClient(home: KioskHome(root: context.home), server: context.url, configuration: throttled)
            _ = try await client.sync()
            _ = try await client.buy(manyFiles, downloadNow: false)
            let library = context.home.appendingPathComponent("Library")
            let folders = Folders(library: library, productId: manyFiles, installed: library.appendingPathComponent(manyFiles))
            return try await body(context, client, folders)
        }
    }

    /// Regular files under `folder`, 0 when it does not exist.
    static func fileCount(_ folder: URL) -> Int {
        (FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []).filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder.appendingPathComponent($0).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }.count
    }

    @Test("a tar.gz unpacks into staging while it downloads: files are there before the last byte, the library gets it only after the check, identical to unpacking afterwards")
    func unpacksWhileDownloading() async throws {
        try await Self.withManyFileBook { context, client, folders in
            let installed = folders.installed
            let run = Task { try await client.runDownloads() }
            var seenEarly: (files: Int, bytesDone: Int64)?
            for _ in 0..<400 {
                let record = try client.downloads().first { $0.productId == Self.manyFiles }
                let files = Self.fileCount(folders.staging)
                if record?.state == .downloading, files >= 2 {
                    seenEarly = (files, record?.bytesDone ?? 0)
                    #expect(!FileManager.default.fileExists(atPath: installed.path), "installed before the download ended")
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let report = try await run.value
            #expect(report.installed == [Self.manyFiles])
            let early = try #require(seenEarly, "no file was unpacked while the download ran")
            let size = try #require(try await context.download(Self.manyFiles)).size
            #expect(early.bytesDone < size)

            // The same tree a sequential unpack of the verified archive gives, and no staging left.
            let archive = try #require(try await context.server.catalog.current.archives[Self.manyFiles]).file
            let sequential = context.directory.path("sequential")
            try FileManager.default.createDirectory(at: sequential, withIntermediateDirectories: true)
            _ = try ArchiveExtractor().extract(archive, into: sequential)
            #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: sequential))
            #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: context.store.content.appendingPathComponent("books/many-pages")))
            #expect(!FileManager.default.fileExists(atPath: folders.staging.path))
        }
    }

    @Test("a download interrupted while it unpacks ahead leaves no staging and no half install; the next run unpacks again from the partial file and installs byte-exact")
    func interruptedUnpackAhead() async throws {
        try await Self.withManyFileBook { context, client, folders in
            let installed = folders.installed
            let run = Task { try await client.runDownloads() }
            for _ in 0..<400 where Self.fileCount(folders.staging) < 2 {
                try await Task.sleep(for: .milliseconds(20))
            }
            let staging = folders.staging
            #expect(Self.fileCount(staging) >= 2)
            run.cancel()
            let report = try await run.value
            #expect(report.interrupted == [Self.manyFiles])
            #expect(!FileManager.default.fileExists(atPath: staging.path), "the staging of an interrupted download stays behind")
            #expect(!FileManager.default.fileExists(atPath: installed.path))
            let partial = context.home.appendingPathComponent("downloads/\(Self.manyFiles).partial")
            let kept = try #require(try FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64)
            #expect(kept > 0)
            #expect(try await context.download(Self.manyFiles)?.bytesDone == kept, "the stop recorded where it stopped")

            let resumed = try await client.runDownloads()
            #expect(resumed.installed == [Self.manyFiles])
            let size = try #require(try await context.download(Self.manyFiles)).size
            #expect(resumed.bytesReceived + kept == size)
            #expect(try FolderSnapshot.files(in: installed) == FolderSnapshot.files(in: context.store.content.appendingPathComponent("books/many-pages")))
            #expect(!FileManager.default.fileExists(atPath: staging.path))
            #expect(!FileManager.default.fileExists(atPath: folders.staging.path))
        }
    }

    @Test("two engines on one home and a tar.gz that unpacks while it downloads: one fetches and unpacks, the other waits; the bytes arrive once, one install of the source's tree, no staging left")
    func twoEnginesUnpackAhead() async throws {
        try await Self.withManyFileBook { context, client, folders in
            var throttled = KioskClient.Configuration()
            throttled.maxReceiveSpeed = 3_000_000
            let second = try KioskClient(home: KioskHome(root: context.home), server: context.url, configuration: throttled)
            async let one = client.runDownloads()
            async let two = second.runDownloads()
            let (first, other) = try await (one, two)
            #expect(first.installed + other.installed == [Self.manyFiles])
            #expect(first.installedElsewhere + other.installedElsewhere == [Self.manyFiles])
            let size = try #require(try await context.download(Self.manyFiles)).size
            #expect(first.bytesReceived + other.bytesReceived == size)
            #expect(try FolderSnapshot.files(in: folders.installed) == FolderSnapshot.files(in: context.store.content.appendingPathComponent("books/many-pages")))
            let library = try FileManager.default.contentsOfDirectory(atPath: folders.installed.deletingLastPathComponent().path)
            #expect(!library.contains { $0.hasPrefix(".") }, "\(library)")
        }
    }
}
