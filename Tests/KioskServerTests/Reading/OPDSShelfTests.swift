import Foundation
import KioskCore
@testable import KioskServer
import KioskTestSupport
import Testing

/// A reading app's shelf as the catalog changes under it.
@Suite("The shelf of a reading app")
struct OPDSShelfTests: StoreSuite {
    static let epub = "com.kiosk.books.salt-and-stars"

    @Test("a book taken off sale stays on its owner's shelf with its file and its place, and links no entry or shop page that would be a 404", arguments: TestEngine.all)
    func offSale(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, reader in
            #expect(try await http.pay(Self.epub, token: reader.token).status == 200)
            let file = server.configuration.catalogDirectory.appendingPathComponent("publications.json")
            var root = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
            var products = try #require(root["products"] as? [[String: Any]])
            for index in products.indices where products[index]["id"] as? String == Self.epub { products[index]["forSale"] = false }
            root["products"] = products
            try JSONSerialization.data(withJSONObject: root).write(to: file)
            #expect(await server.catalog.reload())

            let shelf = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/shelf", token: reader.token).body) as? [String: Any]
            let publication = try #require((shelf?["publications"] as? [[String: Any]])?.first)
            let links = (publication["links"] as? [[String: Any]] ?? []).compactMap { $0["href"] as? String }
            #expect(links.contains { $0.hasSuffix("/opds/content/\(Self.epub)") } && links.contains { $0.hasSuffix("/opds/progression/\(Self.epub)") }, "\(links)")
            #expect(!links.contains { $0.contains("/opds/publications/") || $0.contains("/products/") }, "\(links)")
            for href in links {
                let path = String(href.dropFirst(http.baseURL.count))
                #expect(try await http.send("GET", path, token: reader.token).status == 200, "\(path)")
            }
        }
    }
}
