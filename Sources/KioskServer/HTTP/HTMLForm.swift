import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Server-made pages and the forms they post (the console, the account page).
enum HTMLForm {
    /// The fields of a posted `application/x-www-form-urlencoded` form (at most 64 KiB).
    static func fields(_ request: Request) async throws -> [String: String] {
        guard request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true else {
            throw HTTPError(.unsupportedMediaType, message: "This page takes forms (application/x-www-form-urlencoded).")
        }
        let body = try await request.body.collect(upTo: 64 << 10)
        var fields: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if let name = parts.first { fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }

    /// A page with the headers every server-made page has: never cached, nothing from elsewhere,
    /// no script, no framing by another site.
    static func page(_ status: HTTPResponse.Status, _ html: String) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        if let policy = HTTPField.Name("Content-Security-Policy") {
            headers[policy] = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'"
        }
        if let sniffing = HTTPField.Name("X-Content-Type-Options") { headers[sniffing] = "nosniff" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
