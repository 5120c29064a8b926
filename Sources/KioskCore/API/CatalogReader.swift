import Foundation

/// Reads a catalog document (`GET /v1/catalog`, a published `catalog.json`) one product at a
/// time, straight from its bytes.
///
/// Why not `JSONDecoder`: on a catalog of 100,000 products Foundation's decoder spends about 12 µs
/// a product in generic containers (1.2 s, most of a server start and a third of a client sync),
/// and it can only hand back the whole array. This reader knows the one shape it reads, so it
/// costs a fraction of that, holds one product at a time, and gives each product's bytes as sent
/// (the client caches those instead of encoding each product again to compare it).
///
/// It is strict JSON (RFC 8259): UTF-8 checked, escapes and surrogate pairs decoded, control
/// characters refused, nesting bounded, nothing but white space after the document. Keys it does
/// not know are skipped, as `JSONDecoder` does, so a newer server's fields do not break an older
/// client; a `null` optional is absent. Whole numbers only where ``Product`` has an integer.
/// `CatalogReaderTests` checks it against `JSONDecoder` on the same bytes.
///
/// **Performance layer** (the catalog's read path, with ``JSONCursor``): the figures it answers to
/// are in ``JSONCursor``'s comment and docs/benchmarks.md.
public enum CatalogReader {
    /// Every product of the document, in the order sent.
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public static func products(in document: Data) throws -> [Product] {
        var products: [Product] = []
        try forEachProduct(in: document) { product, _ in products.append(product) }
        return products
    }

    /// One product object on its own (as ``forEachProduct(in:_:)`` hands its bytes out).
    /// - Throws: ``CatalogReadError`` naming the first place the object is wrong.
    public static func product(from object: Data) throws -> Product {
        try object.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var reader = JSONCursor(bytes)
            let product = try reader.product(at: "the product")
            try reader.end()
            return product
        }
    }

    /// Calls `body` with each product of the document, in the order sent, and the bytes of its
    /// JSON object exactly as they appear in the document (valid only during the call: a caller
    /// that only wants the products pays no copy). An error `body` throws ends the
    /// reading and is rethrown as it is. (A document arriving in pieces: ``CatalogStream``.)
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public static func forEachProduct(in document: Data, _ body: (Product, UnsafeRawBufferPointer) throws -> Void) throws {
        var stream = CatalogStream()
        try document.withUnsafeBytes { try stream.read($0, body) }
        try stream.finish()
    }
}

/// Where a catalog document is wrong and how: `products[12].price.amount: expected a string`.
public struct CatalogReadError: Error, Sendable, Equatable, CustomStringConvertible {
    public var place: String
    public var problem: String
    public var description: String { "\(place): \(problem)" }
}

// MARK: Products

extension JSONCursor {
    /// One product object; the field names and types are those `Product`'s `Codable` uses.
    mutating func product(at place: @autoclosure () -> String) throws -> Product {
        var id, kind, title, summary, series, publicationDate, appStoreProductId, playProductId, subscriptionGroup: String?
        var introductoryOffer: IntroductoryOffer?
        var price: Price?
        var prices: [String: Price]?
        var taxCategory: String?
        var creditPrice, credits, issueNumber, periodMonths, gracePeriodDays, planLevel: Int?
        var content: ContentDescriptor?
        var forSale: Bool?
        var metadata: PublicationMetadata?
        var cover: CoverImage?
        try object(at: place()) { key, reader in
            switch key {
            case "id": id = try reader.string(at: "\(place()).id")
            case "kind": kind = try reader.string(at: "\(place()).kind")
            case "title": title = try reader.string(at: "\(place()).title")
            case "summary": summary = try reader.string(at: "\(place()).summary")
            case "price": price = try reader.price(at: "\(place()).price")
            case "creditPrice": creditPrice = try reader.optional { try $0.integer(at: "\(place()).creditPrice") }
            case "credits": credits = try reader.optional { try $0.integer(at: "\(place()).credits") }
            case "series": series = try reader.optional { try $0.string(at: "\(place()).series") }
            case "issueNumber": issueNumber = try reader.optional { try $0.integer(at: "\(place()).issueNumber") }
            case "publicationDate": publicationDate = try reader.optional { try $0.string(at: "\(place()).publicationDate") }
            case "periodMonths": periodMonths = try reader.optional { try $0.integer(at: "\(place()).periodMonths") }
            case "gracePeriodDays": gracePeriodDays = try reader.optional { try $0.integer(at: "\(place()).gracePeriodDays") }
            case "content": content = try reader.optional { try $0.content(at: "\(place()).content") }
            case "appStoreProductId": appStoreProductId = try reader.optional { try $0.string(at: "\(place()).appStoreProductId") }
            case "playProductId": playProductId = try reader.optional { try $0.string(at: "\(place()).playProductId") }
            case "forSale": forSale = try reader.optional { try $0.boolean(at: "\(place()).forSale") }
            case "metadata": metadata = try reader.optional { try $0.metadata(at: "\(place()).metadata") }
            case "cover": cover = try reader.optional { try $0.cover(at: "\(place()).cover") }
            case "subscriptionGroup": subscriptionGroup = try reader.optional { try $0.string(at: "\(place()).subscriptionGroup") }
            case "introductoryOffer": introductoryOffer = try reader.optional { try $0.introductoryOffer(at: "\(place()).introductoryOffer") }
            case "planLevel": planLevel = try reader.optional { try $0.integer(at: "\(place()).planLevel") }
            case "taxCategory": taxCategory = try reader.optional { try $0.string(at: "\(place()).taxCategory") }
            case "prices":
                prices = try reader.optional { cursor in
                    var byStorefront: [String: Price] = [:]
                    try cursor.object(at: "\(place()).prices") { storefront, value in
                        byStorefront[storefront] = try value.price(at: "\(place()).prices.\(storefront)")
                    }
                    return byStorefront
                }
            default: try reader.skipValue()
            }
        }
        guard let id else { throw CatalogReadError(place: place(), problem: "has no \"id\"") }
        func at() -> String { "\(place()) (\(id))" }
        guard let kind else { throw CatalogReadError(place: at(), problem: "has no \"kind\"") }
        guard let productKind = ProductKind(rawValue: kind) else {
            throw CatalogReadError(place: at(), problem: "has kind \"\(kind)\", which is not consumable, nonConsumable or subscription")
        }
        guard let title else { throw CatalogReadError(place: at(), problem: "has no \"title\"") }
        guard let summary else { throw CatalogReadError(place: at(), problem: "has no \"summary\"") }
        guard let price else { throw CatalogReadError(place: at(), problem: "has no \"price\"") }
        var product = Product(
            id: id, kind: productKind, title: title, summary: summary, price: price, creditPrice: creditPrice, credits: credits,
            series: series, issueNumber: issueNumber, publicationDate: publicationDate, periodMonths: periodMonths, content: content,
            gracePeriodDays: gracePeriodDays)
        product.appStoreProductId = appStoreProductId
        product.playProductId = playProductId
        product.forSale = forSale
        product.metadata = metadata
        product.cover = cover
        product.subscriptionGroup = subscriptionGroup
        product.introductoryOffer = introductoryOffer
        product.planLevel = planLevel
        product.prices = prices
        // A class this version does not know (a later store's) reads as none: the client never taxes.
        product.taxCategory = taxCategory.flatMap(TaxCategory.init(rawValue:))
        return product
    }

    /// A subscription's ``IntroductoryOffer``.
    mutating func introductoryOffer(at place: @autoclosure () -> String) throws -> IntroductoryOffer {
        var type, price: String?
        var days, periods: Int?
        try object(at: place()) { key, reader in
            switch key {
            case "type": type = try reader.string(at: "\(place()).type")
            case "days": days = try reader.optional { try $0.integer(at: "\(place()).days") }
            case "periods": periods = try reader.optional { try $0.integer(at: "\(place()).periods") }
            case "price": price = try reader.optional { try $0.string(at: "\(place()).price") }
            default: try reader.skipValue()
            }
        }
        guard let type, let kind = IntroductoryOffer.Kind(rawValue: type) else {
            throw CatalogReadError(place: place(), problem: "has no \"type\" of freeTrial, payAsYouGo or payUpFront")
        }
        return IntroductoryOffer(type: kind, days: days, periods: periods, price: price)
    }

    /// A product's ``CoverImage``.
    mutating func cover(at place: @autoclosure () -> String) throws -> CoverImage {
        var sha256, type: String?
        var size: Int?
        try object(at: place()) { key, reader in
            switch key {
            case "sha256": sha256 = try reader.string(at: "\(place()).sha256")
            case "type": type = try reader.string(at: "\(place()).type")
            case "size": size = try reader.integer(at: "\(place()).size")
            default: try reader.skipValue()
            }
        }
        guard let sha256, sha256.count == 64, sha256.allSatisfy(\.isHexDigit), let type, let size else {
            throw CatalogReadError(place: place(), problem: "needs \"sha256\", \"type\" and \"size\"")
        }
        return CoverImage(sha256: sha256, type: type, size: Int64(size))
    }

    /// A product's ``PublicationMetadata``.
    mutating func metadata(at place: @autoclosure () -> String) throws -> PublicationMetadata {
        var metadata = PublicationMetadata()
        try object(at: place()) { key, reader in
            switch key {
            case "contributors":
                var contributors: [PublicationMetadata.Contributor] = []
                try reader.array(at: "\(place()).contributors") { element in
                    var name = "", role = "author"
                    try element.object(at: "\(place()).contributors[]") { field, value in
                        switch field {
                        case "name": name = try value.string(at: "\(place()).contributors[].name")
                        case "role": role = try value.string(at: "\(place()).contributors[].role")
                        default: try value.skipValue()
                        }
                    }
                    contributors.append(PublicationMetadata.Contributor(name: name, role: role))
                }
                metadata.contributors = contributors
            case "publisher": metadata.publisher = try reader.optional { try $0.string(at: "\(place()).publisher") }
            case "language": metadata.language = try reader.optional { try $0.string(at: "\(place()).language") }
            case "description": metadata.description = try reader.optional { try $0.string(at: "\(place()).description") }
            case "pageCount": metadata.pageCount = try reader.optional { try $0.integer(at: "\(place()).pageCount") }
            case "identifiers", "subjects":
                var values: [String] = []
                try reader.array(at: "\(place()).\(key)") { values.append(try $0.string(at: "\(place()).\(key)[]")) }
                if key == "identifiers" { metadata.identifiers = values } else { metadata.subjects = values }
            default: try reader.skipValue()
            }
        }
        return metadata
    }

    mutating func price(at place: @autoclosure () -> String) throws -> Price {
        var amount, currency: String?
        try object(at: place()) { key, reader in
            switch key {
            case "amount": amount = try reader.string(at: "\(place()).amount")
            case "currency": currency = try reader.string(at: "\(place()).currency")
            default: try reader.skipValue()
            }
        }
        guard let amount, let currency else {
            throw CatalogReadError(place: place(), problem: "needs both \"amount\" and \"currency\"")
        }
        return Price(amount: amount, currency: currency)
    }

    mutating func content(at place: @autoclosure () -> String) throws -> ContentDescriptor {
        var format, sha256, version, manifestSha256, fileName: String?
        var size: Int?
        try object(at: place()) { key, reader in
            switch key {
            case "format": format = try reader.string(at: "\(place()).format")
            case "size": size = try reader.integer(at: "\(place()).size")
            case "sha256": sha256 = try reader.string(at: "\(place()).sha256")
            case "version": version = try reader.string(at: "\(place()).version")
            case "manifestSha256": manifestSha256 = try reader.optional { try $0.string(at: "\(place()).manifestSha256") }
            case "fileName": fileName = try reader.optional { try $0.string(at: "\(place()).fileName") }
            default: try reader.skipValue()
            }
        }
        guard let format, let size, let sha256, let version else {
            throw CatalogReadError(place: place(), problem: "needs \"format\", \"size\", \"sha256\" and \"version\"")
        }
        guard let archiveFormat = ArchiveFormat(rawValue: format) else {
            throw CatalogReadError(place: place(), problem: "has format \"\(format)\", which is not one of \(ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        // A file publication's name becomes a path in the reader's library: one safe name, always.
        if archiveFormat.deliveredAsFile {
            guard let fileName, PublicationFileName.isSafe(fileName) else {
                throw CatalogReadError(place: place(), problem: "is a \(format) delivered as a file without a safe \"fileName\"")
            }
        }
        return ContentDescriptor(format: archiveFormat, size: Int64(size), sha256: sha256, version: version, manifestSha256: manifestSha256,
                                 fileName: archiveFormat.deliveredAsFile ? fileName : nil)
    }
}
