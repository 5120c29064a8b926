import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import KioskArchive
import KioskCore
import KioskStore
import Logging

/// `GET` and `HEAD /v1/content/{productId}`: the archive, for a receipt that entitles it, with ranges.
///
/// Kiosk always decides who may have which version; who sends the bytes is ``ContentDelivery``:
/// Kiosk itself, the nginx in front of it (X-Accel-Redirect), or any nginx edge or CDN that checks
/// a short-lived signed URL.
struct ContentRoutes: Sendable {
    let catalog: CatalogService
    let store: Store
    let delivery: ContentDelivery
    /// A reading app's Basic credentials are limited as sign-ins are.
    let limits: RateLimitGate

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("v1/content/:productId", use: content)
        routes.head("v1/content/:productId", use: content)
        routes.get("v1/content/:productId/manifest", use: manifest)
        // A reading app's acquisition link (OPDS): the account's own publication, by its token.
        routes.get("opds/content/:productId", use: ownedContent)
        routes.head("opds/content/:productId", use: ownedContent)
        return routes
    }

    /// `GET /v1/content/{productId}/manifest?version=<sha256>`: the ``ContentManifest`` of that
    /// version of the archive (the current one, or the one a reload replaced within the grace
    /// period), for the same receipts as the archive. Always sent by Kiosk: it is small, and its
    /// SHA-256 is in the catalog, so no edge needs to hold it.
    @Sendable func manifest(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (productId, _, archive) = try await requestedVersion(request, context: context)
        guard let file = archive.manifestFile, let sha256 = archive.manifestSha256, let body = try? Data(contentsOf: file) else {
            throw APIFailure(.notFound, code: "no_manifest", message: "\(productId) has no manifest for this version; download the whole archive")
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.eTag] = "\"\(sha256)\""
        headers[.cacheControl] = "private, no-transform"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `GET` and `HEAD /v1/content/{productId}`.
    @Sendable func content(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (productId, content, asked) = try await requestedVersion(request, context: context)
        var archive = asked
        // A resume of the version a reload just replaced finishes from its own bytes.
        if let ifRange = request.headers[.ifRange], ifRange != "\"\(content.sha256)\"",
           let older = await catalog.previousArchive(productId, etag: ifRange) {
            archive = older
        }
        return try await send(archive, content: content, productId: productId, request: request)
    }

    /// `GET` and `HEAD /opds/content/{productId}`: what an OPDS acquisition link fetches. A free
    /// product is open access; any other needs the account's device token (Bearer) and a standing
    /// purchase of it, else a 401 with the Authentication for OPDS document or a 403. The current
    /// version, with ranges, as the content route sends it.
    @Sendable func ownedContent(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let productId = try context.parameters.require("productId")
        let sent = try await current(productId, request: request) {
            try await OPDSRoutes.account(request, context: context, store: store, limits: limits)
        }
        return try sent ?? OPDSRoutes.challenge()
    }

    /// The current version of `productId`, with ranges, for a reader that owns it (bought outright,
    /// or an issue one of its subscriptions covers), or for anyone when it is free: a reading app's
    /// acquisition link, and the download links of the reader's library in a browser. A 404 for
    /// what is not downloadable, a 403 for what the account does not own.
    /// - Parameter account: the account asking, asked only when the product is not free.
    /// - Returns: nil when it is not free and `account` names no one (the caller asks who it is).
    func current(_ productId: String, request: Request, account: () async throws -> String?) async throws -> Response? {
        let published = try await catalog.current
        guard let product = published.products[productId], let archive = published.archives[productId], let content = product.content else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no downloadable product \"\(ProductID.printable(productId))\"")
        }
        let free = (Price.cents(product.price.amount) ?? 1) == 0 && product.kind == .nonConsumable
        if !free {
            guard let accountId = try await account() else { return nil }
            guard try await store.receipts.accountOwns(accountId, product) else {
                throw APIFailure(.forbidden, code: "not_entitled", message: "this account does not own \(productId); buy it first")
            }
        }
        var response = try await send(archive, content: content, productId: productId, request: request)
        // Saved under the publisher's name as given (RFC 6266's filename*), and a plain one for older clients.
        let name = content.fileName ?? "\(product.id).\(content.format.rawValue)"
        let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
        response.headers[.contentDisposition] = "attachment; filename=\"\(Self.plainFileName(name))\"; filename*=UTF-8''\(encoded)"
        return response
    }

    /// A file name with only characters safe in a quoted header value and a file name.
    static func plainFileName(_ name: String) -> String {
        let safe = name.unicodeScalars.map { scalar -> String in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "-._ ".unicodeScalars.contains(scalar)) ? String(scalar) : "_"
        }.joined()
        return safe.isEmpty ? "download" : safe
    }

    /// Sends `archive` as the configured delivery does: from this process, through nginx, or by a signed redirect.
    /// The product a content or manifest request names, its purchase checked, and the version it
    /// asks for. A client that names the version it wants gets that version or 412, never another
    /// one: the one a reload just replaced is still served, an older one is gone. The version is
    /// `?version=<sha256>` (which survives nginx and CDNs, whose own ETags differ) or If-Match.
    private func requestedVersion(_ request: Request, context: KioskRequestContext) async throws -> (productId: String, content: ContentDescriptor, archive: PackedContent) {
        let productId = try context.parameters.require("productId")
        let published = try await catalog.current
        guard let product = published.products[productId], var archive = published.archives[productId], let content = product.content else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no downloadable product \"\(productId)\"; run kiosk sync")
        }
        try await authorize(request, product: product)
        let wanted = request.uri.queryParameters.get("version").map { "\"\($0)\"" } ?? request.headers[.ifMatch]
        if let wanted, wanted != "*", wanted != "\"\(content.sha256)\"" {
            guard let older = await catalog.previousArchive(productId, etag: wanted) else {
                throw APIFailure(HTTPResponse.Status(code: 412, reasonPhrase: "Precondition Failed"), code: "version_changed",
                    message: "the content of \(productId) is no longer version \(wanted); sync the catalog and download the current one")
            }
            archive = older
        }
        return (productId, content, archive)
    }

    private func send(_ archive: PackedContent, content: ContentDescriptor, productId: String, request: Request) async throws -> Response {
        switch delivery {
        case .stream:
            return try await stream(archive, format: content.format, productId: productId, request: request)
        case .xAccel(let prefix):
            // nginx serves the file, ranges and If-Range included; this answer has no body.
            await store.reports.recordDownload(productId: productId, bytes: Self.requestedBytes(request, size: archive.size))
            var headers = HTTPFields()
            // A valid token: the initialiser's nil (for a malformed name) cannot happen here.
            if let accel = HTTPField.Name("X-Accel-Redirect") { headers[accel] = prefix + archive.file.lastPathComponent }
            headers[.contentType] = OPDSFeeds.mediaType(content)
            headers[.cacheControl] = "private, no-transform"
            return Response(status: .ok, headers: headers)
        case .signedRedirect(let base, let secret, let lifetime):
            await store.reports.recordDownload(productId: productId, bytes: Self.requestedBytes(request, size: archive.size))
            var headers = HTTPFields()
            headers[.location] = Self.signedURL(base: base, file: archive.file.lastPathComponent, secret: secret, expires: Int(Date().timeIntervalSince1970) + lifetime)
            headers[.cacheControl] = "no-store"
            return Response(status: .temporaryRedirect, headers: headers)
        }
    }

    /// A URL nginx's secure_link module accepts until `expires` (Unix time), configured with
    /// `secure_link $arg_md5,$arg_expires; secure_link_md5 "$secure_link_expires$uri <secret>";`.
    static func signedURL(base: String, file: String, secret: String, expires: Int) -> String {
        let url = base + file
        let path = URLComponents(string: url)?.path ?? url
        let digest = Insecure.MD5.hash(data: Data("\(expires)\(path) \(secret)".utf8))
        let md5 = Data(digest).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "\(url)?md5=\(md5)&expires=\(expires)"
    }

    /// The bytes a request asks for, for the download counts when another server sends them.
    static func requestedBytes(_ request: Request, size: Int64) -> Int64 {
        guard request.method != .head else { return 0 }
        if case .partial(let bytes) = ByteRange.parse(request.headers[.range], size: size) { return Int64(bytes.count) }
        return size
    }

    /// Sends the archive from this process, with ranges and If-Range: the bytes go by `sendfile`
    /// (``FileRegionSender``), this answer only names the file and the range.
    private func stream(_ archive: PackedContent, format: ArchiveFormat, productId: String, request: Request) async throws -> Response {
        let etag = "\"\(archive.sha256)\""
        var headers = HTTPFields()
        headers[.acceptRanges] = "bytes"
        headers[.eTag] = etag
        headers[.contentType] = OPDSFeeds.mediaType(format)
        headers[.cacheControl] = "private, no-transform"

        // An If-Range that names another version means "the bytes I have are stale": send them all.
        let ifRange = request.headers[.ifRange]
        let range = ifRange == nil || ifRange == etag ? ByteRange.parse(request.headers[.range], size: archive.size) : .whole
        let isHead = request.method == .head
        let status: HTTPResponse.Status
        let bytes: ClosedRange<Int64>
        switch range {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(archive.size)"
            headers[.contentLength] = "0"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        case .partial(let partial):
            headers[.contentRange] = "bytes \(partial.lowerBound)-\(partial.upperBound)/\(archive.size)"
            (status, bytes) = (.partialContent, partial)
        case .whole:
            if archive.size == 0 {
                headers[.contentLength] = "0"
                return Response(status: .ok, headers: headers)
            }
            (status, bytes) = (.ok, 0...(archive.size - 1))
        }
        headers[.contentLength] = String(bytes.count)
        if isHead { return Response(status: status, headers: headers) }
        guard let sendfile = HTTPField.Name.kioskSendfile else {
            throw APIFailure(.internalServerError, code: "internal", message: "the server cannot name a file to send")
        }
        await store.reports.recordDownload(productId: productId, bytes: Int64(bytes.count))
        headers[sendfile] = "\(bytes.lowerBound)-\(bytes.upperBound) \(archive.file.path)"
        return Response(status: status, headers: headers)
    }

    /// 401 without a proof of purchase that verifies; 403 for one that does not entitle this product.
    ///
    /// The proof's scheme picks its verifier (``PurchaseProofVerifiers``); what it refuses is
    /// answered by ``ReceiptRefusal/apiFailure``, in the words the client uses for the same proof.
    private func authorize(_ request: Request, product: Product) async throws {
        guard let header = request.headers[.authorization], let chosen = store.proofs.verifier(forAuthorization: header) else {
            let others = store.proofs.kinds.filter { $0 != .kioskReceipt }.map { "\($0) <proof>" }
            throw APIFailure.unauthorized("downloads need Authorization: Receipt <the signed transaction of the purchase>"
                + (others.isEmpty ? "" : " (or \(others.joined(separator: ", ")))"))
        }
        let verified: VerifiedPurchase
        do {
            verified = try await chosen.verifier.verify(chosen.proof, presentedBy: nil)
        } catch let refusal as ReceiptRefusal {
            throw refusal.apiFailure
        }
        let claims = verified.claims
        switch try await store.receipts.entitlement(verified, for: product) {
        case .granted:
            return
        case .withdrawn(let reason):
            throw APIFailure(.forbidden, code: "revoked", message: reason)
        case .revoked:
            throw APIFailure(.forbidden, code: "revoked", message: "transaction \(claims.transactionId) was revoked or is unknown; it no longer entitles any content")
        case .notOwned:
            throw APIFailure(.forbidden, code: "not_entitled", message: "account \(claims.accountId) does not own \(product.id); buy it or restore purchases")
        }
    }
}
