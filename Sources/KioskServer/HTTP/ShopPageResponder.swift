import Foundation
import HTTPTypes
import KioskCore
import KioskStore
import NIOCore
import NIOHTTPTypes

/// Answers a shop page already rendered for the catalog served now (``RenderedPages``) on the
/// connection's event loop, as nginx answers a file, before the request reaches Hummingbird.
///
/// Through Hummingbird a kept page cost two thread switches (into Swift concurrency's pool and
/// back), the router and four middlewares for a lookup in a dictionary: `wrk -t2 -c32` on the front
/// page, 31,770 a second against nginx's 120,593 for the same bytes as a file (0.26 ×, eceeaf8,
/// docs/benchmarks.md section 15). The figure this earns is recorded there.
///
/// It answers only what the router would answer the same way (the same status, fields and body,
/// the same log line and metrics, as ``HTMLForm/publicPage(_:_:)`` and ``ShopPages`` make them),
/// and only when that is certain: a GET or HEAD of a shop path whose page the router rendered for
/// the catalog served now, without `Connection: close` or `Authorization`. A page not kept yet
/// goes up: the router makes it (and keeps it for the next reader). ``EventLoopResponder`` asks it
/// after the catalog's 304s and writes its answer.
struct ShopPageResponder: EventLoopAnswerer {
    let pages: RenderedPages
    let catalog: CatalogService
    let rateLimits: RateLimits

    /// The kept page's answer (a 304 when `If-None-Match` names it) and its log line, or nil.
    func answer(_ request: HTTPRequest, context: ChannelHandlerContext, date: inout HTTPDateText) -> EventLoopAnswer? {
        let fields = request.headerFields
        guard request.method == .get || request.method == .head, let path = request.path,
              fields[.authorization] == nil,
              !fields[values: .connection].contains(where: { $0.lowercased().contains("close") }),
              let kept = kept(path, ifNoneMatch: fields[values: .ifNoneMatch].joined(separator: ","))
        else { return nil }
        var headers = kept.page.fields
        if kept.status == .notModified { headers[.contentLength] = nil }
        headers[.date] = date.now()
        headers[.server] = "kiosk"
        let client = rateLimits.clientAddress(peer: context.channel.remoteAddress?.ipAddress, fields: fields)
        let line = RequestLine(method: request.method.rawValue, route: kept.route, status: kept.status.code, started: .now, account: nil,
                               client: client, agent: fields[.userAgent])
        let body = kept.status == .notModified || request.method == .head ? nil : kept.page.body
        return EventLoopAnswer(head: HTTPResponse(status: kept.status, headerFields: headers), body: body, line: line)
    }

    /// The page kept for `target` under the catalog served now, its route's name and the status
    /// to answer (304 when `ifNoneMatch`, every such field's value joined, names it); nil when the
    /// target is no shop page or its page is not kept. ``BytesResponder`` asks the same.
    func kept(_ target: String, ifNoneMatch: String) -> (page: RenderedPages.Page, route: String, status: HTTPResponse.Status)? {
        guard let route = Self.route(of: target), let version = catalog.servedTags.withLock({ $0?.plain }),
              let page = pages.kept(version: version, address: target)
        else { return nil }
        // A precondition holds only for a page found (RFC 9110 13.2.1): a 404 is never a 304.
        let notModified = page.status == .ok && !ifNoneMatch.isEmpty && EntityTag.ifNoneMatch(ifNoneMatch, matchesAnyOf: [page.etag])
        return (page, route, notModified ? .notModified : page.status)
    }

    /// The router's name of the shop route `path` (its query aside) falls on, as the metrics and
    /// the log line name it; nil for a path that is none of the shop's pages. Read as bytes: splitting
    /// the path as a `String` (by characters) was a tenth of a kept product page's time.
    static func route(of path: String) -> String? {
        let slash = UInt8(ascii: "/")
        let bare = path.utf8.prefix { $0 != UInt8(ascii: "?") }
        guard bare.first == slash else { return nil }
        let rest = bare.dropFirst()
        guard let second = rest.firstIndex(of: slash) else {
            if rest.isEmpty { return "/" }
            if rest.elementsEqual("books".utf8) { return "/books" }
            if rest.elementsEqual("search".utf8) { return "/search" }
            return nil
        }
        let name = rest[..<second]
        let id = rest[rest.index(after: second)...]
        guard !id.isEmpty, !id.contains(slash) else { return nil }
        if name.elementsEqual("products".utf8) { return "/products/{id}" }
        if name.elementsEqual("series".utf8) { return "/series/{id}" }
        if name.elementsEqual("subjects".utf8) { return "/subjects/{subject}" }
        return nil
    }
}
