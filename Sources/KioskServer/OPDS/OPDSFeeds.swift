import Foundation
import KioskCore

/// The store's catalog as OPDS 2.0 (https://drafts.opds.io/opds-2.0), which reading apps
/// (Thorium, KOReader, Palace…) browse: a navigation feed, paged publication feeds, a search and
/// one publication's document, each a Codable value encoded as the spec's JSON, never a string
/// put together by hand.
///
/// Every publication links how it is had: `buy` (or `subscribe`) with its price, and the type
/// delivered (`indirectAcquisition` for an archive); a free one `open-access`. A cover, when the
/// catalog has one, is `images`.
struct OPDSFeeds {
    static let feedType = "application/opds+json"
    static let publicationType = "application/opds-publication+json"
    static let pageSize = 50

    /// What is on sale and how it is browsed, as the shop shows it.
    let storefront: Storefront
    var products: [Product] { storefront.products }
    let storeTitle: String
    /// The store's own address as the request reached it (`http://host:port`): every link is
    /// absolute, as a feed's `self` must be.
    let base: String
    /// The format whose feeds these are: the same feeds, linking within their own format.
    let format: OPDSFormat

    init(products: [String: Product], base: String, format: OPDSFormat = .v2, storeTitle: String = "Kiosk") {
        self.base = base
        self.format = format
        storefront = Storefront(products: products).readableInApps()
        self.storeTitle = storeTitle
    }

    // MARK: Documents

    struct Link: Encodable, Equatable {
        var rel: String?
        var href: String
        var type: String?
        var title: String?
        var templated: Bool?
        var properties: Properties?
    }

    struct Properties: Encodable, Equatable {
        var price: Price?
        var indirectAcquisition: [Acquisition]?
        var numberOfItems: Int?
    }

    struct Price: Encodable, Equatable {
        var currency: String
        var value: Double
        /// The catalog's own decimal text (`4.99`, `1200`), as OPDS 1.2's `opds:price` writes it;
        /// 2.0's JSON has the number alone.
        var amount: String

        enum CodingKeys: String, CodingKey { case currency, value }
    }

    struct Acquisition: Encodable, Equatable {
        var type: String
    }

    struct FeedMetadata: Encodable {
        var title: String
        var numberOfItems: Int?
        var itemsPerPage: Int?
        var currentPage: Int?
    }

    struct Feed: Encodable {
        var metadata: FeedMetadata
        var links: [Link]
        var facets: [FacetGroup]?
        var navigation: [Link]?
        var publications: [Publication]?
        var groups: [Group]?
    }

    /// A way to narrow a list of publications (by subject, by series): a title and a link per choice,
    /// the one shown now with `rel: self`.
    struct FacetGroup: Encodable {
        var metadata: FeedMetadata
        var links: [Link]
    }

    struct Group: Encodable {
        var metadata: FeedMetadata
        var links: [Link]?
        var publications: [Publication]?
        var navigation: [Link]?
    }

    struct Publication: Encodable {
        var metadata: Metadata
        var links: [Link]
        var images: [Link]?
    }

    struct Contributor: Encodable {
        var name: String
    }

    struct SeriesEntry: Encodable {
        var name: String
        var position: Int?
    }

    struct BelongsTo: Encodable {
        var series: [SeriesEntry]
    }

    struct Metadata: Encodable {
        var type: String
        var identifier: String
        var title: String
        var author: [Contributor]?
        var editor: [Contributor]?
        var illustrator: [Contributor]?
        var translator: [Contributor]?
        var narrator: [Contributor]?
        var publisher: [Contributor]?
        var language: String?
        var published: String?
        var subject: [String]?
        var description: String?
        var numberOfPages: Int?
        var belongsTo: BelongsTo?

        enum CodingKeys: String, CodingKey {
            case type = "@type"
            case identifier, title, author, editor, illustrator, translator, narrator, publisher, language, published, subject, description,
                 numberOfPages, belongsTo
        }
    }

    // MARK: The feeds

    /// `GET /opds`: where to go from here.
    func root() -> Feed {
        var navigation = [
            Link(rel: "subsection", href: base + format.root + "/publications", type: Self.feedType, title: "All publications"),
            Link(rel: "subsection", href: base + format.root + "/new", type: Self.feedType, title: "New books"),
        ]
        for magazine in storefront.magazines() where !storefront.series(magazine.id).allSatisfy({ $0.kind == .subscription }) {
            navigation.append(Link(rel: "subsection", href: base + format.root + "/series/\(Self.escaped(magazine.id))", type: Self.feedType, title: magazine.name))
        }
        for subject in storefront.subjects().prefix(50) {
            navigation.append(Link(rel: "subsection", href: base + format.root + "/subjects/\(Self.escaped(subject))", type: Self.feedType, title: subject))
        }
        let newest = products.filter { $0.series == nil }.prefix(10).map { publication($0) }
        // The same catalog in the other format, for an app that reads only that one.
        let other = format.other
        let links = commonLinks(self: format.start) + [Link(rel: "alternate", href: base + other.root, type: other.type)]
        return Feed(metadata: FeedMetadata(title: storeTitle), links: links, navigation: navigation, publications: nil,
                    groups: newest.isEmpty ? nil : [Group(metadata: FeedMetadata(title: "New books"), links: [Link(rel: "self", href: base + format.root + "/new", type: Self.feedType)],
                                                          publications: newest)])
    }

    /// Every subject and every series, each a facet of the catalog's publications, with how many
    /// it holds; `active` is the path of the one shown now.
    func facets(active: String?) -> [FacetGroup] {
        func link(_ path: String, _ title: String, _ count: Int) -> Link {
            Link(rel: path == active ? "self" : nil, href: base + path, type: Self.feedType, title: title, properties: Properties(numberOfItems: count))
        }
        let subjects = storefront.subjects().prefix(50).map { subject in
            link(format.root + "/subjects/\(Self.escaped(subject))", subject, storefront.subject(subject).count)
        }
        let series = storefront.magazines().map { magazine in
            link(format.root + "/series/\(Self.escaped(magazine.id))", magazine.name, storefront.series(magazine.id).count)
        }
        return [FacetGroup(metadata: FeedMetadata(title: "Subject"), links: subjects), FacetGroup(metadata: FeedMetadata(title: "Series"), links: series)]
            .filter { !$0.links.isEmpty }
    }

    /// A paged feed of `selected`, page `page` (1 first); `owned` for the shelf, whose
    /// publications link their files directly; `faceted` for a list of the catalog's
    /// publications, which offers its subjects and series (``facets(active:)``).
    func page(_ selected: [Product], title: String, path: String, page: Int, owned: Bool = false, faceted: Bool = false) -> Feed {
        let shown = Storefront.page(selected, number: page, size: Self.pageSize)
        let (pages, current, slice) = (shown.count, shown.number, shown.items)
        var links = commonLinks(self: path + (current > 1 ? "?page=\(current)" : ""))
        links.append(Link(rel: "first", href: base + path, type: Self.feedType))
        links.append(Link(rel: "last", href: base + path + (pages > 1 ? "?page=\(pages)" : ""), type: Self.feedType))
        if current > 1 { links.append(Link(rel: "previous", href: base + path + (current > 2 ? "?page=\(current - 1)" : ""), type: Self.feedType)) }
        if current < pages { links.append(Link(rel: "next", href: base + path + "?page=\(current + 1)", type: Self.feedType)) }
        return Feed(metadata: FeedMetadata(title: title, numberOfItems: selected.count, itemsPerPage: Self.pageSize, currentPage: current),
                    links: links, facets: faceted ? facets(active: path) : nil, navigation: nil,
                    publications: slice.map { publication($0, owned: owned) }, groups: nil)
    }

    /// The links every feed carries: itself, the start, the search and the shelf.
    func commonLinks(self path: String) -> [Link] {
        [
            Link(rel: "self", href: base + path, type: Self.feedType),
            Link(rel: "start", href: base + format.start, type: Self.feedType),
            Link(rel: "search", href: base + format.root + "/search{?query}", type: Self.feedType, templated: true),
            Link(rel: "http://opds-spec.org/shelf", href: base + format.root + "/shelf", type: Self.feedType),
        ]
    }

    // MARK: One publication

    /// One publication and how it is had. Bought (the shelf, `owned`) or free, its file directly
    /// (`http://opds-spec.org/acquisition`, `…/open-access`). Otherwise, as the OPDS drafts' buying
    /// practice has it, `buy` (or `subscribe`) of type `text/html` to its page in the shop, where the
    /// reader signs in and pays, with its price and what the payment leads to
    /// (`indirectAcquisition`): an app that followed the file itself got a 401 and no way to pay.
    func publication(_ product: Product, owned: Bool = false) -> Publication {
        let metadata = product.metadata ?? PublicationMetadata()
        func people(_ role: String) -> [Contributor]? {
            let names = (metadata.contributors ?? []).filter { $0.role == role }.map { Contributor(name: $0.name) }
            return names.isEmpty ? nil : names
        }
        let delivered = product.content.map(Self.mediaType) ?? "application/octet-stream"
        let cents = KioskCore.Price.cents(product.price.amount) ?? 0
        let isFree = cents == 0 && product.kind == .nonConsumable
        let file = base + "/opds/content/\(Self.escaped(product.id))"
        let acquisition: Link
        if owned || isFree {
            acquisition = Link(rel: owned ? "http://opds-spec.org/acquisition" : "http://opds-spec.org/acquisition/open-access", href: file, type: delivered)
        } else {
            acquisition = Link(
                rel: product.kind == .subscription ? "http://opds-spec.org/acquisition/subscribe" : "http://opds-spec.org/acquisition/buy",
                href: base + "/products/\(Self.escaped(product.id))", type: "text/html", title: product.offerText.map { "New subscribers: \($0)" },
                properties: Properties(price: Price(currency: product.price.currency, value: Double(cents) / 100, amount: product.price.amount),
                                       indirectAcquisition: product.content == nil ? nil : [Acquisition(type: delivered)]))
        }
        let series = product.series.map(storefront.name(ofSeries:))
        return Publication(
            metadata: Metadata(
                type: product.series != nil ? "http://schema.org/PublicationIssue" : "http://schema.org/Book",
                identifier: metadata.identifiers?.first ?? "urn:kiosk:\(product.id)", title: product.title,
                author: people("author"), editor: people("editor"), illustrator: people("illustrator"), translator: people("translator"),
                narrator: people("narrator"), publisher: metadata.publisher.map { [Contributor(name: $0)] }, language: metadata.language,
                published: product.publicationDate, subject: metadata.subjects, description: metadata.description ?? (product.summary.isEmpty ? nil : product.summary),
                numberOfPages: metadata.pageCount,
                belongsTo: series.map { BelongsTo(series: [SeriesEntry(name: $0, position: product.issueNumber)]) }),
            // Off sale (an owner's shelf keeps it): no entry or shop page to link, only its file.
            links: (product.forSale == false ? [] : [Link(rel: "self", href: base + format.root + "/publications/\(Self.escaped(product.id))", type: Self.publicationType)])
                + [acquisition]
                + (owned ? [Link(rel: "http://opds-spec.org/progression", href: base + "/opds/progression/\(Self.escaped(product.id))",
                                 type: OPDSProgressionRoutes.type)] : [])
                // Its page in the shop: the cover, the description and the way to pay in a browser.
                + (product.forSale == false ? [] : [Link(rel: "alternate", href: base + "/products/\(Self.escaped(product.id))", type: "text/html")]),
            // OPDS 2.0 asks every publication for an image: the store's cover route (the
            // publisher's cover, or a drawn card). `?v=` names the version, so a reading app's
            // cache of an old cover is never served for a new one.
            images: [Link(rel: nil, href: base + "/v1/covers/\(Self.escaped(product.id))" + (product.cover.map { "?v=\($0.sha256.prefix(12))" } ?? ""),
                          type: product.cover?.type ?? "image/svg+xml")])
    }

    /// The media type a reading app is handed.
    static func mediaType(_ content: ContentDescriptor) -> String { mediaType(content.format) }

    static func mediaType(_ format: ArchiveFormat) -> String {
        switch format {
        case .epub: "application/epub+zip"
        case .pdf: "application/pdf"
        case .cbz: "application/vnd.comicbook+zip"
        case .zip: "application/zip"
        case .tarGz: "application/gzip"
        }
    }

    static func escaped(_ component: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return component.addingPercentEncoding(withAllowedCharacters: allowed) ?? component
    }
}
