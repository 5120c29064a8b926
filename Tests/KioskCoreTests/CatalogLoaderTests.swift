import Foundation
import KioskCore
import KioskTestSupport
import Testing

@Suite("Catalog validation")
struct CatalogLoaderTests {
    @Test("the bundled store loads: 3 books, 3 issues, a subscription, 2 credit packs")
    func bundledCatalogLoads() throws {
        let loader = CatalogLoader(
            catalogDirectory: SampleStore.repository.appendingPathComponent("Catalog"),
            contentDirectory: SampleStore.repository.appendingPathComponent("Content"))
        let products = try loader.load().map(\.product)
        let books = products.filter { $0.kind == .nonConsumable && $0.series == nil }
        let issues = products.filter { $0.kind == .nonConsumable && $0.series != nil }
        #expect(books.count >= 3)
        #expect(issues.count >= 3)
        #expect(issues.allSatisfy { $0.publicationDate != nil && $0.issueNumber != nil })
        #expect(products.filter { $0.kind == .subscription }.count == 1)
        #expect(products.filter { $0.kind == .consumable }.compactMap(\.credits).sorted() == [5, 10])
    }

    /// One broken product per rule, and what the refusal must name.
    struct BrokenProduct: Sendable, CustomTestStringConvertible {
        var name: String
        var change: @Sendable (inout [String: Any]) -> Void
        var rule: CatalogError.Rule
        var field: String
        var testDescription: String { name }
    }

    static let brokenProducts: [BrokenProduct] = [
        BrokenProduct(name: "unknown kind", change: { $0["kind"] = "rental" }, rule: .unknownKind, field: "kind"),
        BrokenProduct(name: "price with a comma", change: { $0["price"] = "4,99" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price as a number", change: { $0["price"] = 4.99 }, rule: .wrongType, field: "price"),
        BrokenProduct(name: "negative price", change: { $0["price"] = "-1.00" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price with a leading zero", change: { $0["price"] = "04.99" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price with three decimals", change: { $0["price"] = "4.999" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price ending in a point", change: { $0["price"] = "4." }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price starting with a point", change: { $0["price"] = ".99" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "price with two points", change: { $0["price"] = "4.9.9" }, rule: .badPrice, field: "price"),
        BrokenProduct(name: "currency of four letters", change: { $0["currency"] = "USDX" }, rule: .badPrice, field: "currency"),
        BrokenProduct(name: "currency with a non-ASCII letter", change: { $0["currency"] = "ÜSD" }, rule: .badPrice, field: "currency"),
        BrokenProduct(name: "date with a one-digit month", change: { $0["publicationDate"] = "2026-9-01" }, rule: .badDate, field: "publicationDate"),
        BrokenProduct(name: "lowercase currency", change: { $0["currency"] = "usd" }, rule: .badPrice, field: "currency"),
        BrokenProduct(name: "impossible date", change: { $0["publicationDate"] = "2026-02-30" }, rule: .badDate, field: "publicationDate"),
        BrokenProduct(name: "date in another format", change: { $0["publicationDate"] = "01/09/2026" }, rule: .badDate, field: "publicationDate"),
        BrokenProduct(name: "missing content folder", change: { $0["content"] = ["path": "magazines/nowhere", "format": "tar.gz"] }, rule: .missingContent, field: "content.path"),
        BrokenProduct(name: "content escaping the folder", change: { $0["content"] = ["path": "../Catalog", "format": "zip"] }, rule: .badContent, field: "content.path"),
        BrokenProduct(name: "unknown archive format", change: { $0["content"] = ["path": "magazines/harbor-monthly/issue-01", "format": "rar"] }, rule: .badContent, field: "content.format"),
        BrokenProduct(name: "ID that is not reverse-DNS", change: { $0["id"] = "issue one" }, rule: .badID, field: "id"),
        BrokenProduct(name: "misspelt field", change: { $0["tilte"] = "x" }, rule: .unknownField, field: "tilte"),
        BrokenProduct(name: "issue without a number", change: { $0.removeValue(forKey: "issueNumber") }, rule: .missingField, field: "issueNumber"),
        BrokenProduct(name: "zero credit price", change: { $0["creditPrice"] = 0 }, rule: .badNumber, field: "creditPrice"),
        BrokenProduct(name: "missing title", change: { $0.removeValue(forKey: "title") }, rule: .missingField, field: "title"),
        BrokenProduct(name: "NUL in a title", change: { $0["title"] = "Salt\u{0}and Stars" }, rule: .badMetadata, field: "title"),
        BrokenProduct(name: "right-to-left override in a title", change: { $0["title"] = "Tale\u{202E}4.99" }, rule: .badMetadata, field: "title"),
        BrokenProduct(name: "isolate in a subject", change: { $0["subjects"] = ["Sea", "\u{2067}Fiction"] }, rule: .badMetadata, field: "subjects"),
        BrokenProduct(name: "C1 control in a description", change: { $0["description"] = "A tale\u{85}of the sea" }, rule: .badMetadata, field: "description"),
        BrokenProduct(name: "escape in an author", change: { $0["author"] = "Wren\u{1B}[2J" }, rule: .badMetadata, field: "author"),
        BrokenProduct(name: "noncharacter in a subject", change: { $0["subjects"] = ["Fic\u{FFFF}ion"] }, rule: .badMetadata, field: "subjects"),
        BrokenProduct(name: "NUL in a contributor's name", change: { $0["contributors"] = [["name": "Evil\u{0}Name", "role": "illustrator"]] }, rule: .badMetadata, field: "contributors"),
        BrokenProduct(name: "override in a contributor's name", change: { $0["contributors"] = [["name": "Evil\u{202E}Name", "role": "editor"]] }, rule: .badMetadata, field: "contributors"),
    ]

    static let brokenOffers: [BrokenProduct] = [
        BrokenProduct(name: "unknown offer type", change: { $0["introductoryOffer"] = ["type": "halfOff", "periods": 1] }, rule: .badOffer, field: "introductoryOffer.type"),
        BrokenProduct(name: "trial of days and periods", change: { $0["introductoryOffer"] = ["type": "freeTrial", "days": 7, "periods": 1] }, rule: .badOffer, field: "introductoryOffer.days"),
        BrokenProduct(name: "trial with a price", change: { $0["introductoryOffer"] = ["type": "freeTrial", "days": 7, "price": "0.99"] }, rule: .badOffer, field: "introductoryOffer.price"),
        BrokenProduct(name: "trial of 13 monthly periods", change: { $0["introductoryOffer"] = ["type": "freeTrial", "periods": 13] }, rule: .badOffer, field: "introductoryOffer.periods"),
        BrokenProduct(name: "trial of 400 days", change: { $0["introductoryOffer"] = ["type": "freeTrial", "days": 400] }, rule: .badNumber, field: "introductoryOffer.days"),
        BrokenProduct(name: "pay as you go without a price", change: { $0["introductoryOffer"] = ["type": "payAsYouGo", "periods": 3] }, rule: .missingField, field: "introductoryOffer.price"),
        BrokenProduct(name: "pay as you go at the normal price", change: { $0["introductoryOffer"] = ["type": "payAsYouGo", "price": "2.49", "periods": 3] }, rule: .badOffer, field: "introductoryOffer.price"),
        BrokenProduct(name: "pay up front at six normal periods", change: { $0["introductoryOffer"] = ["type": "payUpFront", "price": "14.94", "periods": 6] }, rule: .badOffer, field: "introductoryOffer.price"),
        BrokenProduct(name: "pay up front in days", change: { $0["introductoryOffer"] = ["type": "payUpFront", "price": "1.00", "days": 30] }, rule: .badOffer, field: "introductoryOffer.days"),
        BrokenProduct(name: "offer price as a number", change: { $0["introductoryOffer"] = ["type": "payAsYouGo", "price": 0.99, "periods": 3] }, rule: .wrongType, field: "introductoryOffer.price"),
        BrokenProduct(name: "misspelt offer field", change: { $0["introductoryOffer"] = ["type": "freeTrial", "dyas": 7] }, rule: .unknownField, field: "introductoryOffer.dyas"),
    ]

    static let brokenPlansAndPrices: [BrokenProduct] = [
        BrokenProduct(name: "a storefront that is no country", change: { $0["prices"] = ["XX": ["price": "2.49", "currency": "EUR"]] }, rule: .badPrice, field: "prices"),
        BrokenProduct(name: "a storefront in lower case", change: { $0["prices"] = ["de": ["price": "2.49", "currency": "EUR"]] }, rule: .badPrice, field: "prices"),
        BrokenProduct(name: "a storefront price that is no amount", change: { $0["prices"] = ["DE": ["price": "two", "currency": "EUR"]] }, rule: .badPrice, field: "prices.DE.price"),
        BrokenProduct(name: "a storefront without a currency", change: { $0["prices"] = ["DE": ["price": "2.49"]] }, rule: .missingField, field: "prices.DE.currency"),
        BrokenProduct(name: "a yen price with a fraction", change: { $0["prices"] = ["JP": ["price": "300.50", "currency": "JPY"]] }, rule: .badPrice, field: "prices.JP.price"),
        BrokenProduct(name: "a misspelt storefront field", change: { $0["prices"] = ["DE": ["price": "2.49", "currency": "EUR", "tax": "7"]] }, rule: .unknownField, field: "prices.DE.tax"),
        BrokenProduct(name: "no storefront at all", change: { $0["prices"] = [String: Any]() }, rule: .badPrice, field: "prices"),
        BrokenProduct(name: "an unknown tax class", change: { $0["taxCategory"] = "food" }, rule: .badPrice, field: "taxCategory"),
        BrokenProduct(name: "a plan level of zero", change: { $0["planLevel"] = 0 }, rule: .badNumber, field: "planLevel"),
    ]

    @Test("a broken storefront price, tax class or plan level is refused, naming the product and the field", arguments: brokenPlansAndPrices)
    func brokenPriceIsRefused(_ broken: BrokenProduct) throws {
        try brokenOfferIsRefused(broken)
    }

    @Test("storefront prices, a tax class and a plan level load; a plan level on a book is refused")
    func pricesLoad() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly {
                products[index]["prices"] = ["DE": ["price": "2.29", "currency": "EUR"], "US": ["price": "2.49", "currency": "USD"]]
                products[index]["taxCategory"] = "standard"
                products[index]["planLevel"] = 2
            }
        }
        let product = try #require(try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load().map(\.product).first { $0.id == SampleStore.harborMonthly })
        #expect(product.price(in: "DE") == Price(amount: "2.29", currency: "EUR") && product.price(in: "FR") == nil && product.price(in: nil) == product.price)
        #expect(product.taxClass == .standard && product.planLevel == 2)
        try store.editCatalog("books.json") { products in products[0]["planLevel"] = 1 }
        let error = try #require(throws: CatalogError.self) { try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load() }
        #expect(error.rule == .kindMismatch && error.field == "planLevel", "\(error)")
    }

    @Test("a broken introductory offer is refused, naming the product and the field", arguments: brokenOffers)
    func brokenOfferIsRefused(_ broken: BrokenProduct) throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly { broken.change(&products[index]) }
        }
        let error = try #require(throws: CatalogError.self) { try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load() }
        #expect(error.rule == broken.rule && error.field == broken.field && error.productID == SampleStore.harborMonthly, "\(error)")
    }

    @Test("an offer loads and reads as a reader reads it; on an issue it is refused")
    func offerLoads() throws {
        let cases: [([String: Any], String)] = [
            (["type": "freeTrial", "days": 14], "14 days free, then 2.49 USD a month"),
            (["type": "freeTrial", "periods": 1], "1 month free, then 2.49 USD a month"),
            (["type": "payAsYouGo", "price": "0.99", "periods": 3], "0.99 USD a month for 3 months, then 2.49 USD a month"),
            (["type": "payUpFront", "price": "9.99", "periods": 12], "9.99 USD for the first 1 year, then 2.49 USD a month"),
        ]
        for (offer, text) in cases {
            let directory = try TemporaryDirectory()
            let store = try SampleStore(in: directory)
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == SampleStore.harborMonthly { products[index]["introductoryOffer"] = offer }
            }
            let loaded = try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load()
            #expect(loaded.map(\.product).first { $0.id == SampleStore.harborMonthly }?.offerText == text)
        }
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in products[0]["introductoryOffer"] = ["type": "freeTrial", "days": 14] }
        let error = try #require(throws: CatalogError.self) { try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load() }
        #expect(error.rule == .kindMismatch && error.field == "introductoryOffer")
    }

    @Test("a code's last day is read through its end in UTC; what is no day is refused, not moved to another")
    func codeExpiry() {
        let end = CodeExpiry.endOfDay("2026-12-31")?.timeIntervalSince1970 ?? 0
        #expect(end < 1_798_761_600 && end > 1_798_761_599.99, "the last millisecond of 31 December 2026 UTC: \(end)")
        for wrong in ["2027-02-30", "2026-13-01", "2026-1-01", "31/12/2026", "", "2026-12-31T00:00:00Z", "99999-01-01"] {
            #expect(CodeExpiry.endOfDay(wrong) == nil, "\(wrong)")
        }
    }

    @Test("prices of the documented shape load", arguments: ["0", "0.5", "10", "4.99", "9999.99"])
    func wellFormedPriceLoads(_ price: String) throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in products[0]["price"] = price }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let loaded = try loader.load()
        #expect(loaded.contains { $0.product.price.amount == price })
    }

    @Test("text a reader sees may hold tabs, line breaks and right-to-left marks")
    func visibleTextLoads() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let title = "\u{5E1}\u{5E4}\u{5E8}\u{200F} Salt"
        try store.editCatalog("books.json") { products in
            products[0]["title"] = title
            products[0]["description"] = "Line one\n\tLine two\r\n"
        }
        let loaded = try CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content).load()
        #expect(loaded.contains { $0.product.title == title })
    }

    @Test("a broken product is refused, naming the file, the product and the field", arguments: brokenProducts)
    func brokenProductIsRefused(_ broken: BrokenProduct) throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in broken.change(&products[0]) }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)

        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == broken.rule)
        #expect(error.file == "Catalog/magazines.json")
        #expect(error.field == broken.field)
        #expect(error.description.contains("Catalog/magazines.json"))
        #expect(error.description.contains("field \"\(broken.field)\""))
        if broken.rule != .badID {
            #expect(error.productID == "com.kiosk.magazines.harbor-monthly.issue-01")
        }
    }

    @Test("content that is a symbolic link (a file, a folder, or a folder on the way) is refused: nothing outside the content folder is packed or served",
          arguments: ["file", "folder", "parent"])
    func symlinkedContent(kind: String) throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let outside = directory.path("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data("the server's own secret\n".utf8).write(to: outside.appendingPathComponent("secret.zip"))
        let books = store.content.appendingPathComponent("books")
        let path: String
        switch kind {
        case "file":
            try FileManager.default.createSymbolicLink(at: books.appendingPathComponent("secret.zip"), withDestinationURL: outside.appendingPathComponent("secret.zip"))
            path = "books/secret.zip"
        case "folder":
            try FileManager.default.createSymbolicLink(at: books.appendingPathComponent("elsewhere"), withDestinationURL: outside)
            path = "books/elsewhere"
        default:
            try FileManager.default.createSymbolicLink(at: store.content.appendingPathComponent("linked"), withDestinationURL: outside)
            path = "linked/secret.zip"
        }
        try store.editCatalog("books.json") { products in
            products[0]["content"] = ["path": path, "format": "zip"]
        }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == .badContent)
        #expect(error.description.contains("is a symbolic link; content must be a real folder or file inside the content folder"), "\(error)")
    }

    @Test("a product ID used twice is refused, naming both files")
    func duplicateID() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("credits.json") { products in
            products[0]["id"] = "com.kiosk.books.lighthouse-keeper"
        }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == .duplicateID)
        #expect(error.productID == "com.kiosk.books.lighthouse-keeper")
        #expect(error.description.contains("Catalog/books.json"))
        #expect(error.description.contains("Catalog/credits.json"))
    }

    @Test("an App Store product ID is read, and one named by two products is refused")
    func appStoreProductId() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("books.json") { products in
            products[0]["appStoreProductId"] = "ios.reader.book"
        }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        #expect(try loader.load().contains { $0.product.appStoreProductId == "ios.reader.book" })
        try store.editCatalog("books.json") { products in
            products[1]["appStoreProductId"] = "ios.reader.book"
        }
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == .duplicateID)
        #expect(error.field == "appStoreProductId")
        #expect(error.description.contains("ios.reader.book"))
    }

    @Test("a file that is not JSON is refused by name")
    func malformedFile() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try Data("{\"products\": [".utf8).write(to: store.catalog.appendingPathComponent("books.json"))
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == .malformedJSON)
        #expect(error.file == "Catalog/books.json")
    }

    @Test("broken JSON is refused with the line and column where it breaks, as an editor counts them")
    func malformedFileSaysWhere() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try Data("{\n  \"products\": [\n    {\"id\": 1 \"title\": \"Å\"}\n  ]\n}\n".utf8).write(to: store.catalog.appendingPathComponent("books.json"))
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.description == "Catalog/books.json: is not valid JSON at line 3, column 14 (invalid value); fix it and reload")
    }

    @Test("a subscription to a series with no issue is refused")
    func subscriptionWithoutIssues() throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("magazines.json") { products in
            products = products.filter { ($0["kind"] as? String) == "subscription" }
        }
        let loader = CatalogLoader(catalogDirectory: store.catalog, contentDirectory: store.content)
        let error = try #require(throws: CatalogError.self) { try loader.load() }
        #expect(error.rule == .unknownSeries)
        #expect(error.field == "series")
    }
}
