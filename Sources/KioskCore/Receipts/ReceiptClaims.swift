import Foundation
import JWTKit

/// The claims of a signed transaction (the receipt), as the server signs them into a JWS.
///
/// Dates are milliseconds since 1970, as the App Store's signed transactions carry them.
public struct ReceiptClaims: JWTPayload, Equatable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String
    public var kind: ProductKind
    public var quantity: Int
    public var accountId: String
    public var purchaseDate: Int64
    /// For subscriptions: when the period ends.
    public var expiresDate: Int64?
    public var environment: StoreEnvironment
    /// The store that signed the receipt (`iss`); empty when the receipt carries none, which
    /// ``KioskReceiptPolicy`` refuses (every receipt Kiosk has ever signed carries one).
    public var issuer: String
    /// The app's own account token given with the purchase (StoreKit's `appAccountToken`), if any.
    public var appAccountToken: String?
    /// The introductory offer the period was bought with (`freeTrial`, `payAsYouGo`,
    /// `payUpFront`) and its ISO 8601 period (`P14D`), as StoreKit's `offerDiscountType` and
    /// `offerPeriod`; absent at the normal price.
    public var offerType: String?
    public var offerPeriod: String?
    /// What was paid, in milliunits of `currency` (4.99 EUR is 4990), tax included, and the
    /// storefront it was bought in, as StoreKit's `price`, `currency` and `storefront` (here the
    /// ISO 3166-1 alpha-2 code); absent from what charged no money and from older receipts.
    public var price: Int64?
    public var currency: String?
    public var storefront: String?

    enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, productId, kind, quantity, accountId
        case purchaseDate, expiresDate, environment, appAccountToken, offerType, offerPeriod, price, currency, storefront
        case issuer = "iss"
    }

    public init(
        transactionId: String, originalTransactionId: String, productId: String, kind: ProductKind,
        quantity: Int, accountId: String, purchaseDate: Date, expiresDate: Date?,
        environment: StoreEnvironment, issuer: String, appAccountToken: String? = nil, offerType: String? = nil, offerPeriod: String? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.kind = kind
        self.quantity = quantity
        self.accountId = accountId
        self.purchaseDate = Int64((purchaseDate.timeIntervalSince1970 * 1000).rounded())
        self.expiresDate = expiresDate.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
        self.environment = environment
        self.issuer = issuer
        self.appAccountToken = appAccountToken
        self.offerType = offerType
        self.offerPeriod = offerPeriod
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionId = try container.decode(String.self, forKey: .transactionId)
        originalTransactionId = try container.decode(String.self, forKey: .originalTransactionId)
        productId = try container.decode(String.self, forKey: .productId)
        kind = try container.decode(ProductKind.self, forKey: .kind)
        quantity = try container.decode(Int.self, forKey: .quantity)
        accountId = try container.decode(String.self, forKey: .accountId)
        purchaseDate = try container.decode(Int64.self, forKey: .purchaseDate)
        expiresDate = try container.decodeIfPresent(Int64.self, forKey: .expiresDate)
        environment = try container.decode(StoreEnvironment.self, forKey: .environment)
        // Decoded, not refused here: a missing `iss` is the policy's refusal to name (wrong issuer),
        // not a malformed receipt.
        issuer = try container.decodeIfPresent(String.self, forKey: .issuer) ?? ""
        appAccountToken = try container.decodeIfPresent(String.self, forKey: .appAccountToken)
        offerType = try container.decodeIfPresent(String.self, forKey: .offerType)
        offerPeriod = try container.decodeIfPresent(String.self, forKey: .offerPeriod)
        price = try container.decodeIfPresent(Int64.self, forKey: .price)
        currency = try container.decodeIfPresent(String.self, forKey: .currency)
        storefront = try container.decodeIfPresent(String.self, forKey: .storefront)
    }

    /// A receipt proves a past purchase, so it does not expire; subscription expiry is a business rule.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    public var purchased: Date { Date(timeIntervalSince1970: Double(purchaseDate) / 1000) }
    public var expires: Date? { expiresDate.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
}

/// Which store signed a receipt: test purchases must never pass for real ones.
public enum StoreEnvironment: String, Codable, Sendable, CaseIterable {
    case sandbox
    case production
}
