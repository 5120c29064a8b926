import Foundation

/// `POST /v1/admin/codes`: a batch of one-time codes (`count`), or one custom code (`code`) that
/// up to `limit` accounts may redeem; each gives `productId` free (a book, an issue, or one period
/// of a subscription).
public struct AdminCodesRequest: Codable, Sendable, Equatable {
    public var productId: String
    /// How many one-time codes to make (1 to 10,000); nil for a custom code.
    public var count: Int?
    /// A custom code's text (4 to 32 letters and digits), chosen by the operator.
    public var code: String?
    /// How many accounts may redeem a custom code (1 to 1,000,000); a one-time code's is 1.
    public var limit: Int?
    /// The last instant a code may be redeemed; nil: no end.
    public var expiresAt: Date?
    /// What each code gives; nil: the product free.
    public var benefit: CodeBenefit?

    public init(productId: String, count: Int? = nil, code: String? = nil, limit: Int? = nil, expiresAt: Date? = nil, benefit: CodeBenefit? = nil) {
        (self.productId, self.count, self.code, self.limit, self.expiresAt, self.benefit) = (productId, count, code, limit, expiresAt, benefit)
    }
}

/// What an offer code gives (App Store offer codes, Play promo codes, Stripe promotion codes):
/// the product free (redeemed on its own), or, used when buying it, a subscription's
/// introductory offer (to a reader who had one already too), a percentage or an amount off the
/// price (a subscription's first period).
public enum CodeBenefit: Codable, Sendable, Equatable, CustomStringConvertible {
    case free
    case introductoryOffer
    /// 1 to 99 percent off.
    case percentOff(Int)
    /// Cents (the currency's minor unit) off, less than the price.
    case amountOff(Int)

    /// The kind as stored and sent (`free`, `introductoryOffer`, `percentOff`, `amountOff`), with its value.
    public var kind: String {
        switch self {
        case .free: "free"
        case .introductoryOffer: "introductoryOffer"
        case .percentOff: "percentOff"
        case .amountOff: "amountOff"
        }
    }

    public var value: Int? {
        switch self {
        case .percentOff(let value), .amountOff(let value): value
        case .free, .introductoryOffer: nil
        }
    }

    /// The benefit a stored kind and value name; nil for one this version does not know.
    public init?(kind: String, value: Int?) {
        switch (kind, value) {
        case ("free", _): self = .free
        case ("introductoryOffer", _): self = .introductoryOffer
        case ("percentOff", let value?): self = .percentOff(value)
        case ("amountOff", let value?): self = .amountOff(value)
        default: return nil
        }
    }

    /// Whether it is used when buying (a price is still paid, or an offer taken), not redeemed alone.
    public var isUsedWhenBuying: Bool { self != .free }

    /// The price after the benefit, in cents: a percentage off rounded to the nearest cent (half
    /// up), an amount off never below zero. The product's own price for `free` and `introductoryOffer`
    /// (the offer's terms decide those).
    public func price(from cents: Int) -> Int {
        switch self {
        case .percentOff(let percent): cents - (cents * percent + 50) / 100
        case .amountOff(let off): max(0, cents - off)
        case .free, .introductoryOffer: cents
        }
    }

    /// "20% off", "1.00 USD off", "the introductory offer", "free".
    public func described(currency: String) -> String {
        switch self {
        case .free: "free"
        case .introductoryOffer: "the introductory offer"
        case .percentOff(let percent): "\(percent)% off"
        case .amountOff(let cents): "\(Price.shown(cents: cents, currency)) off"
        }
    }

    public var description: String { described(currency: "") }

    private enum CodingKeys: String, CodingKey { case kind, value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let kind = try container.decode(String.self, forKey: .kind)
        let value = try container.decodeIfPresent(Int.self, forKey: .value)
        guard let benefit = CodeBenefit(kind: kind, value: value) else {
            throw DecodingError.dataCorruptedError(forKey: .kind, in: container,
                debugDescription: "benefit must be {kind: free | introductoryOffer | percentOff with value 1-99 | amountOff with value in cents}, not \(kind)")
        }
        self = benefit
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        try container.encodeIfPresent(value, forKey: .value)
    }
}

/// The answer to `POST /v1/admin/codes`: the codes themselves, this once (the store keeps only
/// their hashes), and the batch they are listed and revoked by.
public struct AdminCodesCreated: Codable, Sendable, Equatable {
    public var batch: String
    public var productId: String
    public var codes: [String]
    public var limit: Int
    public var expiresAt: Date?
    public var benefit: CodeBenefit?

    public init(batch: String, productId: String, codes: [String], limit: Int, expiresAt: Date?, benefit: CodeBenefit? = nil) {
        (self.batch, self.productId, self.codes, self.limit, self.expiresAt, self.benefit) = (batch, productId, codes, limit, expiresAt, benefit)
    }
}

/// One batch of codes, as `GET /v1/admin/codes` lists them (never the codes).
public struct AdminCodeBatchRow: Codable, Sendable, Equatable {
    public var batch: String
    public var productId: String
    /// `oneTime` (a batch, each code once) or `custom` (one code, up to its limit).
    public var kind: String
    public var codes: Int
    /// Redemptions allowed in all, and made.
    public var limit: Int
    public var redeemed: Int
    public var expiresAt: Date?
    public var revokedAt: Date?
    public var createdAt: Date
    /// What each code gives; absent from stores before benefits (free).
    public var benefit: CodeBenefit?

    public init(batch: String, productId: String, kind: String, codes: Int, limit: Int, redeemed: Int, expiresAt: Date?, revokedAt: Date?, createdAt: Date,
                benefit: CodeBenefit? = nil) {
        (self.batch, self.productId, self.kind, self.codes, self.limit, self.redeemed) = (batch, productId, kind, codes, limit, redeemed)
        (self.expiresAt, self.revokedAt, self.createdAt, self.benefit) = (expiresAt, revokedAt, createdAt, benefit)
    }
}

/// `POST /v1/codes/redeem`.
public struct RedeemCodeRequest: Codable, Sendable, Equatable {
    public var code: String

    public init(code: String) { self.code = code }
}

/// The answer to a redeemed code: the product it gave and its transaction, signed as any purchase's.
public struct RedeemCodeResponse: Codable, Sendable, Equatable {
    public var productId: String
    public var transaction: StoreTransaction

    public init(productId: String, transaction: StoreTransaction) {
        self.productId = productId
        self.transaction = transaction
    }
}

/// The last instant of a day, `yyyy-MM-dd` in UTC, as a code "until 2026-12-31" is good all that
/// day; nil for text that is no day (2027-02-30 is refused, not read as 2 March).
public enum CodeExpiry {
    public static func endOfDay(_ day: String) -> Date? {
        guard day.count == 10, let start = try? Date(day + "T00:00:00Z", strategy: .iso8601),
              start.formatted(.iso8601.year().month().day()) == day else { return nil }
        return start.addingTimeInterval(86_400 - 0.001)
    }
}

/// How an offer code is written and compared: letters and digits, case and the dashes and spaces
/// people type ignored (`ab12-cd34` is `AB12CD34`).
public enum OfferCodeText {
    public static func normalized(_ text: String) -> String {
        String(text.uppercased().unicodeScalars.filter { $0.isASCII && CharacterSet.alphanumerics.contains($0) }.map(Character.init))
    }
}
