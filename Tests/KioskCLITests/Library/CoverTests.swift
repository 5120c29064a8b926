import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// Publishers' covers (issue 47): a cover file the catalog names beside the content, or the cover
/// image an EPUB's package document names, served publicly with its own type, a strong ETag and
/// a day's cache; a drawn card for a product without one.
@Suite("Covers")
struct CoverTests {
    static let coveredEpub = "com.kiosk.books.gull-songs"
    // A PDF: what reading apps are offered (a zip book is the Kiosk client's, left out of OPDS).
    static let coveredBook = PublicationTests.pdfIssue

    /// JPEG's signature, then `count` bytes: what the store's check reads of an image.
    static func jpeg(_ count: Int, seed: String = "cover") -> Data {
        Data([0xFF, 0xD8, 0xFF, 0xE0]) + TestOrigin.incompressible(count, seed: seed)
    }

    @Test("a catalog's cover file and an EPUB's cover image are served with their type, strong ETag, 304 and a day's cache; OPDS names them; a product without one gets a drawn card")
    func served() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let script = SampleStore.repository.appendingPathComponent("scripts/make_epub.py").path
        let made = try PublicationTests.run("/usr/bin/python3", [script, store.content.appendingPathComponent("publications/gull-songs.epub").path, "--title", "Gull Songs", "--cover"])
        try #require(made.status == 0, "\(made.output)")
        let cover = Self.jpeg(40_000)
        try FileManager.default.createDirectory(at: store.content.appendingPathComponent("covers"), withIntermediateDirectories: true)
        try cover.write(to: store.content.appendingPathComponent("covers/tide-atlas.jpg"))
        try store.editCatalog("books.json") { products in
            for index in products.indices where products[index]["id"] as? String == Self.coveredBook {
                products[index]["cover"] = "covers/tide-atlas.jpg"
            }
            var songs = products[0]
            songs["id"] = Self.coveredEpub
            songs["title"] = "Gull Songs"
            songs["content"] = ["path": "publications/gull-songs.epub", "format": "epub"]
            products.append(songs)
        }
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)

        let answer = try await http.send("GET", "/v1/covers/\(Self.coveredBook)")
        #expect(answer.status == 200 && answer.body == cover && answer.header("Content-Type") == "image/jpeg")
        let etag = try #require(answer.header("ETag"))
        #expect(etag == "\"\(FileDigest.sha256(of: cover))\"")
        #expect(answer.header("Cache-Control") == "public, max-age=86400")
        #expect(try await http.send("GET", "/v1/covers/\(Self.coveredBook)", headers: [("If-None-Match", etag)]).status == 304)

        let png = try await http.send("GET", "/v1/covers/\(Self.coveredEpub)")
        #expect(png.status == 200 && png.header("Content-Type") == "image/png" && png.body.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(png.status)")
        let drawn = try await http.send("GET", "/v1/covers/com.kiosk.books.lighthouse-keeper")
        #expect(drawn.status == 200 && drawn.header("Content-Type") == "image/svg+xml")
        #expect(try await http.send("GET", "/v1/covers/no.such.product").status == 404)

        // The catalog document describes each cover; OPDS links to it with its type and version.
        let catalog = try JSONSerialization.jsonObject(with: try await http.send("GET", "/v1/catalog").body) as? [String: Any]
        let product = (catalog?["products"] as? [[String: Any]])?.first { $0["id"] as? String == Self.coveredBook }
        let described = product?["cover"] as? [String: Any]
        #expect(described?["type"] as? String == "image/jpeg" && described?["size"] as? Int == cover.count)
        let publication = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/publications/\(Self.coveredBook)").body) as? [String: Any]
        let image = (publication?["images"] as? [[String: Any]])?.first
        #expect(image?["type"] as? String == "image/jpeg")
        #expect((image?["href"] as? String)?.hasSuffix("/v1/covers/\(Self.coveredBook)?v=\(FileDigest.sha256(of: cover).prefix(12))") == true, "\(String(describing: image))")
        if FileManager.default.isExecutableFile(atPath: OPDSTests.python.path) {
            let judged = try await KioskCommand.run([SampleStore.repository.appendingPathComponent("scripts/opds_check.py").path, server.url + "/opds/publications/\(Self.coveredBook)"],
                                                    program: OPDSTests.python)
            #expect(judged.status == 0, "\(judged.stdout)\(judged.stderr)")
        } else {
            Issue.record("no \(OPDSTests.python.path): run make test-tools (it installs palace-webpub-manifest-parser)")
        }
        _ = await server.stop()

        // A restart serves the same covers from the snapshot; a cover edited in place is served new.
        let edited = Self.jpeg(20_000, seed: "edited")
        try edited.write(to: store.content.appendingPathComponent("covers/tide-atlas.jpg"))
        let again = try await ServerProcess.start(store, log: directory.path("server-2.log"))
        let newer = try await StoreHTTP(baseURL: again.url).send("GET", "/v1/covers/\(Self.coveredBook)")
        #expect(newer.status == 200 && newer.body == edited)
        #expect(try await StoreHTTP(baseURL: again.url).send("GET", "/v1/covers/\(Self.coveredEpub)").status == 200)
        // Another product taken out of the files (carried as withdrawn): every cover still served as it was.
        try store.editCatalog("books.json") { products in products.removeAll { $0["id"] as? String == "com.kiosk.books.river-of-maps" } }
        again.signal(SIGHUP)
        var reloaded = false
        for _ in 0..<50 where !reloaded {
            try await Task.sleep(for: .milliseconds(100))
            let catalog = try await StoreHTTP(baseURL: again.url).send("GET", "/v1/catalog").body
            reloaded = String(decoding: catalog, as: UTF8.self).contains("\"forSale\":false")
        }
        #expect(reloaded)
        let carried = try await StoreHTTP(baseURL: again.url).send("GET", "/v1/covers/\(Self.coveredEpub)")
        #expect(carried.status == 200 && carried.header("Content-Type") == "image/png", "\(carried.header("Content-Type") ?? "")")
        #expect(try await StoreHTTP(baseURL: again.url).send("GET", "/v1/covers/\(Self.coveredBook)").body == edited)
        _ = await again.stop()
    }

    @Test("a cover that is no image, one too large, one outside the content folder and one missing are refused at start, naming the product and the field")
    func refused() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let covers = store.content.appendingPathComponent("covers")
        try FileManager.default.createDirectory(at: covers, withIntermediateDirectories: true)
        try Data("<html>not a picture</html>".utf8).write(to: covers.appendingPathComponent("page.jpg"))
        try Self.jpeg(CoverImage.maxBytes + 1).write(to: covers.appendingPathComponent("poster.jpg"))
        let cases = [
            ("covers/page.jpg", "is not a JPEG, PNG, GIF or WebP image"),
            ("covers/poster.jpg", "a cover may be at most 2 MiB"),
            ("../outside.jpg", "must be a relative path inside the content folder"),
            ("covers/missing.jpg", "is not a regular file"),
        ]
        for (index, (path, says)) in cases.enumerated() {
            try store.editCatalog("books.json") { products in products[0]["cover"] = path }
            let started = try await KioskCommand.run([
                "serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", directory.path("data-\(index)").path, "--port", "0",
            ])
            let line = started.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(started.status == 1 && line.contains("product \"com.kiosk.books.lighthouse-keeper\"") && line.contains("cover") && line.contains(says),
                    "\(path): \(started.stderr)")
        }
    }
}
