import Foundation
import HTTPTypes
import Hummingbird
import KioskArchive
import KioskCore
import Logging

/// `GET` and `HEAD /v1/content/{productId}`: the archive, for a receipt that entitles it, with ranges.
struct ContentController {
    let catalog: CatalogService
    let store: Store
    let metrics: ServerMetrics
    let fileIO = FileIO()

    func addRoutes(to router: Router<KioskRequestContext>) {
        router.get("v1/content/:productId") { request, context in
            try await self.serve(request, context: context)
        }
        router.head("v1/content/:productId") { request, context in
            try await self.serve(request, context: context)
        }
    }

    func serve(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let productId = try context.parameters.require("productId")
        let published = try await catalog.current
        guard let product = published.products[productId], var archive = published.archives[productId], let content = product.content else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no downloadable product \"\(productId)\"; run kiosk sync")
        }
        try await authorize(request, product: product)

        // A client that names the version it wants (If-Match) gets that version or 412, never
        // another one: the one a reload just replaced is still served, an older one is gone.
        if let ifMatch = request.headers[.ifMatch], ifMatch != "*", ifMatch != "\"\(content.sha256)\"" {
            guard let older = await catalog.previousArchive(productId, etag: ifMatch) else {
                throw APIFailure(HTTPResponse.Status(code: 412, reasonPhrase: "Precondition Failed"), code: "version_changed",
                    message: "the content of \(productId) is no longer version \(ifMatch); sync the catalog and download the current one")
            }
            archive = older
        }
        // A resume of the version a reload just replaced finishes from its own bytes.
        if let ifRange = request.headers[.ifRange], ifRange != "\"\(content.sha256)\"",
           let older = await catalog.previousArchive(productId, etag: ifRange) {
            archive = older
        }
        let etag = "\"\(archive.sha256)\""
        var headers = HTTPFields()
        headers[.acceptRanges] = "bytes"
        headers[.eTag] = etag
        headers[.contentType] = content.format == .tarGz ? "application/gzip" : "application/zip"
        headers[.cacheControl] = "private, no-transform"

        // An If-Range that names another version means "the bytes I have are stale": send them all.
        let ifRange = request.headers[.ifRange]
        let range = ifRange == nil || ifRange == etag ? ByteRange.parse(request.headers[.range], size: archive.size) : .whole
        let isHead = request.method == .head
        switch range {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(archive.size)"
            headers[.contentLength] = "0"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .partial(let bytes):
            headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(archive.size)"
            headers[.contentLength] = String(bytes.count)
            if isHead { return Response(status: .partialContent, headers: headers) }
            await store.recordDownload(productId: productId, bytes: Int64(bytes.count))
            let body = try await fileIO.loadFile(
                path: archive.file.path, range: Int(bytes.lowerBound)...Int(bytes.upperBound), context: context, chunkLength: 1 << 20)
            return Response(status: .partialContent, headers: headers, body: measured(body))
        case .whole:
            headers[.contentLength] = String(archive.size)
            if isHead || archive.size == 0 { return Response(status: .ok, headers: headers) }
            await store.recordDownload(productId: productId, bytes: archive.size)
            let body = try await fileIO.loadFile(path: archive.file.path, context: context, chunkLength: 1 << 20)
            return Response(status: .ok, headers: headers, body: measured(body))
        }
    }

    /// Counts the bytes a body sends and how many are being sent at once.
    private func measured(_ body: ResponseBody) -> ResponseBody {
        let metrics = self.metrics
        let counted = body.map { buffer in
            metrics.bytesServed.increment(by: Int64(buffer.readableBytes))
            return buffer
        }
        return ResponseBody(contentLength: counted.contentLength) { writer in
            metrics.downloadsInFlight.increment()
            defer { metrics.downloadsInFlight.decrement() }
            try await counted.write(writer)
        }
    }

    /// 401 without a receipt that verifies; 403 for one that does not entitle this product.
    private func authorize(_ request: Request, product: Product) async throws {
        guard let header = request.headers[.authorization], header.hasPrefix("Receipt ") else {
            throw APIFailure.unauthorized("downloads need Authorization: Receipt <the signed transaction of the purchase>")
        }
        let receipt = String(header.dropFirst("Receipt ".count)).trimmingCharacters(in: .whitespaces)
        let claims: ReceiptClaims
        do {
            claims = try await store.keys.verify(receipt)
        } catch {
            throw APIFailure.unauthorized("the receipt is not valid: \(error)")
        }
        guard claims.environment == store.environment else {
            throw APIFailure.unauthorized("the receipt was signed by the \(claims.environment.rawValue) store, not this \(store.environment.rawValue) one")
        }
        switch try await store.entitlement(claims, for: product) {
        case .granted:
            return
        case .revoked:
            throw APIFailure(.forbidden, code: "revoked", message: "transaction \(claims.transactionId) was revoked or is unknown; it no longer entitles any content")
        case .notOwned:
            throw APIFailure(.forbidden, code: "not_entitled", message: "account \(claims.accountId) does not own \(product.id); buy it or restore purchases")
        }
    }
}
