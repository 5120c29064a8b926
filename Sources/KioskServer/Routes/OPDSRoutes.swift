import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore
import NIOCore

/// The catalog for reading apps, as OPDS 2.0 (``OPDSFeeds``): `GET /opds` and the feeds under it,
/// public, each with a strong ETag (its body's digest) and a 304 for a match. The shelf
/// (`/opds/shelf`) is the account's: without credentials it answers 401 with the Authentication
/// for OPDS document (`application/opds-authentication+json`) and a `WWW-Authenticate` challenge.
struct OPDSRoutes: Sendable {
    let catalog: CatalogService
    let store: Store
    let limits: RateLimitGate

    /// The account a reading app's request acts for: its device's Bearer token (the middleware's),
    /// or HTTP Basic with the account's email and password, checked and limited as a sign-in is.
    /// Nil when it sent neither; a wrong password is a 401.
    static func account(_ request: Request, context: KioskRequestContext, store: Store, limits: RateLimitGate) async throws -> String? {
        if let accountId = try context.presentedAccount() { return accountId }
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("basic "),
              let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)).flatMap({ String(data: $0, encoding: .utf8) }),
              let colon = decoded.firstIndex(of: ":") else { return nil }
        let email = String(decoded[..<colon])
        let password = String(decoded[decoded.index(after: colon)...])
        // The same app sends the same pair with every request: checked once, then remembered a
        // few minutes, sparing a bcrypt and the sign-in limits each time.
        if let accountId = try await store.accounts.recentlyVerifiedAccountId(email: email, password: password) { return accountId }
        // The same refused pair again (an app with a password changed since): the challenge again,
        // not counted, so the app cannot lock its owner out of signing in.
        if try await store.accounts.recentlyRefused(email: email, password: password) { return nil }
        try await limits.admitSignIn(request, context: context, email: email)
        do {
            return try await store.accounts.accountId(email: email, password: password)
        } catch let refusal as StoreError where refusal.code == StoreError.signInRefused.code {
            try await store.accounts.rememberRefused(email: email, password: password)
            // Refused credentials are asked for again, as Basic does: the challenge, not an error.
            return nil
        }
    }

    static let authenticationType = "application/opds-authentication+json"

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        // One address for every app: the format its Accept asks for.
        routes.get("opds") { request, context in
            var response = try await root(request, context: context, format: OPDSFormat.preferred(by: request.headers[.accept]))
            response.headers[.vary] = "Accept"
            return response
        }
        // The same feeds in each format, under its own root.
        for format in OPDSFormat.allCases {
            let root = String(format.root.dropFirst())
            routes.get(RouterPath(String(format.start.dropFirst()))) { request, context in try await self.root(request, context: context, format: format) }
            routes.get(RouterPath(root + "/publications")) { request, context in try await publications(request, context: context, format: format) }
            routes.get(RouterPath(root + "/publications/:id")) { request, context in try await publication(request, context: context, format: format) }
            routes.get(RouterPath(root + "/new")) { request, context in try await newBooks(request, context: context, format: format) }
            routes.get(RouterPath(root + "/series/:id")) { request, context in try await series(request, context: context, format: format) }
            routes.get(RouterPath(root + "/subjects/:subject")) { request, context in try await subject(request, context: context, format: format) }
            routes.get(RouterPath(root + "/search")) { request, context in try await search(request, context: context, format: format) }
            routes.get(RouterPath(root + "/shelf")) { request, context in try await shelf(request, context: context, format: format) }
        }
        routes.get("opds/v1.2/opensearch.xml", use: openSearch)
        routes.get("opds/auth", use: authentication)
        routes.get("v1/covers/:id", use: cover)
        return routes
    }

    private func feeds(_ request: Request, _ format: OPDSFormat) async throws -> OPDSFeeds {
        OPDSFeeds(products: try await catalog.current.products, base: RequestOrigin.base(of: request), format: format)
    }

    private func page(_ request: Request) -> Int {
        request.uri.queryParameters.get("page").flatMap { Int($0) } ?? 1
    }

    func root(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let feeds = try await feeds(request, format)
        return try Self.answer(feeds.root(), kind: .navigation, feeds: feeds, to: request)
    }

    func publications(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let feeds = try await feeds(request, format)
        return try Self.answer(feeds.page(feeds.products, title: "All publications", path: feeds.format.root + "/publications", page: page(request), faceted: true),
                               kind: .acquisition, feeds: feeds, to: request)
    }

    func newBooks(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let feeds = try await feeds(request, format)
        return try Self.answer(feeds.page(feeds.storefront.newBooks(), title: "New books", path: feeds.format.root + "/new", page: page(request)),
                               kind: .acquisition, feeds: feeds, to: request)
    }

    func series(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let id = try context.parameters.require("id")
        let feeds = try await feeds(request, format)
        let issues = feeds.storefront.series(id)
        guard !issues.isEmpty else { throw APIFailure(.notFound, code: "unknown_series", message: "no series \"\(ProductID.printable(id))\" in this store's catalog") }
        let title = feeds.storefront.name(ofSeries: id)
        return try Self.answer(feeds.page(issues, title: title, path: feeds.format.root + "/series/\(OPDSFeeds.escaped(id))", page: page(request), faceted: true),
                               kind: .acquisition, feeds: feeds, to: request)
    }

    func subject(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let subject = try context.parameters.require("subject").removingPercentEncoding ?? ""
        let feeds = try await feeds(request, format)
        return try Self.answer(feeds.page(feeds.storefront.subject(subject), title: subject, path: feeds.format.root + "/subjects/\(OPDSFeeds.escaped(subject))",
                                          page: page(request), faceted: true), kind: .acquisition, feeds: feeds, to: request)
    }

    func search(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        // 200 scalars, not characters: one character may carry any number of combining marks. What
        // the catalog refuses in its own text (controls, bidirectional overrides) is dropped: the
        // query is written into the feed's title.
        let query = String(String.UnicodeScalarView(Self.searchTerms(request.uri.query).unicodeScalars
            .filter { !($0.properties.generalCategory == .control || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value)) }.prefix(200)))
        let feeds = try await feeds(request, format)
        return try Self.answer(feeds.page(feeds.storefront.search(query), title: "Search: \(query)", path: feeds.format.root + "/search?query=\(OPDSFeeds.escaped(query))",
                                          page: page(request)), kind: .acquisition, feeds: feeds, to: request)
    }

    /// The `query` of a search as a form writes it: `+` is a space (apps fill OpenSearch's
    /// `{searchTerms}` so), `%2B` a plus.
    static func searchTerms(_ rawQuery: String?) -> String {
        for pair in (rawQuery ?? "").split(separator: "&") where pair.hasPrefix("query=") {
            let value = pair.dropFirst("query=".count).replacingOccurrences(of: "+", with: " ")
            return value.removingPercentEncoding ?? value
        }
        return ""
    }

    func publication(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        let id = try context.parameters.require("id")
        let feeds = try await feeds(request, format)
        guard let product = feeds.storefront.onSale(id) else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no publication \"\(ProductID.printable(id))\" on sale here")
        }
        switch format {
        case .v2:
            return try Self.answer(feeds.publication(product), to: request, type: OPDSFeeds.publicationType)
        case .v1_2:
            return try Self.answer(OPDSAtom.entryDocument(feeds.publication(product), updated: OPDSAtom.updated(feeds.products)), to: request, type: OPDSAtom.entryType)
        }
    }

    /// `GET /opds/v1.2/opensearch.xml`: where 1.x apps learn how to search.
    @Sendable func openSearch(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try Self.answer(OPDSAtom.openSearchDescription(base: RequestOrigin.base(of: request), root: OPDSFormat.v1_2.root, storeTitle: "Kiosk"),
                        to: request, type: OPDSAtom.openSearchType)
    }

    // MARK: Covers

    /// `GET /v1/covers/{id}`: the publication's cover, public (it sells the book): the publisher's
    /// image (the catalog's `cover` file, or the one its EPUB names), with its SHA-256 as strong
    /// ETag and its own media type; without one, a drawn card (the title and authors on a plain
    /// card, as SVG, its text escaped as XML). Cached a day either way.
    @Sendable func cover(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try Self.coverResponse(try context.parameters.require("id"), published: try await catalog.current, request: request)
    }

    /// The answer to a request for product `id`'s cover (see ``cover(_:context:)``).
    static func coverResponse(_ id: String, published: PublishedCatalog, request: Request) throws -> Response {
        guard let product = published.products[id] else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no product \"\(ProductID.printable(id))\"; the catalog lists what is sold")
        }
        if let cover = product.cover, let file = published.covers[id] {
            let etag = "\"\(cover.sha256)\""
            var headers = HTTPFields()
            headers[.eTag] = etag
            headers[.cacheControl] = "public, max-age=86400"
            let ifNoneMatch = request.headers[values: .ifNoneMatch].joined(separator: ",")
            if !ifNoneMatch.isEmpty, EntityTag.ifNoneMatch(ifNoneMatch, matchesAnyOf: [etag]) {
                return Response(status: .notModified, headers: headers)
            }
            // Named by its SHA-256 and never rewritten; a cover removed under a running store is a 404, not a 500.
            guard let bytes = try? Data(contentsOf: file), bytes.count == Int(cover.size) else {
                throw APIFailure(.notFound, code: "no_cover", message: "the cover of \(ProductID.printable(id)) is not on this server's disk; publish the catalog again")
            }
            headers[.contentType] = cover.type
            headers[.contentLength] = String(bytes.count)
            if let sniffing = HTTPField.Name("X-Content-Type-Options") { headers[sniffing] = "nosniff" }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        let title = String(product.title.prefix(60))
        let authors = (product.metadata?.authors ?? []).prefix(2).joined(separator: ", ")
        let svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="600" height="900" viewBox="0 0 600 900">\
            <rect width="600" height="900" fill="#1d3557"/><rect x="30" y="30" width="540" height="840" fill="none" stroke="#f1faee" stroke-width="4"/>\
            <text x="300" y="380" fill="#f1faee" font-family="serif" font-size="40" text-anchor="middle">\(Self.xml(title))</text>\
            <text x="300" y="460" fill="#a8dadc" font-family="serif" font-size="28" text-anchor="middle">\(Self.xml(authors))</text></svg>
            """
        var response = try answer(Data(svg.utf8), to: request, type: "image/svg+xml")
        response.headers[.cacheControl] = "public, max-age=86400"
        return response
    }

    /// Text as XML character data: the five characters that could end it escaped, control characters dropped.
    static func xml(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            default: if scalar.value >= 0x20 { escaped.unicodeScalars.append(scalar) }
            }
        }
        return escaped
    }

    // MARK: Authentication for OPDS

    struct AuthenticationDocument: Encodable {
        struct Flow: Encodable {
            var type: String
            var labels: [String: String]
        }

        var id: String
        var title: String
        var description: String
        var authentication: [Flow]
        var links: [OPDSFeeds.Link]
    }

    static let authenticationDocument = AuthenticationDocument(
        id: "/opds/auth", title: "Kiosk", description: "Sign in with the email and password of your Kiosk account.",
        authentication: [AuthenticationDocument.Flow(type: "http://opds-spec.org/auth/basic", labels: ["login": "Email", "password": "Password"])],
        links: [
            OPDSFeeds.Link(rel: "start", href: "/opds", type: OPDSFeeds.feedType),
            OPDSFeeds.Link(rel: "http://opds-spec.org/shelf", href: "/opds/shelf", type: OPDSFeeds.feedType),
            // The shop's sign-in page, whose second form creates an account; and where a reader
            // locked out learns what to do.
            OPDSFeeds.Link(rel: "register", href: "/account", type: "text/html", title: "Create an account"),
            OPDSFeeds.Link(rel: "help", href: "/account", type: "text/html", title: "Sign in, or ask the store for a reset code"),
        ])

    @Sendable func authentication(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try Self.answer(Self.authenticationDocument, to: request, type: Self.authenticationType)
    }

    /// `GET /opds/shelf` (and `/opds/v1.2/shelf`): the account's publications. Without credentials
    /// (a device's Bearer token, or Basic with the account's email and password), a 401 with the
    /// authentication document and a Basic challenge, as Authentication for OPDS asks (and KyBook
    /// needs before it sends any credentials).
    func shelf(_ request: Request, context: KioskRequestContext, format: OPDSFormat) async throws -> Response {
        guard let accountId = try await Self.account(request, context: context, store: store, limits: limits) else { return try Self.challenge() }
        let feeds = try await feeds(request, format)
        let all = try await catalog.current.products
        // Bought outright, or an issue one of its subscriptions covers (as a receipt's entitlement is judged).
        // Only what an app can open (``Storefront/readableInApps()``): an archive is the Kiosk client's.
        let owned = try await store.receipts.ownedProducts(accountId, among: all.values.filter { $0.kind == .nonConsumable && $0.content?.format.deliveredAsFile == true })
        let publications = owned.sorted().compactMap { all[$0] }
        var feed = feeds.page(publications, title: "Your publications", path: feeds.format.root + "/shelf", page: page(request), owned: true)
        feed.links.removeAll { $0.rel == "http://opds-spec.org/shelf" }
        var response = try Self.answer(feed, kind: .acquisition, feeds: feeds, to: request)
        response.headers[.cacheControl] = "private, no-cache"
        return response
    }

    /// A 401 with the authentication document and the Basic challenge.
    static func challenge() throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = authenticationType
        headers[.wwwAuthenticate] = #"Basic realm="Kiosk", charset="UTF-8""#
        let body = try JSONEncoder.opds.encode(authenticationDocument)
        return Response(status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    // MARK: Answering

    /// `feed` in its format: 2.0's JSON, or 1.2's Atom of `kind`.
    static func answer(_ feed: OPDSFeeds.Feed, kind: OPDSAtom.Kind, feeds: OPDSFeeds, to request: Request) throws -> Response {
        switch feeds.format {
        case .v2:
            return try answer(feed, to: request)
        case .v1_2:
            let document = OPDSAtom.document(feed, kind: kind, updated: OPDSAtom.updated(feeds.products), storeTitle: feeds.storeTitle,
                                             openSearch: feeds.base + OPDSFormat.v1_2.root + "/opensearch.xml")
            return try answer(document, to: request, type: kind.type)
        }
    }

    /// `value` as JSON of `type`, with a strong ETag of its bytes; 304 when the client has them.
    static func answer(_ value: some Encodable, to request: Request, type: String = OPDSFeeds.feedType) throws -> Response {
        try answer(try JSONEncoder.opds.encode(value), to: request, type: type)
    }

    /// `body` of `type`, with a strong ETag of its bytes; 304 when the client has them.
    static func answer(_ body: Data, to request: Request, type: String) throws -> Response {
        let etag = "\"" + SHA256.hash(data: body).prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
        var headers = HTTPFields()
        headers[.eTag] = etag
        headers[.cacheControl] = "no-cache"
        let ifNoneMatch = request.headers[values: .ifNoneMatch].joined(separator: ",")
        if !ifNoneMatch.isEmpty, EntityTag.ifNoneMatch(ifNoneMatch, matchesAnyOf: [etag]) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = type
        headers[.contentLength] = String(body.count)
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

extension JSONEncoder {
    /// OPDS documents: sorted keys (so a feed's bytes, and its ETag, depend only on the catalog),
    /// slashes unescaped.
    static var opds: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
