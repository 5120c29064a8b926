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

    public init(productId: String, count: Int? = nil, code: String? = nil, limit: Int? = nil, expiresAt: Date? = nil) {
        (self.productId, self.count, self.code, self.limit, self.expiresAt) = (productId, count, code, limit, expiresAt)
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

    public init(batch: String, productId: String, codes: [String], limit: Int, expiresAt: Date?) {
        (self.batch, self.productId, self.codes, self.limit, self.expiresAt) = (batch, productId, codes, limit, expiresAt)
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

    public init(batch: String, productId: String, kind: String, codes: Int, limit: Int, redeemed: Int, expiresAt: Date?, revokedAt: Date?, createdAt: Date) {
        (self.batch, self.productId, self.kind, self.codes, self.limit, self.redeemed) = (batch, productId, kind, codes, limit, redeemed)
        (self.expiresAt, self.revokedAt, self.createdAt) = (expiresAt, revokedAt, createdAt)
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
