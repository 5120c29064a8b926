import Foundation

// The request and response bodies of the store's account, payment and transaction routes.

/// `POST /v1/accounts`: a new account and the secret token that acts for it.
public struct AccountCreated: Codable, Sendable {
    public var accountId: String
    /// The creating device's own token (see ``DeviceSignIn``).
    public var token: String
    /// The creating device; nil from a store older than devices.
    public var deviceId: String?
    /// The sign-in's email, when the account was made with one.
    public var email: String?

    public init(accountId: String, token: String, deviceId: String? = nil, email: String? = nil) {
        self.accountId = accountId
        self.token = token
        self.deviceId = deviceId
        self.email = email
    }
}

/// `GET /v1/account`: the credit balance and what the account owns.
public struct AccountSummary: Codable, Sendable, Equatable {
    public var accountId: String
    public var credits: Int
    /// Books and issues owned outright.
    public var owned: [String]
    /// Subscriptions with their current expiry.
    public var subscriptions: [SubscriptionStatus]
    /// The UUID the account's iOS app passes to StoreKit's purchase, so that the App Store
    /// transaction is granted to this account only.
    public var appAccountToken: String?
    /// The storefront the reader chose (ISO 3166-1 alpha-2): their prices, currency and tax; absent: none.
    public var storefront: String?

    public init(accountId: String, credits: Int, owned: [String], subscriptions: [SubscriptionStatus]) {
        self.accountId = accountId
        self.credits = credits
        self.owned = owned
        self.subscriptions = subscriptions
    }
}

public struct SubscriptionStatus: Codable, Sendable, Equatable {
    public var productId: String
    public var expiresDate: Date
    public var active: Bool

    public init(productId: String, expiresDate: Date, active: Bool) {
        self.productId = productId
        self.expiresDate = expiresDate
        self.active = active
    }
}

/// The sandbox store's test payment methods, like a payment provider's test cards.
public enum PaymentMethod: String, Codable, Sendable, CaseIterable {
    /// Charges and answers with the signed transaction.
    case approve
    /// Answers 402: the payment was refused.
    case decline
    /// The user backed out: no charge, not an error.
    case cancel
    /// Ask to Buy: waits for someone to approve or decline it.
    case `defer`
}

/// `POST /v1/payments`.
public struct PaymentRequest: Codable, Sendable {
    public var productId: String
    public var quantity: Int
    public var paymentMethod: PaymentMethod
    /// The same key always gives the same transaction and never a second charge.
    public var idempotencyKey: String
    /// The app's own UUID for the reader (StoreKit's `appAccountToken`): it appears in the receipt
    /// and in every notification about the purchase.
    public var appAccountToken: String?
    /// An offer code used with this purchase (``CodeBenefit``: a percentage or an amount off, or
    /// a subscription's introductory offer); spent only when the payment goes through.
    public var offerCode: String?

    public init(productId: String, quantity: Int, paymentMethod: PaymentMethod, idempotencyKey: String, appAccountToken: String? = nil, offerCode: String? = nil) {
        self.productId = productId
        self.quantity = quantity
        self.paymentMethod = paymentMethod
        self.idempotencyKey = idempotencyKey
        self.appAccountToken = appAccountToken
        self.offerCode = offerCode
    }
}

/// `POST /v1/redemptions`: spend credits on a product with a credit price.
public struct RedemptionRequest: Codable, Sendable {
    public var productId: String
    public var idempotencyKey: String

    public init(productId: String, idempotencyKey: String) {
        self.productId = productId
        self.idempotencyKey = idempotencyKey
    }
}

/// Where a store transaction stands on the server.
public enum TransactionStatus: String, Codable, Sendable {
    case purchased, deferred, declined, cancelled, revoked
}

/// One transaction as the server reports it; `signedTransaction` is the receipt (JWS) once purchased.
public struct StoreTransaction: Codable, Sendable, Equatable {
    public var transactionId: String
    public var productId: String
    public var status: TransactionStatus
    public var signedTransaction: String?
    public var finished: Bool
    /// Why a payment was declined, in words a person can act on.
    public var message: String?
    /// When the store revoked (refunded) it, and why.
    public var revocationDate: Date?
    public var revocationReason: String?
    /// What it was paid with, once settled (a ``PaidBy`` raw value: `owned` for a re-buy that
    /// charged nothing, `credits` for a redemption, a channel's name...), so every device of the
    /// account shows what was paid, not what was asked. Absent from older stores. A string, not
    /// the enum: a newer store may name a way of paying this device does not know.
    public var paidBy: String?

    public init(
        transactionId: String, productId: String, status: TransactionStatus, signedTransaction: String?, finished: Bool,
        message: String? = nil, revocationDate: Date? = nil, revocationReason: String? = nil, paidBy: String? = nil
    ) {
        self.transactionId = transactionId
        self.productId = productId
        self.status = status
        self.signedTransaction = signedTransaction
        self.finished = finished
        self.message = message
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.paidBy = paidBy
    }
}

/// The body of `POST /v1/admin/accounts/{id}/grant`: the operator gives an account a product by
/// hand (a channel's payment the store could not match, a goodwill gesture), for a reason kept in
/// the account's audit list. The idempotency key makes a retried request one grant.
public struct AdminGrantRequest: Codable, Sendable, Equatable {
    public var productId: String
    public var quantity: Int
    public var reason: String
    public var idempotencyKey: String

    public init(productId: String, quantity: Int = 1, reason: String, idempotencyKey: String) {
        self.productId = productId
        self.quantity = quantity
        self.reason = reason
        self.idempotencyKey = idempotencyKey
    }
}

/// The answer to `POST /v1/admin/transactions/{id}/refund` and `/revoke`: the transaction as it
/// now stands and what the decision did to the account, so that the operator is told.
///
/// On the wire the transaction's fields come first, at the top level, and these beside them: an
/// older caller that reads the answer as a ``StoreTransaction`` still can.
public struct AdminRevocation: Codable, Sendable, Equatable {
    public var transaction: StoreTransaction
    /// The money paid back, in cents of `currency`: 0 for a revocation, or a purchase that charged nothing.
    public var refundedCents: Int
    public var currency: String
    /// The credits the refund took back: everything the purchase granted (a refund is refused
    /// when the balance no longer holds them).
    public var creditsWithdrawn: Int
    /// The credits the refund gave back: the price of a book or issue bought with credits.
    public var creditsReturned: Int
    /// The account's balance once the decision is committed.
    public var credits: Int
    /// The free re-buys (`owned`) revoked with it, which stood on it.
    public var alsoRevoked: [String]

    public init(transaction: StoreTransaction, refundedCents: Int, currency: String, creditsWithdrawn: Int, creditsReturned: Int = 0, credits: Int, alsoRevoked: [String]) {
        self.transaction = transaction
        self.refundedCents = refundedCents
        self.currency = currency
        self.creditsWithdrawn = creditsWithdrawn
        self.creditsReturned = creditsReturned
        self.credits = credits
        self.alsoRevoked = alsoRevoked
    }

    private enum CodingKeys: String, CodingKey { case refundedCents, currency, creditsWithdrawn, creditsReturned, credits, alsoRevoked }

    public init(from decoder: any Decoder) throws {
        transaction = try StoreTransaction(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        refundedCents = try container.decode(Int.self, forKey: .refundedCents)
        currency = try container.decode(String.self, forKey: .currency)
        creditsWithdrawn = try container.decode(Int.self, forKey: .creditsWithdrawn)
        creditsReturned = try container.decodeIfPresent(Int.self, forKey: .creditsReturned) ?? 0
        credits = try container.decode(Int.self, forKey: .credits)
        alsoRevoked = try container.decode([String].self, forKey: .alsoRevoked)
    }

    public func encode(to encoder: any Encoder) throws {
        try transaction.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(refundedCents, forKey: .refundedCents)
        try container.encode(currency, forKey: .currency)
        try container.encode(creditsWithdrawn, forKey: .creditsWithdrawn)
        try container.encode(creditsReturned, forKey: .creditsReturned)
        try container.encode(credits, forKey: .credits)
        try container.encode(alsoRevoked, forKey: .alsoRevoked)
    }
}

/// The answer to a payment or a redemption: the transaction, and the balance after it.
public struct PaymentResponse: Codable, Sendable, Equatable {
    public var transaction: StoreTransaction
    public var credits: Int
    /// True when the account already owned the product: nothing was charged, and the transaction
    /// points at the original purchase.
    public var owned: Bool?

    public init(transaction: StoreTransaction, credits: Int, owned: Bool? = nil) {
        self.transaction = transaction
        self.credits = credits
        self.owned = owned
    }
}

/// `GET /v1/transactions?after=CURSOR`: a page of the account's transactions, oldest first.
public struct TransactionPage: Codable, Sendable {
    public var transactions: [StoreTransaction]
    /// Pass as `after` to get the next page.
    public var cursor: String?
    public var hasMore: Bool
    /// The ETag of the catalog the store serves now: a device whose cached catalog has another
    /// syncs. A long poll sent with `catalog=` answers at once when the catalog is not that one,
    /// and is woken when it changes.
    public var catalog: String?
    /// The entity tag of `GET /v1/store`'s answer now (``StoreDescription/entityTag``): a device
    /// that keeps a description of another tag asks for it again.
    public var store: String?

    public init(transactions: [StoreTransaction], cursor: String?, hasMore: Bool, catalog: String? = nil, store: String? = nil) {
        self.transactions = transactions
        self.cursor = cursor
        self.hasMore = hasMore
        self.catalog = catalog
        self.store = store
    }

    /// Whether two catalog ETags name the same catalog (the plain and the gzip form of one do).
    public static func sameCatalog(_ a: String, _ b: String) -> Bool {
        func plain(_ tag: String) -> String { tag.hasSuffix("-gzip\"") ? String(tag.dropLast(6)) + "\"" : tag }
        return plain(a) == plain(b)
    }
}

/// `POST /verifyReceipt` in the App Store's shape.
public struct VerifyReceiptRequest: Codable, Sendable {
    public var receiptData: String

    enum CodingKeys: String, CodingKey { case receiptData = "receipt-data" }

    public init(receiptData: String) {
        self.receiptData = receiptData
    }
}

public struct VerifyReceiptResponse: Codable, Sendable {
    public var status: Int
    public var environment: StoreEnvironment?
    public var receipt: ReceiptClaims?

    public init(status: Int, environment: StoreEnvironment?, receipt: ReceiptClaims?) {
        self.status = status
        self.environment = environment
        self.receipt = receipt
    }
}

/// The App Store's `verifyReceipt` status codes.
public enum VerifyReceiptStatus {
    public static let valid = 0
    public static let badRequest = 21000
    public static let malformed = 21002
    public static let notAuthentic = 21003
    /// The store could not check the receipt now (its keys could not be read); try again.
    public static let serverUnavailable = 21005
    public static let subscriptionExpired = 21006
    public static let sandboxReceiptSentToProduction = 21007
    public static let productionReceiptSentToSandbox = 21008
    public static let revokedOrUnknown = 21010
}

/// `PUT /v1/account/storefront`: the reader's storefront (their country), which decides the
/// prices, the currency and the tax of what they buy from now on.
public struct StorefrontChoice: Codable, Sendable, Equatable {
    public var storefront: String

    public init(storefront: String) { self.storefront = storefront }
}
