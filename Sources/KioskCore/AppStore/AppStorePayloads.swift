import Foundation

/// The App Store's environments, as its signed data names them.
public enum AppStoreEnvironment: String, Codable, Sendable, CaseIterable {
    case sandbox = "Sandbox"
    case production = "Production"

    /// Kiosk's environment of the same meaning: a sandbox proof never passes for a real purchase.
    public var storeEnvironment: StoreEnvironment {
        switch self {
        case .sandbox: return .sandbox
        case .production: return .production
        }
    }

    public init(_ environment: StoreEnvironment) {
        switch environment {
        case .sandbox: self = .sandbox
        case .production: self = .production
        }
    }
}

/// The decoded payload of a StoreKit 2 signed transaction (JWSTransactionDecodedPayload).
/// Dates are milliseconds since 1970; fields Kiosk does not use are kept for display.
public struct AppStoreTransaction: Codable, Sendable, Equatable {
    public var transactionId: String
    public var originalTransactionId: String
    public var bundleId: String
    public var productId: String
    /// "Consumable", "Non-Consumable", "Auto-Renewable Subscription", "Non-Renewing Subscription".
    public var type: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int?
    public var signedDate: Int64
    /// Kept as the App Store spells it ("Sandbox", "Production", "Xcode"…); checked by the verifier.
    public var environment: String
    public var revocationDate: Int64?
    public var revocationReason: Int?
    public var appAccountToken: String?
    public var subscriptionGroupIdentifier: String?
    public var webOrderLineItemId: String?
    public var inAppOwnershipType: String?
    public var storefront: String?
    public var transactionReason: String?
    /// The offer the transaction was bought with: 1 introductory, 2 promotional, 3 an offer code,
    /// 4 win-back; its `offerDiscountType` (`FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`) and its
    /// `offerPeriod` (ISO 8601).
    public var offerType: Int?
    public var offerDiscountType: String?
    public var offerPeriod: String?

    public init(
        transactionId: String, originalTransactionId: String, bundleId: String, productId: String, type: String?,
        purchaseDate: Int64?, expiresDate: Int64?, signedDate: Int64, environment: String, quantity: Int? = 1,
        revocationDate: Int64? = nil, revocationReason: Int? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.bundleId = bundleId
        self.productId = productId
        self.type = type
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.signedDate = signedDate
        self.environment = environment
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
    }

    /// Kiosk's kind for the App Store's product type (a non-renewing subscription is a period too).
    public var kind: ProductKind {
        switch type {
        case "Consumable": return .consumable
        case "Auto-Renewable Subscription", "Non-Renewing Subscription": return .subscription
        default: return .nonConsumable
        }
    }

    /// The offer in Kiosk's names, as a receipt carries it (``ReceiptClaims/offerType``): an
    /// introductory offer by its kind (`freeTrial`, `payAsYouGo`, `payUpFront`), any other by
    /// what it is (`promotional`, `offerCode`, `winBack`); nil at the normal price.
    public var kioskOfferType: String? {
        switch offerType {
        case 1?:
            switch offerDiscountType {
            case "FREE_TRIAL": return IntroductoryOffer.Kind.freeTrial.rawValue
            case "PAY_AS_YOU_GO": return IntroductoryOffer.Kind.payAsYouGo.rawValue
            case "PAY_UP_FRONT": return IntroductoryOffer.Kind.payUpFront.rawValue
            default: return "introductory"
            }
        case 2?: return "promotional"
        case 3?: return "offerCode"
        case 4?: return "winBack"
        default: return nil
        }
    }

    public var purchased: Date? { purchaseDate.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
    public var expires: Date? { expiresDate.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
}

/// The decoded payload of an App Store Server Notification V2 (ResponseBodyV2DecodedPayload).
public struct AppStoreNotification: Codable, Sendable, Equatable {
    /// What happened: REFUND, REVOKE, DID_RENEW, SUBSCRIBED, TEST…
    public var notificationType: String
    public var subtype: String?
    /// Unique per notification; Apple resends the same one until it is acknowledged.
    public var notificationUUID: String
    public var version: String?
    public var signedDate: Int64
    public var data: NotificationData?

    /// The app and the signed transaction the notification is about.
    public struct NotificationData: Codable, Sendable, Equatable {
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var environment: String?
        /// A signed transaction (JWS), verified the same way as the notification.
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?

        public init(appAppleId: Int64?, bundleId: String?, environment: String?, signedTransactionInfo: String?) {
            self.appAppleId = appAppleId
            self.bundleId = bundleId
            self.environment = environment
            self.signedTransactionInfo = signedTransactionInfo
        }
    }

    public init(notificationType: String, subtype: String? = nil, notificationUUID: String, signedDate: Int64, data: NotificationData?) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = "2.0"
        self.signedDate = signedDate
        self.data = data
    }
}

/// The decoded payload of a subscription's signed renewal info (JWSRenewalInfoDecodedPayload).
public struct AppStoreRenewalInfo: Codable, Sendable, Equatable {
    public var originalTransactionId: String
    public var autoRenewProductId: String?
    public var productId: String?
    public var autoRenewStatus: Int?
    public var signedDate: Int64
    public var environment: String
    public var renewalDate: Int64?
}
