import Foundation
import KioskCore
import Testing

/// The catalog reader against Foundation's `JSONDecoder` on the same bytes: what one reads the
/// other reads the same, and what is not a catalog the reader refuses with a place and a reason.
@Suite("Catalog document reader")
struct CatalogReaderTests {
    /// A product with every field set, so that a field added to `Product` and not to the reader shows.
    static let everyField = {
        var product = Product(
            id: "com.example.mag.issue-7", kind: .nonConsumable, title: "Issue \"7\" / Été 😀", summary: "Line one\nline two\ttab \\ \u{1}",
            price: Price(amount: "4.99", currency: "EUR"), creditPrice: 3, credits: 0, series: "com.example.mag", issueNumber: 7,
            publicationDate: "2026-11-01", periodMonths: 1,
            content: ContentDescriptor(format: .tarGz, size: 8_394_974, sha256: String(repeating: "ab", count: 32), version: "v2"),
            gracePeriodDays: 16)
        product.appStoreProductId = "ios.example.mag.issue_7"
        product.playProductId = "android.example.mag.issue_7"
        product.forSale = false
        product.metadata = PublicationMetadata(
            contributors: [.init(name: "Ana \"Ré\" Q", role: "author"), .init(name: "Bo", role: "illustrator")], publisher: "Mag Press",
            language: "fr-CA", identifiers: ["urn:issn:0317-8471"], subjects: ["Boats", "Été"], description: "Long\ntext", pageCount: 96)
        product.cover = CoverImage(sha256: String(repeating: "cd", count: 32), type: "image/jpeg", size: 48_213)
        product.subscriptionGroup = "com.example.mag.plans"
        product.introductoryOffer = IntroductoryOffer(type: .payAsYouGo, days: 7, periods: 3, price: "0.99")
        product.planLevel = 2
        product.prices = ["DE": Price(amount: "4.49", currency: "EUR"), "US": Price(amount: "4.99", currency: "USD")]
        product.taxCategory = .periodical
        return product
    }()

    @Test("every field of Product is read (the sample leaves none nil)")
    func everyFieldIsRead() throws {
        #expect(Mirror(reflecting: Self.everyField).children.allSatisfy { child in
            guard let optional = child.value as? any OptionalProtocol else { return true }
            return !optional.isNil
        })
        let document = try JSONEncoder.kiosk.encode(CatalogDocument(products: [Self.everyField]))
        #expect(try CatalogReader.products(in: document) == [Self.everyField])
    }

    @Test("2,000 generated products read as JSONDecoder reads them, each with its own bytes")
    func generatedProducts() throws {
        var random = SeededGenerator(seed: 13)
        let products = (0..<2_000).map { index in Self.product(index, using: &random) }
        let document = try JSONEncoder.kiosk.encode(CatalogDocument(products: products))
        let decoded = try JSONDecoder.kiosk.decode(CatalogDocument.self, from: document).products
        var read: [Product] = []
        try CatalogReader.forEachProduct(in: document) { product, bytes in
            read.append(product)
            // The slice is the product's object as sent, and sorted keys make it its own encoding.
            #expect(Data(bytes) == (try? JSONEncoder.kiosk.encode(product)))
        }
        #expect(read == decoded)
        #expect(read.count == 2_000)
    }

    @Test("read in pieces of any size, a document gives the same products and bytes as read whole")
    func readInPieces() throws {
        var random = SeededGenerator(seed: 29)
        let products = (0..<500).map { index in Self.product(index, using: &random) }
        let document = try JSONEncoder.kiosk.encode(CatalogDocument(products: products))
        var whole: [(Product, Data)] = []
        try CatalogReader.forEachProduct(in: document) { whole.append(($0, Data($1))) }
        for pieceSizes in [[1], [2], [7], [4096], (0..<64).map { _ in Int(random.next() % 300) + 1 }] {
            let read = try Self.readInPieces(document, sizes: pieceSizes)
            #expect(read.count == whole.count)
            #expect(zip(read, whole).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }, "pieces of \(pieceSizes.prefix(3))…")
        }
    }

    /// Feeds `document` to a ``CatalogStream`` in pieces of the given sizes, in turn.
    static func readInPieces(_ document: Data, sizes: [Int]) throws -> [(Product, Data)] {
        var stream = CatalogStream()
        var read: [(Product, Data)] = []
        var start = document.startIndex
        var turn = 0
        while start < document.endIndex {
            let end = min(start + sizes[turn % sizes.count], document.endIndex)
            try document[start..<end].withUnsafeBytes { try stream.read($0) { read.append(($0, Data($1))) } }
            start = end
            turn += 1
        }
        try stream.finish()
        return read
    }

    @Test("escapes, surrogate pairs, white space, nulls and unknown keys read as JSONDecoder reads them")
    func handWrittenDocument() throws {
        let document = Data(#"""
            {"version": 3, "products" : [
              {"id":"a.b.c","kind":"consumable","title":"caf\u00e9 \ud83d\ude00 \"q\" \/ \\","summary":"tab\there",
               "price":{"amount":"1.99","currency":"USD","note":{"deep":[1,-2.5e-3,true,false,null,"x",{}]}},
               "credits":5,"series":null,"creditPrice":null,"content":null,"future":[[[]]]},
              {"kind":"subscription","id":"a.b.sub","title":"","summary":"","price":{"currency":"EUR","amount":"0"},"periodMonths":12}
            ], "extra": {"a": "b"}}
            """#.utf8)
        let read = try CatalogReader.products(in: document)
        #expect(read == (try JSONDecoder.kiosk.decode(CatalogDocument.self, from: document)).products)
        #expect(try Self.readInPieces(document, sizes: [1]).map(\.0) == read)
        #expect(read.first?.title == "café 😀 \"q\" / \\")
        #expect(read.last?.periodMonths == 12)
    }

    @Test("an empty catalog has no products")
    func emptyCatalog() throws {
        #expect(try CatalogReader.products(in: Data(#"{"products":[]}"#.utf8)).isEmpty)
    }

    struct Broken: Sendable, CustomTestStringConvertible {
        var name: String
        var document: String
        /// Words the error must contain.
        var says: String
        var testDescription: String { name }
    }

    static let valid = #"{"id":"a.b","kind":"consumable","title":"t","summary":"s","price":{"amount":"1","currency":"USD"}}"#

    static let broken: [Broken] = [
        Broken(name: "not JSON", document: "<html>", says: "expected an object"),
        Broken(name: "empty", document: "", says: "found the end of the document"),
        Broken(name: "cut short", document: #"{"products":[\#(valid)"#, says: "comma or ]"),
        Broken(name: "cut in a string", document: #"{"products":[{"id":"a.b"#, says: "never ends"),
        Broken(name: "bytes after the end", document: #"{"products":[]} x"#, says: "bytes after its end"),
        Broken(name: "no products", document: #"{"items":[]}"#, says: "no \"products\""),
        Broken(name: "products not an array", document: #"{"products":{}}"#, says: "expected an array"),
        Broken(name: "missing id", document: #"{"products":[{"kind":"consumable"}]}"#, says: "products[0]: has no \"id\""),
        Broken(name: "unknown kind", document: #"{"products":[\#(valid.replacingOccurrences(of: "consumable", with: "rental"))]}"#, says: "kind \"rental\""),
        Broken(name: "price without currency", document: #"{"products":[\#(valid.replacingOccurrences(of: #","currency":"USD""#, with: ""))]}"#, says: "products[0].price"),
        Broken(name: "credits as a fraction", document: #"{"products":[\#(valid.dropLast()),"credits":1.5}]}"#, says: "whole number"),
        Broken(name: "credits as a string", document: #"{"products":[\#(valid.dropLast()),"credits":"5"}]}"#, says: "products[0].credits: expected a whole number"),
        Broken(name: "credits too large", document: #"{"products":[\#(valid.dropLast()),"credits":99999999999999999999}]}"#, says: "too large"),
        Broken(name: "number with a leading zero", document: #"{"products":[\#(valid.dropLast()),"credits":05}]}"#, says: "leading zero"),
        Broken(name: "title a number", document: #"{"products":[\#(valid.replacingOccurrences(of: #""t""#, with: "7"))]}"#, says: "products[0].title: expected a string"),
        Broken(name: "control character in a string", document: "{\"products\":[{\"id\":\"a\u{1}b\"}]}", says: "control character"),
        Broken(name: "unknown escape", document: #"{"products":[{"id":"a\qb"}]}"#, says: "unknown escape"),
        Broken(name: "short \\u escape", document: #"{"products":[{"id":"a\u12"}]}"#, says: "four hex digits"),
        Broken(name: "lone high surrogate", document: #"{"products":[{"id":"a\ud83dx"}]}"#, says: "lone surrogate"),
        Broken(name: "lone low surrogate", document: #"{"products":[{"id":"a\ude00"}]}"#, says: "lone surrogate"),
        Broken(name: "unknown format", document: #"{"products":[\#(valid.dropLast()),"content":{"format":"rar","size":1,"sha256":"x","version":"v"}}]}"#, says: "format \"rar\""),
        Broken(name: "trailing comma", document: #"{"products":[\#(valid),]}"#, says: "expected an object"),
        Broken(name: "bare word", document: #"{"products":[\#(valid.dropLast()),"x":nope}]}"#, says: "not JSON"),
        Broken(name: "a product closed by ]", document: #"{"products":[{"id":"a"]]}"#, says: "products[0]: has a ] that does not close its {"),
        Broken(name: "the array closed by }", document: #"{"products":[\#(valid)}}"#, says: "products: expected a comma or ]"),
        Broken(name: "two objects without a comma", document: #"{"products":[\#(valid) \#(valid)]}"#, says: "products: expected a comma or ]"),
        Broken(name: "a leading comma", document: #"{"products":[,\#(valid)]}"#, says: "products[0]: expected an object"),
        Broken(name: "a string for a product", document: #"{"products":["a.b"]}"#, says: "products[0]: expected an object"),
        Broken(name: "a second document", document: #"{"products":[]}{"products":[]}"#, says: "bytes after its end"),
        Broken(name: "an array for a document", document: #"[{"products":[]}]"#, says: "expected an object"),
        Broken(name: "cut after the array", document: #"{"products":[\#(valid)]"#, says: "expected a comma or }"),
        Broken(name: "a product nested 100 deep", document: #"{"products":[{"x":\#(String(repeating: "[", count: 100))\#(String(repeating: "]", count: 100))}]}"#, says: "products[0]: nests deeper than 64"),
        Broken(name: "nested 100 deep in an unknown key", document: #"{"products":[],"x":\#(String(repeating: "[", count: 100))\#(String(repeating: "]", count: 100))}"#, says: "deeper than 64"),
    ]

    @Test("a broken document is refused with the place and the reason", arguments: broken)
    func brokenDocument(_ case: Broken) throws {
        let document = Data(`case`.document.utf8)
        let error = #expect(throws: CatalogReadError.self) { try CatalogReader.products(in: document) }
        #expect(error?.description.contains(`case`.says) == true, "\(error.map { "\($0)" } ?? "no error")")
        // Byte by byte, as a slow server sends it: the same error.
        let inPieces = #expect(throws: CatalogReadError.self) { try Self.readInPieces(document, sizes: [1]) }
        #expect(inPieces == error)
    }

    @Test("a string that is not UTF-8 is refused, as JSONDecoder refuses it")
    func invalidUTF8() throws {
        var document = Data(#"{"products":[{"id":"a"#.utf8)
        document.append(contentsOf: [0xC3, 0x28])
        document.append(contentsOf: Data(#"","kind":"consumable","title":"t","summary":"s","price":{"amount":"1","currency":"USD"}}]}"#.utf8))
        #expect(throws: (any Error).self) { try JSONDecoder.kiosk.decode(CatalogDocument.self, from: document) }
        let error = #expect(throws: CatalogReadError.self) { try CatalogReader.products(in: document) }
        #expect(error?.description.contains("not UTF-8") == true)
    }

    @Test("an error thrown by the caller ends the reading and comes back as it is")
    func callerError() throws {
        struct Stop: Error {}
        let document = try JSONEncoder.kiosk.encode(CatalogDocument(products: [Self.everyField, Self.everyField]))
        var seen = 0
        #expect(throws: Stop.self) {
            try CatalogReader.forEachProduct(in: document) { _, _ in
                seen += 1
                throw Stop()
            }
        }
        #expect(seen == 1)
    }

    // MARK: Generating products

    static func product(_ index: Int, using random: inout SeededGenerator) -> Product {
        let kind = ProductKind.allCases[Int(random.next() % 3)]
        let words = ["tea", "Été", "\"quoted\"", "a lone \" quote", "]}, {\"x\": [", "back\\slash", "a/b", "tab\t", "new\nline", "日本語", "😀", "\u{7}", ""]
        func text() -> String { (0..<Int(random.next() % 5)).map { _ in words[Int(random.next() % UInt64(words.count))] }.joined(separator: " ") }
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { random.next() % 2 == 0 ? value() : nil }
        return Product(
            id: "com.example.p\(index)", kind: kind, title: text(), summary: text(),
            price: Price(amount: "\(random.next() % 10_000).\(random.next() % 90 + 10)", currency: ["USD", "EUR", "JPY"][Int(random.next() % 3)]),
            creditPrice: maybe(Int(random.next() % 100)), credits: maybe(Int(random.next() % 1_000)), series: maybe(text()),
            issueNumber: maybe(Int(random.next() % 500)), publicationDate: maybe("2026-0\(random.next() % 9 + 1)-1\(random.next() % 9)"),
            periodMonths: maybe(Int(random.next() % 12) + 1),
            content: maybe({
                let format = ArchiveFormat.allCases[Int(random.next() % UInt64(ArchiveFormat.allCases.count))]
                // A publication delivered as a file names its file (the reader refuses one that does not).
                return ContentDescriptor(
                    format: format, size: Int64(random.next() % (1 << 40)),
                    sha256: String(repeating: "0123456789abcdef", count: 4), version: "v\(random.next() % 100)",
                    fileName: format.deliveredAsFile ? "Book \(index).\(format.fileExtension)" : nil)
            }()))
    }
}

/// A small deterministic generator (SplitMix64), so a failure repeats.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private protocol OptionalProtocol { var isNil: Bool { get } }
extension Optional: OptionalProtocol { var isNil: Bool { self == nil } }
