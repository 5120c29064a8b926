import Foundation
import KioskCore

/// What the store offers and how a reader browses it: the products on sale in the order they are
/// shown (the newest first, then by title, so pages do not shift between reads), new books, new
/// issues, each magazine with its issues and plans, subjects, and a search. The shop's pages
/// (``ShopPages``) and the OPDS feeds (``OPDSFeeds``) show this one selection, so a reading app and
/// a browser never disagree about what is sold.
struct Storefront: Sendable {
    /// On sale (not off sale, not a credit pack), in the order shown.
    let products: [Product]
    /// Every product the catalog has, on sale or not (an owner's library names off-sale ones).
    let catalog: [String: Product]

    init(products: [String: Product]) {
        catalog = products
        self.products = products.values.filter { $0.forSale != false && $0.kind != .consumable }
            .sorted { ($0.publicationDate ?? "", $1.title, $1.id) > ($1.publicationDate ?? "", $0.title, $0.id) }
    }

    private init(catalog: [String: Product], products: [Product]) {
        self.catalog = catalog
        self.products = products
    }

    /// What a reading app can open, for the OPDS feeds: publications delivered as files (EPUB, PDF,
    /// CBZ), and the plans of a magazine that has such issues. A product packed as an archive of
    /// HTML pages (zip, tar.gz) is for Kiosk's own client, which unpacks it into its library; an
    /// app handed one would download a file it cannot open, so it is left out of the app's feeds
    /// (it stays in the shop and in `/v1/catalog`).
    func readableInApps() -> Storefront {
        func readable(_ product: Product) -> Bool { product.content?.format.deliveredAsFile == true }
        let readableSeries = Set(products.filter(readable).compactMap(\.series))
        return Storefront(catalog: catalog, products: products.filter { product in
            product.kind == .subscription ? product.series.map(readableSeries.contains) == true : readable(product)
        })
    }

    /// A product on sale, by its ID.
    func onSale(_ id: String) -> Product? { products.first { $0.id == id } }

    /// Books: what belongs to no series.
    func newBooks() -> [Product] { products.filter { $0.series == nil && $0.kind == .nonConsumable } }

    /// Magazine issues, the newest first.
    func newIssues() -> [Product] { products.filter { $0.series != nil && $0.kind == .nonConsumable } }

    /// The series (magazines) that have something on sale, by name.
    func magazines() -> [Magazine] {
        Set(products.compactMap(\.series)).map { Magazine(id: $0, name: name(ofSeries: $0)) }.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    /// A magazine: its series ID and the name a reader knows it by.
    struct Magazine: Sendable, Equatable {
        var id: String
        var name: String
    }

    /// A series' issues and plans on sale, the latest issue first.
    func series(_ id: String) -> [Product] {
        products.filter { $0.series == id }.sorted { ($0.issueNumber ?? 0, $0.id) > ($1.issueNumber ?? 0, $1.id) }
    }

    /// The subscription plans on sale for a series, the shortest period first.
    func plans(ofSeries id: String) -> [Product] {
        products.filter { $0.series == id && $0.kind == .subscription }.sorted { ($0.periodMonths ?? 0, $0.id) < ($1.periodMonths ?? 0, $1.id) }
    }

    /// The name of a series: a product whose ID is the series' names it; else what every title of
    /// the series begins with, up to its first comma ("Harbor Monthly" from "Harbor Monthly,
    /// October 2026" and "Harbor Monthly, monthly subscription"); else the ID. The catalog has no
    /// field for it, and a publisher titles issues this way.
    func name(ofSeries id: String) -> String {
        if let named = catalog[id] { return named.title }
        let titles = catalog.values.filter { $0.series == id }.map(\.title).sorted()
        guard var prefix = titles.first else { return id }
        for title in titles.dropFirst() {
            prefix = String(zip(prefix, title).prefix { $0 == $1 }.map(\.0))
        }
        let name = (prefix.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? prefix)
            .trimmingCharacters(in: .whitespacesAndNewlines.union(.punctuationCharacters))
        return name.isEmpty ? id : name
    }

    /// Every subject a product on sale has, sorted.
    func subjects() -> [String] { Set(products.flatMap { $0.metadata?.subjects ?? [] }).sorted() }

    func subject(_ subject: String) -> [Product] { products.filter { $0.metadata?.subjects?.contains(subject) == true } }

    /// What `query` finds in titles, authors, subjects, summaries and IDs (case and accents ignored).
    func search(_ query: String) -> [Product] {
        let wanted = Self.folded(query).trimmingCharacters(in: .whitespaces)
        guard !wanted.isEmpty else { return [] }
        return products.filter { product in
            Self.folded(([product.title, product.summary, product.id] + (product.metadata?.authors ?? []) + (product.metadata?.subjects ?? []))
                .joined(separator: " ")).contains(wanted)
        }
    }

    private static func folded(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }

    /// One page of a list: `number` counted from 1, clamped to the pages there are.
    struct Page {
        var items: [Product]
        var number: Int
        var count: Int
        var total: Int
    }

    static func page(_ selected: [Product], number: Int, size: Int) -> Page {
        let count = max(1, (selected.count + size - 1) / size)
        let current = min(max(1, number), count)
        return Page(items: Array(selected.dropFirst((current - 1) * size).prefix(size)), number: current, count: count, total: selected.count)
    }
}
