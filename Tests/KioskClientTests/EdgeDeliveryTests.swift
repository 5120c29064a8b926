import Foundation
@testable import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// Content bytes from nginx: Kiosk checks the receipt, nginx (or any edge) sends the bytes, and
/// the client resumes through it byte-exact.
@Suite("Content from nginx: x-accel and signed redirects")
struct EdgeDeliveryTests {
    static let large = "com.kiosk.books.large-atlas"
    static let secret = "test-secret-\(UUID().uuidString)"

    /// The sample store plus an 8 MiB book, published once into a folder.
    struct Published: Sendable {
        let directory: TemporaryDirectory
        let store: SampleStore
        let folder: PublishedFolder
        let archive: URL
    }

    static func publish() throws -> Published {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.addLargeBook(large, megabytes: 8)
        let folder = PublishedFolder(directory.path("published"))
        let published = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        let archive = try #require(published.archives[large]).file
        return Published(directory: directory, store: store, folder: folder, archive: archive)
    }

    static func configuration(_ published: Published, delivery: ContentDelivery) -> ServerConfiguration {
        var configuration = ServerConfiguration(
            catalogDirectory: published.store.catalog, contentDirectory: published.store.content, dataDirectory: published.store.data)
        configuration.publishedDirectory = published.folder.url
        configuration.contentDelivery = delivery
        return configuration
    }

    static var throttled: KioskClient.Configuration {
        var configuration = KioskClient.Configuration()
        configuration.maxReceiveSpeed = 2_000_000
        return configuration
    }

    /// Buys the large book without downloading, starts the download, and stops it once some
    /// bytes are on disk. Returns how many.
    static func startAndInterrupt(_ client: KioskClient) async throws -> Int64 {
        _ = try await client.sync()
        _ = try await client.buy(large, downloadNow: false)
        let run = Task { try await client.runDownloads() }
        var onDisk: Int64 = 0
        for _ in 0..<400 {
            onDisk = try client.downloads().first { $0.productId == large }?.bytesDone ?? 0
            if onDisk >= 1 << 20 { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        run.cancel()
        let report = try await run.value
        #expect(report.interrupted == [large])
        return try #require(try client.downloads().first { $0.productId == large }).bytesDone
    }

    /// The access log lines of the archive's file, as (status, bytes sent). The manifest a
    /// resumed zip is checked against is not the archive's bytes.
    static func archiveRequests(_ nginx: TestNginx, _ archive: URL) -> [(status: Int, bytes: Int64)] {
        nginx.accessLog().filter { ($0.contains(archive.lastPathComponent) || $0.contains("/v1/content/")) && !$0.contains("/manifest?") }.compactMap { line in
            // combined format: … "GET /path HTTP/1.1" STATUS BYTES "referer" "agent"
            guard let request = line.range(of: "\" ") else { return nil }
            let fields = line[request.upperBound...].split(separator: " ")
            guard fields.count >= 2, let status = Int(fields[0]), let bytes = Int64(fields[1]) else { return nil }
            return (status, bytes)
        }
    }

    @Test("x-accel: Kiosk checks the receipt, nginx sends the bytes; an interrupted download resumes through nginx with one 206 of exactly the rest")
    func xAccelResume() async throws {
        let published = try Self.publish()
        let configuration = Self.configuration(published, delivery: .xAccel(internalPrefix: "/_kiosk/archives/"))
        try await LiveServer.run(configuration) { _, url in
            let upstream = url.replacingOccurrences(of: "http://", with: "")
            try await TestNginx.with(upstreams: [upstream], published: published.folder.url, secret: Self.secret) { nginx in
                let home = KioskHome(root: published.directory.path("home"))
                let client = try KioskClient(home: home, server: nginx.baseURL, configuration: Self.throttled)
                let kept = try await Self.startAndInterrupt(client)
                #expect(kept > 0)

                let report = try await KioskClient(home: home, server: nginx.baseURL).runDownloads()
                #expect(report.installed == [Self.large])
                let size = try #require(try FileManager.default.attributesOfItem(atPath: published.archive.path)[.size] as? Int64)
                let requests = Self.archiveRequests(nginx, published.archive)
                #expect(requests.count == 2, "\(nginx.accessLog())")
                #expect(requests.first?.status == 200)
                #expect(requests.last?.status == 206)
                // The resume sent the rest, not a byte more: nothing was fetched twice.
                #expect(requests.last?.bytes == size - kept)
                // Before it, the partial zip was checked against the version's manifest, from Kiosk.
                #expect(nginx.accessLog().filter { $0.contains("/v1/content/\(Self.large)/manifest?") && $0.contains("\" 200 ") }.count == 1, "\(nginx.accessLog())")
                #expect(try client.libraryEntries().first { $0.item.productId == Self.large } != nil)

                // Without a receipt that entitles it, nginx never sends the file.
                let anonymous = try await StoreHTTP(baseURL: nginx.baseURL).send("GET", "/v1/content/\(Self.large)")
                #expect(anonymous.status == 401)
                let direct = try await StoreHTTP(baseURL: nginx.baseURL).send("GET", "/_kiosk/archives/\(published.archive.lastPathComponent)")
                #expect(direct.status == 404)
            }
        }
    }

    @Test("signed-redirect: the client follows the store's 307 to nginx; a signed URL that expired during a pause is renewed and the download continues from its bytes")
    func signedRedirectRenewal() async throws {
        let published = try Self.publish()
        // nginx needs Kiosk's port and Kiosk needs nginx's URL: start nginx first, with no upstream
        // in use (the client talks to Kiosk directly here), then Kiosk pointing at it.
        try await TestNginx.with(upstreams: ["127.0.0.1:9"], published: published.folder.url, secret: Self.secret) { nginx in
            let lifetime = 2
            let configuration = Self.configuration(published, delivery: .signedRedirect(baseURL: nginx.baseURL + "/archives/", secret: Self.secret, lifetime: lifetime))
            try await LiveServer.run(configuration) { _, url in
                let home = KioskHome(root: published.directory.path("home"))
                let client = try KioskClient(home: home, server: url, configuration: Self.throttled)
                let kept = try await Self.startAndInterrupt(client)
                #expect(kept > 0)
                // Past the signed URL's lifetime (expiry is whole seconds): the remembered URL now answers 410.
                try await Task.sleep(for: .seconds(lifetime + 1))

                let report = try await client.runDownloads()
                let states = try client.downloads().map { "\($0.productId) \($0.state) \($0.lastError ?? "")" }
                #expect(report.installed == [Self.large], "\(states)")
                let size = try #require(try FileManager.default.attributesOfItem(atPath: published.archive.path)[.size] as? Int64)
                let statuses = Self.archiveRequests(nginx, published.archive)
                #expect(statuses.map(\.status) == [200, 410, 206], "\(nginx.accessLog())")
                #expect(statuses.last?.bytes == size - kept)
                let installed = try #require(try client.libraryEntries().first { $0.item.productId == Self.large }?.item)
                #expect(FileManager.default.fileExists(atPath: installed.path))

                // A forged or stale signature is refused at the edge without asking Kiosk.
                let forged = try await StoreHTTP(baseURL: nginx.baseURL).send(
                    "GET", "/archives/\(published.archive.lastPathComponent)?md5=AAAAAAAAAAAAAAAAAAAAAA&expires=\(Int(Date().timeIntervalSince1970) + 60)")
                #expect(forged.status == 403)
            }
        }
    }

    @Test("the catalog from nginx: the published document (gzip twin when asked), 304 on a match, no Kiosk instance needed; a client syncs from it")
    func catalogFromNginx() async throws {
        let published = try Self.publish()
        // No upstream is up: whatever answers /v1/catalog here is nginx alone.
        try await TestNginx.with(upstreams: ["127.0.0.1:9"], published: published.folder.url, secret: Self.secret) { nginx in
            let http = HTTPClient()
            let url = nginx.baseURL + "/v1/catalog"
            let first = try await http.send(HTTPRequest(url: url))
            #expect(first.status == 200)
            #expect(first.headers["content-encoding"] == "gzip", "gzip_static sends the twin publish wrote")
            #expect(first.headers["content-type"] == "application/json")
            #expect(first.body == (try Data(contentsOf: published.folder.catalogFile)))
            let etag = try #require(first.headers["etag"])
            let again = try await http.send(HTTPRequest(url: url, headers: [("If-None-Match", etag)]))
            #expect(again.status == 304)

            let client = try KioskClient(home: KioskHome(root: published.directory.path("home")), server: nginx.baseURL)
            let synced = try await client.sync()
            let document = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: first.body)
            #expect(synced.added.sorted() == document.products.map(\.id).sorted())
            #expect(try await client.sync().notModified)
            #expect(nginx.accessLog().filter { $0.contains("GET /v1/catalog") }.map { $0.contains("\" 304 ") } == [false, true, false, true],
                    "\(nginx.accessLog())")
        }
    }
}
