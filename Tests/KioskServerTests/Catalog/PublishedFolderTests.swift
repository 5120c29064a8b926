import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// A published folder (kiosk publish): packed once, served by any number of instances without
/// packing.
@Suite("The published folder")
struct PublishedFolderTests {
    @Test("instances serving one published folder give the same catalog and ETag without packing; a folder missing an archive stops the server, naming the file")
    func publishedFolder() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let folder = PublishedFolder(directory.path("published"))
        let published = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        // Publishing again packs nothing new and gives the same document.
        let again = try folder.publish(catalog: store.catalog, content: store.content, logger: Logger(label: "test"))
        #expect(again.etag == published.etag)

        func serve(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(
                catalogDirectory: directory.path("no-catalog"), contentDirectory: directory.path("no-content"), dataDirectory: directory.path(name))
            configuration.publishedDirectory = folder.url
            return configuration
        }
        let etags = try await [serve("a"), serve("b")].asyncMap { configuration in
            try await LiveServer.run(configuration) { server, url in
                #expect(!FileManager.default.fileExists(atPath: directory.path(configuration.dataDirectory.lastPathComponent + "/content").path), "an instance packed")
                let reply = try await HTTPClient().send(HTTPRequest(url: url + "/v1/catalog"))
                #expect(reply.status == 200)
                return reply.headers["etag"] ?? ""
            }
        }
        #expect(etags == [published.gzipETag, published.gzipETag])

        let archive = try #require(published.archives.values.first).file
        try FileManager.default.removeItem(at: archive)
        let error = await #expect(throws: PublishedFolderError.self) {
            try await LiveServer.run(serve("c")) { _, _ in }
        }
        #expect(error?.description.hasPrefix("\(archive.path): is missing") == true)
    }

    @Test("a catalog with nothing to pack (credit packs only) publishes")
    func publishWithoutContent() throws {
        let directory = try TemporaryDirectory()
        let catalog = directory.path("Catalog")
        try FileManager.default.createDirectory(at: catalog, withIntermediateDirectories: true)
        try Data(#"{"products": [{"id": "com.example.credits.five", "kind": "consumable", "title": "5 credits", "price": "4.99", "currency": "USD", "credits": 5}]}"#.utf8)
            .write(to: catalog.appendingPathComponent("credits.json"))
        let folder = PublishedFolder(directory.path("published"))
        let published = try folder.publish(catalog: catalog, content: directory.path("Content"), logger: Logger(label: "test"))
        #expect(published.products.keys.sorted() == ["com.example.credits.five"])
        #expect(try Data(contentsOf: folder.catalogFile) == published.body)
    }
}
