import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// A suite that serves an 8 MiB book from a live server. Conforming gives it, as `Self.…`, the
/// server with its store and a receipt that entitles the book, plain GETs, and the book rewritten
/// as a new edition.
protocol LargeBookSuite: Sendable {}

extension LargeBookSuite {
    static var large: String { "com.kiosk.books.large-atlas" }

    static func get(_ url: String, headers: [(name: String, value: String)] = []) async throws -> HTTPResponse {
        try await HTTPClient().send(HTTPRequest(url: url, headers: headers, maxResponseBytes: 256 << 20))
    }

    static func receipt(for product: String, _ http: StoreHTTP) async throws -> String {
        let account = try await http.createAccount()
        let reply = try await http.pay(product, token: account.token)
        return try #require(try reply.decode(PaymentResponse.self).transaction.signedTransaction)
    }

    /// A live server whose store has an 8 MiB book, and a receipt that entitles it.
    static func withLargeBook(_ body: @Sendable (KioskServer, SampleStore, String, String) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.addLargeBook(large, megabytes: 8)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            try await body(server, store, url, try await receipt(for: large, StoreHTTP(baseURL: url)))
        }
    }

    static func rewriteLargeBook(_ store: SampleStore, seed: String) throws {
        try TestOrigin.incompressible(8 << 20, seed: seed).write(to: store.content.appendingPathComponent("books/large-atlas/plates.bin"))
    }

    /// A HEAD of the large book, and the archive file its ETag names in the server's data folder.
    static func headAndArchive(_ url: String, auth: (String, String), store: SampleStore) async throws -> (head: HTTPResponse, archive: URL) {
        let head = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/content/\(large)", headers: [auth]))
        let tag = try #require(head.headers["etag"]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return (head, store.data.appendingPathComponent("content/\(tag).zip"))
    }
}
