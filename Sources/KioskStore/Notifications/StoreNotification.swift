import Foundation
import JWTKit
import KioskCore
import SQLKit

/// A change of state the publisher's backend is told of, shaped like App Store Server
/// Notifications V2 (docs/notifications.md has the mapping). It is written to the outbox
/// (`notification`, one `delivery` per registered endpoint) in the same database transaction as
/// the change it reports, so nothing is announced that was not committed and nothing committed
/// goes unannounced.
struct StoreNotification: Sendable {
    /// App Store's `notificationType`, e.g. `DID_RENEW`.
    var type: String
    /// App Store's `subtype`, e.g. `BILLING_RECOVERY`.
    var subtype: String?
    var accountId: String
    /// The transaction the notification is about (its signed receipt goes in `signedTransactionInfo`).
    var transactionId: String?
    var originalTransactionId: String?
    /// For subscriptions: the renewal info as it stood after the change.
    var renewalInfo: RenewalInfo?

    /// `renewalInfo` as the outbox stores it (JSON text), nil when there is none.
    func renewalInfoJSON() throws -> String? {
        try renewalInfo.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
    }

    enum Kind {
        static let subscribed = "SUBSCRIBED"
        static let didRenew = "DID_RENEW"
        static let didFailToRenew = "DID_FAIL_TO_RENEW"
        static let gracePeriodExpired = "GRACE_PERIOD_EXPIRED"
        static let expired = "EXPIRED"
        static let didChangeRenewalStatus = "DID_CHANGE_RENEWAL_STATUS"
        /// A change of plan: `UPGRADE` at once, `DOWNGRADE` at the renewal, none when one waiting is undone.
        static let didChangeRenewalPref = "DID_CHANGE_RENEWAL_PREF"
        static let oneTimeCharge = "ONE_TIME_CHARGE"
        static let refund = "REFUND"
        static let revoke = "REVOKE"
        static let test = "TEST"
        /// Kiosk's own (App Store has no notification for Ask to Buy decisions).
        static let askToBuyDeclined = "ASK_TO_BUY_DECLINED"
        /// Kiosk's own: the reader's device reported a consumable delivered (finished).
        static let consumableDelivered = "CONSUMABLE_DELIVERED"
    }
}

/// A subscription's renewal info, as App Store's `JWSRenewalInfoDecodedPayload` names its fields;
/// dates are milliseconds since 1970.
struct RenewalInfo: Codable, Sendable, JWTPayload {
    var originalTransactionId: String
    var productId: String
    var autoRenewProductId: String
    /// 1 on, 0 off.
    var autoRenewStatus: Int
    /// 1 voluntary, 2 billing error, 4 product not for sale, 5 other (a refunded or revoked period) (App Store's values).
    var expirationIntent: Int?
    var isInBillingRetryPeriod: Bool
    var gracePeriodExpiresDate: Int64?
    var renewalDate: Int64?
    var appAccountToken: String?
    var environment: String
    /// Set when signed.
    var signedDate: Int64?

    func verify(using algorithm: some JWTAlgorithm) throws {}

    init(_ subscription: SubscriptionRecord, environment: StoreEnvironment) {
        originalTransactionId = subscription.originalTransactionId
        productId = subscription.productId
        autoRenewProductId = subscription.renewalProductId
        autoRenewStatus = subscription.autoRenew ? 1 : 0
        expirationIntent = switch subscription.expirationReason {
        case .voluntary: 1
        case .billingError: 2
        case .productRemoved: 4
        case .revoked: 5
        case nil: nil
        }
        isInBillingRetryPeriod = subscription.state == .gracePeriod || subscription.state == .billingRetry
        gracePeriodExpiresDate = subscription.state == .gracePeriod ? subscription.graceEndsAt.map(Self.milliseconds) : nil
        renewalDate = subscription.state == .expired ? nil : Self.milliseconds(subscription.retryAt ?? subscription.expiresDate)
        appAccountToken = subscription.appAccountToken
        self.environment = environment == .production ? "Production" : "Sandbox"
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}
