import Crypto
import Foundation
import HTTPTypes
import NIOCore
import Synchronization

/// The shop's pages as made for the catalog served now: a public page is the same for every
/// reader until the catalog changes, so it is rendered (and its ETag computed) once per catalog
/// version and address, not at every request. A new catalog version empties it; so does reaching
/// ``limit`` addresses (searches are many), after which pages are made again as asked.
final class RenderedPages: Sendable {
    /// One page: its status, its bytes and their strong ETag.
    struct Page: Sendable {
        var status: HTTPResponse.Status
        var body: ByteBuffer
        var etag: String

        init(status: HTTPResponse.Status, html: String) {
            self.status = status
            body = ByteBuffer(string: html)
            etag = "\"" + SHA256.hash(data: Data(html.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
        }
    }

    static let limit = 2_000
    private let pages = Mutex<(version: String, byAddress: [String: Page])>(("", [:]))

    /// The page at `address` kept for catalog `version`, if it is (``ShopPageResponder``).
    func kept(version: String, address: String) -> Page? {
        pages.withLock { $0.version == version ? $0.byAddress[address] : nil }
    }

    /// The page at `address` for catalog `version`, made by `make` when it is not kept yet.
    func page(version: String, address: String, make: () throws -> Page) throws -> Page {
        if let kept = kept(version: version, address: address) { return kept }
        let made = try make()
        pages.withLock { kept in
            if kept.version != version || kept.byAddress.count >= Self.limit { kept = (version, [:]) }
            kept.byAddress[address] = made
        }
        return made
    }
}
