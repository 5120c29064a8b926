import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import NIOCore

/// The catalog's route: `GET /v1/catalog`, the product list with a strong ETag, 304 on a match,
/// gzip when asked.
struct CatalogRoutes: Sendable {
    let catalog: CatalogService

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("v1/catalog", use: catalogDocument)
        return routes
    }

    /// `GET /v1/catalog`.
    @Sendable func catalogDocument(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let published = try await catalog.current
        let acceptEncoding = request.headers[values: .acceptEncoding].joined(separator: ",")
        let gzip = Self.accepts("gzip", in: acceptEncoding)
        let etag = gzip ? published.gzipETag : published.etag

        var headers = HTTPFields()
        headers[.eTag] = etag
        headers[.vary] = "Accept-Encoding"
        headers[.cacheControl] = "no-cache"
        let ifNoneMatch = request.headers[values: .ifNoneMatch].joined(separator: ",")
        if !ifNoneMatch.isEmpty,
           EntityTag.ifNoneMatch(ifNoneMatch, matchesAnyOf: [published.etag, published.gzipETag])
        {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json"
        let body = gzip ? published.gzippedBody : published.body
        if gzip { headers[.contentEncoding] = "gzip" }
        headers[.contentLength] = String(body.count)
        if request.method == .head {
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// True when an Accept-Encoding value accepts `coding` with a non-zero quality.
    static func accepts(_ coding: String, in fieldValue: String) -> Bool {
        for item in fieldValue.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingOptionalWhitespace().lowercased() }
            guard let name = parts.first, name == coding || name == "*" else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return quality > 0
        }
        return false
    }
}
