import Foundation
import KioskTestSupport
import Testing

/// `kiosk publish` as an operator runs it.
@Suite("kiosk publish")
struct PublishCommandTests {
    @Test("publish writes content-addressed archives and the catalog; a bad catalog publishes nothing and says why in one line")
    func publish() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let out = directory.path("published")
        let published = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out.path])
        #expect(published.status == 0, "\(published.stderr)")
        #expect(published.stdout.hasPrefix("published 13 products (10 archives) to \(out.path)"))
        let files = try FileManager.default.contentsOfDirectory(atPath: out.appendingPathComponent("archives").path)
        // Each archive has its manifest beside it (<sha256>.manifest.json, for updates by entries or
        // chunks), and the EPUB's cover image is there too (<sha256>.cover.png), for nginx or a CDN.
        let covers = files.filter { $0.contains(".cover.") }
        let archives = files.filter { !$0.hasSuffix(".manifest.json") && !$0.contains(".cover.") }
        #expect(archives.count == 10 && covers.count == 1 && files.count == 21, "\(files)")
        #expect(covers.first?.hasSuffix(".cover.png") == true)
        #expect(archives.allSatisfy { archive in files.contains(String(archive.prefix(64)) + ".manifest.json") }, "\(files)")
        #expect(archives.allSatisfy { $0.prefix(64).allSatisfy(\.isHexDigit) })
        let catalog = try Data(contentsOf: out.appendingPathComponent("catalog.json"))

        try store.editCatalog("books.json") { products in products[0]["price"] = "free" }
        let refused = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(refused.stderr.contains("field \"price\""))
        #expect(try Data(contentsOf: out.appendingPathComponent("catalog.json")) == catalog, "a refused publish changed the catalog")
    }

    @Test("publish refuses an --out that is, lies inside or contains the catalog or content folder, however it is spelled (.., a symlink): one line naming both, nothing written")
    func publishRefusesOverlap() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try FileManager.default.createSymbolicLink(at: directory.path("link-to-content"), withDestinationURL: store.content)
        let catalog = store.catalog.resolvingSymlinksInPath().path
        let content = store.content.resolvingSymlinksInPath().path
        let cases: [(out: String, names: String)] = [
            (store.catalog.path, catalog),
            (store.content.path + "/books/published", content),
            (directory.path("link-to-content").path + "/out", content),
            (store.content.path + "/../Catalog/./", catalog),
            (directory.url.path, catalog),
        ]
        let before = try FolderSnapshot.files(in: directory.url)
        for (out, names) in cases {
            let refused = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out])
            #expect(refused.status == 1, "--out \(out): \(refused.stdout)")
            let lines = refused.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains(names) && refused.stderr.contains("folder"), "\(refused.stderr)")
        }
        #expect(try FolderSnapshot.files(in: directory.url) == before, "a refused publish wrote a file")
        for folder in [store.catalog, store.content, store.content.appendingPathComponent("books"), directory.url] {
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("archives").path), "a refused publish made \(folder.path)/archives")
        }
        // Beside them, it publishes.
        let beside = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", directory.path("published").path])
        #expect(beside.status == 0, "\(beside.stderr)")
    }
}
