import Crypto
import Foundation

/// `POST /v1/play/purchases` and `POST /v1/appstore/transactions`: a channel's proof of payment,
/// presented by the account it is for.
public struct PlayPurchaseProof: Codable, Sendable, Equatable {
    /// The purchase JSON exactly as Play returned it (`Purchase.getOriginalJson()`): its bytes are what Play signed.
    public var purchase: String
    /// Play's base64 signature of it (`Purchase.getSignature()`).
    public var signature: String

    public init(purchase: String, signature: String) {
        self.purchase = purchase
        self.signature = signature
    }
}

/// `POST /v1/appstore/transactions`: a StoreKit 2 transaction (its JWS) for the presenting account.
public struct AppStoreTransactionProof: Codable, Sendable, Equatable {
    public var signedTransaction: String

    public init(signedTransaction: String) {
        self.signedTransaction = signedTransaction
    }
}

/// What a channel's proof came to: a Kiosk purchase with its receipt, or a pending one.
public struct ChannelPurchaseAnswer: Codable, Sendable, Equatable {
    /// `granted` (the transaction is the Kiosk purchase, its receipt signed) or `pending` (Play's
    /// pending purchase: present it again once Play says it is purchased).
    public var state: String
    public var productId: String
    public var transaction: StoreTransaction?
    /// True when the account already owned the product: the channel took money for nothing.
    public var owned: Bool?
    public var message: String?

    public init(state: String, productId: String, transaction: StoreTransaction? = nil, owned: Bool? = nil, message: String? = nil) {
        self.state = state
        self.productId = productId
        self.transaction = transaction
        self.owned = owned
        self.message = message
    }
}

/// `POST /v1/checkouts`: the reader's wish to pay for a product on the web shop.
public struct CheckoutRequest: Codable, Sendable, Equatable {
    public var productId: String
    public var quantity: Int?
    /// An offer code taken off the web's price (or a plan's trial it gives), reserved with the
    /// checkout and spent when it is paid; given back when the checkout lapses unpaid.
    public var offerCode: String?

    public init(productId: String, quantity: Int? = nil, offerCode: String? = nil) {
        self.productId = productId
        self.quantity = quantity
        self.offerCode = offerCode
    }
}

/// Where the reader pays: the web shop's checkout URL for a one-time purchase intent.
public struct Checkout: Codable, Sendable, Equatable {
    public var intent: String
    public var productId: String
    public var quantity: Int
    public var url: String

    public init(intent: String, productId: String, quantity: Int, url: String) {
        self.intent = intent
        self.productId = productId
        self.quantity = quantity
        self.url = url
    }
}

/// `GET /v1/store`: what a client needs to know of the store before buying: its environment and
/// how it takes money.
public struct StoreDescription: Codable, Sendable, Equatable {
    /// `sandbox` or `production`.
    public var environment: String
    /// The channels it grants for: `sandbox`, `web`, `play`, `appstore`.
    public var channels: [String]
    /// True when `kiosk buy` pays on the web shop (`POST /v1/checkouts`).
    public var webCheckout: Bool

    public init(environment: String, channels: [String], webCheckout: Bool) {
        self.environment = environment
        self.channels = channels
        self.webCheckout = webCheckout
    }

    /// The entity tag of `GET /v1/store`'s answer, which every change feed page names too
    /// (``TransactionPage/store``): a device keeps the description and asks again only when the
    /// tag it is told is not the one it keeps, so `kiosk buy` asks nothing but the feed before
    /// it pays.
    public var entityTag: String {
        let bytes = (try? JSONEncoder.kiosk.encode(self)) ?? Data()
        return "\"" + SHA256.hash(data: bytes).prefix(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined() + "\""
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count < width ? String(repeating: "0", count: width - count) + self : self }
}
