import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import Mustache
import NIOCore

/// The shop at the store's own address: the front page, a page per product, all books, a series,
/// a subject, search results. Server-made HTML from ``PageTemplates``, no script.
///
/// The same for every reader (no cookie reaches these paths: the session cookie is scoped to
/// `/account`), so each page has a strong ETag of its bytes, answers 304 to a match, and may be
/// kept by nginx or a CDN for a minute. What is personal (the library, buying) is under
/// `/account` (``AccountPage``). A product off sale has a page saying so, which sends its owners
/// to their library, where it stays.
struct ShopPages: Sendable {
    let catalog: CatalogService
    let templates: MustacheLibrary
    /// The pages made for the catalog served now.
    let rendered = RenderedPages()

    /// Products on a list page.
    static let pageSize = 24
    /// Products on the front page's shelves.
    static let shelfSize = 8

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        let pages: [(RouterPath, PageMaker)] = [
            ("", front), ("books", books), ("products/:id", product), ("series/:id", series), ("subjects/:subject", subject), ("search", search),
        ]
        for (path, page) in pages {
            routes.get(path) { request, context in try await serve(request, context, page) }
        }
        routes.get("kiosk.css") { request, _ in PageStyle.response(request) }
        return routes
    }

    /// Makes one page from the request and what is on sale.
    typealias PageMaker = @Sendable (Request, KioskRequestContext, Storefront) throws -> RenderedPages.Page

    /// The page the request names, rendered once per catalog version and address: the same for
    /// every reader until the catalog changes, then made again.
    private func serve(_ request: Request, _ context: KioskRequestContext, _ make: PageMaker) async throws -> Response {
        let published = try await catalog.current
        let page = try rendered.page(version: published.etag, address: request.uri.description) {
            try make(request, context, Storefront(products: published.products))
        }
        return HTMLForm.publicPage(request, page)
    }

    @Sendable func front(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        let books = shop.newBooks()
        let magazines = shop.magazines().map { magazine -> [String: Any] in
            var values: [String: Any] = ["href": Self.seriesPath(magazine.id), "name": magazine.name]
            if let cheapest = shop.plans(ofSeries: magazine.id).min(by: { (Price.cents($0.price.amount) ?? 0) < (Price.cents($1.price.amount) ?? 0) }) {
                values["plans"] = ["from": Self.price(cheapest) + (cheapest.periodMonths.map { " a \(Self.period($0))" } ?? "")]
            }
            return values
        }
        let subjects = shop.subjects().prefix(50).map { ["href": "/subjects/\(OPDSFeeds.escaped($0))", "name": $0] }
        return render(request, "front", [
            "title": "Books and magazines",
            "books": Self.shelf(Array(books.prefix(Self.shelfSize)), in: shop, more: books.count > Self.shelfSize),
            "issues": Self.shelf(Array(shop.newIssues().prefix(Self.shelfSize)), in: shop),
            "hasMagazines": !magazines.isEmpty, "magazines": magazines,
            "hasSubjects": !subjects.isEmpty, "subjects": Array(subjects),
        ])
    }

    @Sendable func books(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        return render(request, "list", listValues("All books", shop.newBooks(), path: "/books", request: request, in: shop,
                                                  empty: "No books are on sale yet."))
    }

    @Sendable func series(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        let id = try context.parameters.require("id")
        let everything = shop.series(id)
        guard !everything.isEmpty else { return try notFound(request, "No magazine or series \(ProductID.printable(id)) is on sale here.") }
        var values = listValues(shop.name(ofSeries: id), everything.filter { $0.kind != .subscription }, path: Self.seriesPath(id),
                                request: request, in: shop, empty: "No issue of it is on sale yet.")
        let plans = shop.plans(ofSeries: id)
        values["hasPlans"] = !plans.isEmpty
        values["plans"] = Self.shelf(plans, in: shop)
        return render(request, "list", values)
    }

    @Sendable func subject(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        let subject = try context.parameters.require("subject").removingPercentEncoding ?? ""
        let found = shop.subject(subject)
        guard !found.isEmpty else { return try notFound(request, "Nothing on sale here has the subject \(ProductID.printable(subject)).") }
        return render(request, "list", listValues(subject, found, path: "/subjects/\(OPDSFeeds.escaped(subject))", request: request, in: shop, empty: ""))
    }

    @Sendable func search(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        let query = String((request.uri.queryParameters.get("q") ?? "").prefix(200))
        let found = shop.search(query)
        var values = listValues(query.isEmpty ? "Search" : "Search: \(query)", found, path: "/search?q=\(OPDSFeeds.escaped(query))",
                                request: request, in: shop,
                                empty: query.isEmpty ? "Type a title, an author or a subject above." : "Nothing on sale matches \u{201C}\(query)\u{201D}.")
        values["query"] = query
        values["intro"] = query.isEmpty ? nil : "\(found.count) found."
        return render(request, "list", values)
    }

    @Sendable func product(_ request: Request, context: KioskRequestContext, shop: Storefront) throws -> RenderedPages.Page {
        let id = try context.parameters.require("id")
        guard let product = shop.catalog[id] else {
            return try notFound(request, "No product \(ProductID.printable(id)) is sold here; search the store for it.")
        }
        guard product.forSale != false else {
            // Its owners keep it: their library lists it, with its download.
            return try notFound(request, "\(product.title) is no longer on sale. If you bought it, it is in your library (/account/library).")
        }
        return render(request, "product", Self.productValues(product, in: shop))
    }

    // MARK: Values for the templates

    static func productValues(_ product: Product, in shop: Storefront) -> [String: Any] {
        let metadata = product.metadata ?? PublicationMetadata()
        var values: [String: Any] = [
            "title": product.title, "name": product.title, "cover": coverPath(product),
            "description": metadata.description ?? product.summary, "price": price(product),
            // A free book is open access: its file, with no account and no payment.
            "buy": isFree(product) ? "/opds/content/\(OPDSFeeds.escaped(product.id))" : "/account/buy/\(OPDSFeeds.escaped(product.id))",
            "buyLabel": product.kind == .subscription ? "Subscribe" : (isFree(product) ? "Download free" : "Buy"),
        ]
        if let byline = byline(product) { values["byline"] = byline }
        if let months = product.periodMonths, product.kind == .subscription { values["period"] = period(months) }
        if let offer = product.offerText { values["offer"] = "New subscribers: \(offer)." }
        if let series = product.series {
            values["series"] = ["href": seriesPath(series), "name": shop.name(ofSeries: series)]
            values["kindLabel"] = product.kind == .subscription ? "A subscription" : "An issue"
        }
        var details: [[String: String]] = []
        func detail(_ name: String, _ value: String?) {
            if let value, !value.isEmpty { details.append(["name": name, "value": value]) }
        }
        for role in ["editor", "illustrator", "translator", "narrator"] {
            let names = (metadata.contributors ?? []).filter { $0.role == role }.map(\.name)
            detail(role.prefix(1).uppercased() + role.dropFirst(), names.isEmpty ? nil : names.joined(separator: ", "))
        }
        detail("Publisher", metadata.publisher)
        detail("Published", product.publicationDate)
        detail("Language", metadata.language.map(languageName))
        detail("Pages", metadata.pageCount.map(String.init))
        detail("Subjects", metadata.subjects?.joined(separator: ", "))
        if let content = product.content {
            detail("Format", "\(formatName(content.format)), \(ByteCount.text(content.size))")
        }
        detail("Identifier", metadata.identifiers?.first)
        if product.kind == .subscription { detail("Each period", product.periodMonths.map(period)) }
        values["hasDetails"] = !details.isEmpty
        values["details"] = details
        if let series = product.series, product.kind == .subscription {
            values["issues"] = shelf(Array(shop.series(series).filter { $0.kind != .subscription }.prefix(shelfSize)), in: shop)
        }
        if product.kind == .subscription, let series = product.series {
            values["plans"] = shelf(shop.plans(ofSeries: series).filter { $0.id != product.id }, in: shop)
        }
        return values
    }

    private func listValues(_ title: String, _ selected: [Product], path: String, request: Request, in shop: Storefront, empty: String) -> [String: Any] {
        let number = request.uri.queryParameters.get("page").flatMap { Int($0) } ?? 1
        let page = Storefront.page(selected, number: number, size: Self.pageSize)
        let joiner = path.contains("?") ? "&" : "?"
        func link(_ n: Int) -> String { n == 1 ? path : path + joiner + "page=\(n)" }
        var shown = Self.shelf(page.items, in: shop)
        shown["number"] = page.number
        shown["count"] = page.count
        shown["paged"] = page.count > 1
        if page.number > 1 { shown["previous"] = link(page.number - 1) }
        if page.number < page.count { shown["next"] = link(page.number + 1) }
        return ["title": title, "page": shown, "empty": empty]
    }

    /// A shelf's values: its cards, whether it has any, and whether there is more than it shows.
    static func shelf(_ products: [Product], in shop: Storefront, more: Bool = false) -> [String: Any] {
        ["hasItems": !products.isEmpty, "more": more, "items": products.map { card($0, in: shop) }]
    }

    static func card(_ product: Product, in shop: Storefront) -> [String: Any] {
        var values: [String: Any] = ["href": productPath(product.id), "cover": coverPath(product), "title": product.title,
                                     "price": price(product) + (product.kind == .subscription ? product.periodMonths.map { " a \(period($0))" } ?? "" : "")]
        if let byline = byline(product) { values["byline"] = byline }
        return values
    }

    static func productPath(_ id: String) -> String { "/products/\(OPDSFeeds.escaped(id))" }
    static func seriesPath(_ id: String) -> String { "/series/\(OPDSFeeds.escaped(id))" }

    /// The cover route, versioned by the cover's digest so a cache never shows an old one.
    static func coverPath(_ product: Product) -> String {
        "/v1/covers/\(OPDSFeeds.escaped(product.id))" + (product.cover.map { "?v=\($0.sha256.prefix(12))" } ?? "")
    }

    /// A book or an issue at no price, with something to download: open access.
    static func isFree(_ product: Product) -> Bool {
        product.kind == .nonConsumable && product.content != nil && Price.cents(product.price.amount) == 0
    }

    static func byline(_ product: Product) -> String? {
        let authors = product.metadata?.authors ?? []
        return authors.isEmpty ? nil : authors.joined(separator: ", ")
    }

    static func price(_ product: Product) -> String {
        let cents = Price.cents(product.price.amount) ?? 0
        return cents == 0 && product.kind == .nonConsumable ? "Free" : Price.shown(cents: cents, product.price.currency)
    }

    static func period(_ months: Int) -> String {
        switch months {
        case 1: "month"
        case 12: "year"
        default: "\(months) months"
        }
    }

    static func formatName(_ format: ArchiveFormat) -> String {
        switch format {
        case .epub: "EPUB"
        case .pdf: "PDF"
        case .cbz: "CBZ (comic book)"
        case .zip: "ZIP archive"
        case .tarGz: "tar.gz archive"
        }
    }

    /// "en" → "English"; a tag Foundation cannot name is shown as given.
    static func languageName(_ tag: String) -> String {
        Locale(identifier: "en").localizedString(forIdentifier: tag) ?? tag
    }

    // MARK: Answering

    private func render(_ request: Request, _ template: String, _ values: [String: Any], status: HTTPResponse.Status = .ok) -> RenderedPages.Page {
        var values = values
        values["styleVersion"] = PageStyle.version
        return RenderedPages.Page(status: status, html: templates.render(values, withTemplate: template) ?? "")
    }

    private func notFound(_ request: Request, _ message: String) throws -> RenderedPages.Page {
        render(request, "message", ["title": "Not found", "error": message, "shop": true], status: .notFound)
    }
}

/// What an address no route knows answers: for a person (any path outside the API) the shop's own
/// "not found" page, with its way back to the shop; for a program (`/v1/…`) the wire contract's
/// JSON error. It was an empty 404 for both. A 404 a handler throws with its own words keeps them.
struct UnknownAddressMiddleware: RouterMiddleware {
    let templates: MustacheLibrary

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && error.body == nil {
            let path = request.uri.path
            if path == "/v1" || path.hasPrefix("/v1/") {
                throw APIFailure(.notFound, code: "not_found", message: "no route answers \(request.method.rawValue) \(path); the routes are listed in docs/wire-contract.md")
            }
            let html = templates.render(["title": "Not found", "error": "There is no page at this address.", "shop": true, "styleVersion": PageStyle.version],
                                        withTemplate: "message") ?? ""
            return HTMLForm.page(.notFound, html)
        }
    }
}
