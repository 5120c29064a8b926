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
    /// One page: its status, its bytes and their strong ETag. A class: a kept page is handed out
    /// at every request, and copying a struct of six buffers and strings retained each (a twentieth
    /// of a kept page's time).
    final class Page: Sendable {
        let status: HTTPResponse.Status
        let body: ByteBuffer
        let etag: String
        /// Its answer's fields but the date, made once: ``ShopPageResponder`` answers with them as
        /// they are (a 200's, with its length), so a kept page costs no building of fields.
        let fields: HTTPFields
        /// Its answer's status line and fields but the date and server, as NIO's encoder writes
        /// them: ``BytesResponder`` writes these, then the date, then the body.
        let encodedHead: ByteBuffer
        /// The same for its 304 (no length).
        let encodedNotModifiedHead: ByteBuffer

        init(status: HTTPResponse.Status, html: String) {
            self.status = status
            body = ByteBuffer(string: html)
            etag = "\"" + SHA256.hash(data: Data(html.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
            var fields = HTMLForm.publicPageFields(etag: etag)
            fields[.contentLength] = String(body.readableBytes)
            self.fields = fields
            encodedHead = Self.encode(status, fields)
            var unsized = fields
            unsized[.contentLength] = nil
            encodedNotModifiedHead = Self.encode(.notModified, unsized)
        }

        private static func encode(_ status: HTTPResponse.Status, _ fields: HTTPFields) -> ByteBuffer {
            var buffer = ByteBuffer()
            buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
            for field in fields { buffer.writeString("\(field.name.rawName): \(field.value)\r\n") }
            return buffer
        }
    }

    static let limit = 2_000
    /// Bytes of addresses and pages kept at most: the count alone let long made-up queries (an
    /// address may be 80 KB) hold 160 MB until the catalog changed.
    static let byteLimit = 16 << 20
    /// An address longer than this is no address a link of the shop's makes: its page is made
    /// each time and not kept.
    static let longestAddress = 1_024
    private let pages = Mutex<(version: String, byAddress: [String: Page], bytes: Int)>(("", [:], 0))

    /// The page at `address` kept for catalog `version`, if it is (``ShopPageResponder``).
    func kept(version: String, address: String) -> Page? {
        pages.withLock { $0.version == version ? $0.byAddress[address] : nil }
    }

    /// The page at `address` for catalog `version`, made by `make` when it is not kept yet.
    func page(version: String, address: String, make: () throws -> Page) throws -> Page {
        if let kept = kept(version: version, address: address) { return kept }
        let made = try make()
        guard address.utf8.count <= Self.longestAddress else { return made }
        let size = address.utf8.count + made.body.readableBytes
        pages.withLock { kept in
            if kept.version != version || kept.byAddress.count >= Self.limit || kept.bytes + size > Self.byteLimit { kept = (version, [:], 0) }
            if kept.byAddress.updateValue(made, forKey: address) == nil { kept.bytes += size }
        }
        return made
    }
}
