import Foundation

/// A product as the server publishes it in `GET /v1/catalog` and as the client caches it.
public struct Product: Codable, Sendable, Equatable, Identifiable {
    public var id: String
    public var kind: ProductKind
    public var title: String
    public var summary: String
    public var price: Price
    /// Credits that buy this product instead of money (books and issues only).
    public var creditPrice: Int?
    /// Credits a credit pack adds to the balance, per unit bought.
    public var credits: Int?
    /// The series an issue belongs to, or the series a subscription covers.
    public var series: String?
    /// The issue number inside its series.
    public var issueNumber: Int?
    /// `yyyy-MM-dd`, for magazine issues.
    public var publicationDate: String?
    /// The length of a subscription period in months.
    public var periodMonths: Int?
    /// Days a subscription keeps its access while a failed renewal is retried (App Store's
    /// billing grace period); nil or 0 is none.
    public var gracePeriodDays: Int?
    /// A subscription's group (issue 65): plans a reader moves between, one running at a time,
    /// and the scope of an introductory offer's once-per-account rule; nil: the series'.
    public var subscriptionGroup: String?
    /// A subscription's level of service in its group, 1 the highest (the App Store's levels):
    /// moving to a higher level is an upgrade, to a lower one a downgrade, to the same a
    /// crossgrade (``PlanChange``). Nil counts as level 1.
    public var planLevel: Int?
    /// Prices per storefront (ISO 3166-1 alpha-2 → price and currency), issue 65: the product is
    /// sold only in these (and at ``price`` to a reader who chose no storefront). Nil: one price everywhere.
    public var prices: [String: Price]?
    /// The tax class in the operator's tax table; nil: by kind (``taxClass``).
    public var taxCategory: TaxCategory?
    /// A subscription's introductory offer: a free trial or a lower price at the start.
    public var introductoryOffer: IntroductoryOffer?
    /// What the client downloads once the product is owned.
    public var content: ContentDescriptor?
    /// The product's ID in the App Store, when an iOS app sells it through In-App Purchase
    /// (its signed transactions name this ID, not Kiosk's).
    public var appStoreProductId: String?
    /// The product's ID in Google Play, when an Android app sells it through Play Billing (its
    /// signed purchases name this ID).
    public var playProductId: String?
    /// False for a product taken off sale (`"forSale": false` in the catalog, or gone from the
    /// catalog files): it is no longer offered or sold, and stays deliverable to its owners.
    /// Nil (left out of the JSON) is on sale.
    public var forSale: Bool?
    /// Who made it, its language, ISBN or ISSN, subjects, description and length (issue 47);
    /// nil when nothing is said (so a catalog without any keeps its ETag).
    public var metadata: PublicationMetadata?
    /// The publisher's cover image, public at `GET /v1/covers/{id}` (issue 47); nil when there is
    /// none, and the store draws a card instead.
    public var cover: CoverImage?

    public init(
        id: String, kind: ProductKind, title: String, summary: String, price: Price,
        creditPrice: Int? = nil, credits: Int? = nil, series: String? = nil, issueNumber: Int? = nil,
        publicationDate: String? = nil, periodMonths: Int? = nil, content: ContentDescriptor? = nil,
        gracePeriodDays: Int? = nil
    ) {
        self.id = id
        self.kind = kind
        self.title = title
        self.summary = summary
        self.price = price
        self.creditPrice = creditPrice
        self.credits = credits
        self.series = series
        self.issueNumber = issueNumber
        self.publicationDate = publicationDate
        self.periodMonths = periodMonths
        self.gracePeriodDays = gracePeriodDays
        self.content = content
    }
}

extension Product {
    /// The group a subscription belongs to: its `subscriptionGroup`, else its series.
    public var group: String { subscriptionGroup ?? series ?? id }

    /// The introductory offer in words beside the normal price ("14 days free, then 2.49 USD a month").
    public var offerText: String? {
        introductoryOffer.map { $0.described(normal: price, periodMonths: periodMonths ?? 1) }
    }
}

/// A price as a decimal string and an ISO 4217 currency code; never a floating-point number.
public struct Price: Codable, Sendable, Equatable, CustomStringConvertible {
    public var amount: String
    public var currency: String

    public init(amount: String, currency: String) {
        self.amount = amount
        self.currency = currency
    }

    public var description: String { "\(amount) \(currency)" }

    /// The largest price the catalog accepts (10,000.00), and the most credits a product may add
    /// or cost: with at most 100 units a purchase, no sum of them can overflow.
    public static let maxCents = 1_000_000
    public static let maxCredits = 1_000_000

    /// The currencies (ISO 4217) whose amounts have no minor unit: a yen is not divided.
    public static let wholeUnitCurrencies: Set<String> = [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF",
    ]

    /// Hundredths of `currency` (what Kiosk stores: ``cents(_:)``) as a person reads the amount:
    /// `4.99 USD`, `-7.99 EUR`, `500 JPY` (a currency without a minor unit shows none).
    public static func shown(cents: Int, _ currency: String) -> String {
        let sign = cents < 0 ? "-" : ""
        let value = abs(cents)
        if wholeUnitCurrencies.contains(currency) { return "\(sign)\(value / 100) \(currency)" }
        return "\(sign)\(value / 100).\(String(format: "%02d", value % 100)) \(currency)"
    }

    /// "4.99" → 499; nil when the text is not a decimal amount or too long to be a price.
    public static func cents(_ amount: String) -> Int? {
        let parts = amount.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts[0].count <= 12, let whole = Int(parts[0]) else { return nil }
        var fraction = 0
        if parts.count == 2 {
            guard (1...2).contains(parts[1].count), let value = Int(parts[1]) else { return nil }
            fraction = parts[1].count == 1 ? value * 10 : value
        }
        return whole * 100 + fraction
    }
}

/// A product's cover as the store serves it: its bytes' SHA-256 (its strong ETag), media type and size.
public struct CoverImage: Codable, Sendable, Equatable {
    public var sha256: String
    /// `image/jpeg`, `image/png`, `image/gif` or `image/webp`.
    public var type: String
    public var size: Int64

    public init(sha256: String, type: String, size: Int64) {
        self.sha256 = sha256
        self.type = type
        self.size = size
    }

    /// The largest cover the store serves: a cover sells the book in a list, it is not a poster.
    public static let maxBytes = 2 << 20

    /// The media type `bytes` begin as (JPEG, PNG, GIF, WebP), or nil for anything else.
    public static func mediaType(of bytes: Data) -> String? {
        let head = [UInt8](bytes.prefix(12))
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if head.starts(with: Array("GIF87a".utf8)) || head.starts(with: Array("GIF89a".utf8)) { return "image/gif" }
        if head.count == 12, head.starts(with: Array("RIFF".utf8)), Array(head[8..<12]) == Array("WEBP".utf8) { return "image/webp" }
        return nil
    }

    /// The file name extension of a media type ``mediaType(of:)`` gives.
    public static func fileExtension(of type: String) -> String {
        switch type {
        case "image/jpeg": "jpg"
        case "image/png": "png"
        case "image/gif": "gif"
        default: "webp"
        }
    }
}

/// The downloadable content of a product: what the client checks the bytes against.
public struct ContentDescriptor: Codable, Sendable, Equatable {
    public var format: ArchiveFormat
    public var size: Int64
    /// Lowercase hex SHA-256 of the archive; also the content's strong ETag.
    public var sha256: String
    /// A short name for this content version; changes whenever the bytes change.
    public var version: String
    /// Lowercase hex SHA-256 of the version's manifest (`GET /v1/content/{id}/manifest`), which
    /// lets an update fetch only the entries that changed; absent from older servers.
    public var manifestSha256: String?
    /// For a publication delivered as a file (EPUB, PDF, CBZ): its name in the library,
    /// `Library/<id>/<fileName>` (``PublicationFileName``).
    public var fileName: String?

    public init(format: ArchiveFormat, size: Int64, sha256: String, version: String, manifestSha256: String? = nil, fileName: String? = nil) {
        self.format = format
        self.size = size
        self.sha256 = sha256
        self.version = version
        self.manifestSha256 = manifestSha256
        self.fileName = fileName
    }
}
