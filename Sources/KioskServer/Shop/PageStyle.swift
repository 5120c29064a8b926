import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The one stylesheet of the pages on the store's address (the shop, the library, `/account`),
/// served as `/kiosk.css` so that their Content-Security-Policy can say `style-src 'self'` and no
/// inline style or script runs. Its URL names its digest (`?v=`): cached for a year, and a new
/// Kiosk's style is a new URL.
enum PageStyle {
    static let css = """
        :root { color-scheme: light; }
        body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1d2327; background: #f6f7f7; }
        a { color: #0a4b78; } a:focus, button:focus, input:focus { outline: 3px solid #f0b849; outline-offset: 1px; }
        header { background: #1d2327; color: #fff; padding: .6rem 1.2rem; display: flex; flex-wrap: wrap; gap: .6rem 1.2rem; align-items: center; }
        header a { color: #fff; } header nav { display: flex; flex-wrap: wrap; gap: .4rem 1rem; align-items: center; }
        header .brand { font-weight: bold; font-size: 1.1rem; text-decoration: none; }
        header form { display: flex; gap: .4rem; margin: 0; } header input[type=search] { width: 12rem; max-width: 50vw; padding: .3rem; font: inherit; }
        header .account { margin-left: auto; }
        main { max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem; }
        section { background: #fff; border: 1px solid #dcdcde; border-radius: 6px; padding: .8rem 1.2rem; margin-bottom: 1.2rem; }
        h1 { font-size: 1.6rem; margin: .4rem 0 1rem; } h2 { font-size: 1.2rem; margin-top: .2rem; }
        table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #eee; vertical-align: top; }
        label { display: block; margin-top: .6rem; } input[type=email], input[type=password], input[type=text] { width: 100%; max-width: 24rem; padding: .4rem; font: inherit; box-sizing: border-box; }
        button, .button { font: inherit; padding: .3rem .8rem; margin-top: .6rem; cursor: pointer; }
        .button { display: inline-block; background: #0a4b78; color: #fff; border-radius: 4px; text-decoration: none; }
        .inline { display: inline; } .inline button { margin-top: 0; }
        .error { color: #8a1f11; background: #fcf0f1; border: 1px solid #d63638; padding: .5rem .8rem; border-radius: 4px; }
        .notice { color: #00450c; background: #edfaef; border: 1px solid #00a32a; padding: .5rem .8rem; border-radius: 4px; }
        .muted { color: #50575e; } .danger button { color: #8a1f11; }
        .shelf { list-style: none; padding: 0; margin: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr)); gap: 1rem; }
        .shelf li { display: flex; flex-direction: column; gap: .2rem; }
        .shelf img { width: 100%; aspect-ratio: 2 / 3; object-fit: cover; border: 1px solid #dcdcde; background: #eee; }
        .product { display: grid; grid-template-columns: minmax(8rem, 16rem) 1fr; gap: 1.2rem; }
        .product img { width: 100%; border: 1px solid #dcdcde; }
        @media (max-width: 32rem) { .product { grid-template-columns: 1fr; } .product img { max-width: 12rem; } header .account { margin-left: 0; } }
        .price { font-size: 1.2rem; font-weight: bold; }
        .pages { display: flex; gap: 1rem; justify-content: center; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
        """

    /// The first 12 hex digits of the stylesheet's SHA-256: its version in every page's link.
    static let version = SHA256.hash(data: Data(css.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()

    /// `GET /kiosk.css`.
    static func response(_ request: Request) -> Response {
        let etag = "\"\(version)\""
        // Kept a year only under its own version's URL: another `v` (an old page's) is asked again.
        let current = request.uri.queryParameters.get("v").map { String($0) } == version
        var headers: HTTPFields = [.eTag: etag, .cacheControl: current ? "public, max-age=31536000, immutable" : "no-cache"]
        if let match = request.headers[.ifNoneMatch], EntityTag.ifNoneMatch(match, matchesAnyOf: [etag]) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "text/css; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: css)))
    }
}
