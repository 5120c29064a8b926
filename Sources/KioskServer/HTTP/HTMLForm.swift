import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// Server-made pages and the forms they post (the console, the account page).
enum HTMLForm {
    /// Text as HTML: `&`, `<`, `>`, `"` and `'` replaced, looked at one Unicode scalar at a time.
    ///
    /// Not one `Character` at a time: a character is a whole grapheme cluster, so a `<` after a
    /// "prepend" letter (U+0D4E) or a `"` before a combining accent is part of a character that is
    /// not `<` or `"`, and went through unescaped (the attack on issue 46 made a device name a
    /// `<meta http-equiv=refresh>` that sent the operator's console elsewhere). swift-mustache's own
    /// HTML escaping has the same flaw, so the account page's templates use this one
    /// (``AccountPageTemplates``).
    static func escape(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            // NUL, and the bidi overrides and isolates, which would turn the text that follows a
            // value (a price after a title) around: dropped, never shown.
            case "\u{0}", "\u{202A}"..."\u{202E}", "\u{2066}"..."\u{2069}": continue
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// The fields of a posted `application/x-www-form-urlencoded` form (at most 64 KiB).
    static func fields(_ request: Request) async throws -> [String: String] {
        guard request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true else {
            throw HTTPError(.unsupportedMediaType, message: "This page takes forms (application/x-www-form-urlencoded).")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: 64 << 10)
        } catch {
            throw HTTPError(.contentTooLarge, message: "This form sent more than 64 KiB; nothing was done.")
        }
        // Hummingbird's own form decoder (`+` and percent-escapes as the browser sends them), not a
        // hand-written split: a field that is not text the form's fields hold is a 400 saying so.
        do {
            return try URLEncodedFormDecoder().decode([String: String].self, from: String(buffer: body))
        } catch {
            throw HTTPError(.badRequest, message: "This form could not be read (a field is not form-encoded text); reload the page and send it again.")
        }
    }

    /// A page with the headers every server-made page has: never cached, nothing from elsewhere,
    /// no script, no framing by another site.
    /// - Parameter inlineStyle: the console's pages carry their style; the store's pages link
    ///   `/kiosk.css` (``PageStyle``) and allow no inline style either.
    /// - Parameter formTargets: origins besides this one a form on the page may lead to (the buy
    ///   form's 303 to the payment page: browsers hold a form's redirects to `form-action` too).
    static func page(_ status: HTTPResponse.Status, _ html: String, inlineStyle: Bool = false, formTargets: [String] = []) -> Response {
        var headers = headers(inlineStyle: inlineStyle, formTargets: formTargets)
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// A page the same for every reader (the shop's): its strong ETag, 304 for a match, and kept
    /// a minute by a cache in front (nginx, a CDN), then asked again.
    static func publicPage(_ request: Request, _ page: RenderedPages.Page) -> Response {
        let headers = publicPageFields(etag: page.etag)
        // A precondition holds only for a page found (RFC 9110 13.2.1): a 404 is never a 304.
        if page.status == .ok, let match = request.headers[.ifNoneMatch], EntityTag.ifNoneMatch(match, matchesAnyOf: [page.etag]) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: page.status, headers: headers, body: .init(byteBuffer: page.body))
    }

    /// A public page's fields: every page's, a minute in shared caches, and its ETag (the router's
    /// answer and ``ShopPageResponder``'s are the same).
    static func publicPageFields(etag: String) -> HTTPFields {
        var headers = headers(inlineStyle: false)
        headers[.cacheControl] = "public, max-age=60"
        headers[.eTag] = etag
        return headers
    }

    private static func headers(inlineStyle: Bool, formTargets: [String] = []) -> HTTPFields {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8"]
        if let policy = HTTPField.Name("Content-Security-Policy") {
            let style = inlineStyle ? "'unsafe-inline'" : "'self'"
            headers[policy] = "default-src 'none'; style-src \(style); img-src 'self'; form-action \((["'self'"] + formTargets).joined(separator: " ")); frame-ancestors 'none'; base-uri 'none'"
        }
        if let sniffing = HTTPField.Name("X-Content-Type-Options") { headers[sniffing] = "nosniff" }
        if let framing = HTTPField.Name("X-Frame-Options") { headers[framing] = "DENY" }
        if let referrer = HTTPField.Name("Referrer-Policy") { headers[referrer] = "same-origin" }
        return headers
    }
}

/// The account page's templates' content type: HTML escaped by ``HTMLForm/escape(_:)``.
struct ScalarHTMLContentType: MustacheContentType {
    static let name = "KIOSK_HTML"

    func escapeText(_ text: String) -> String {
        HTMLForm.escape(text)
    }
}
