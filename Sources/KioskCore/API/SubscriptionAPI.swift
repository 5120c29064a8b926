import Foundation

/// Where a subscription is in its life (`GET /v1/subscriptions`), as App Store's renewal info
/// tells it: paid and running, failing to renew while access goes on (grace) or stops (billing
/// retry), or over.
public enum SubscriptionState: String, Codable, Sendable, CaseIterable {
    /// Paid up to `expiresDate`; renews then unless auto-renew is off.
    case active
    /// A renewal failed; access continues until `gracePeriodExpiresDate` while the store retries.
    case gracePeriod
    /// A renewal failed and any grace is over; no access while the store retries.
    case billingRetry
    /// Over, for `expirationReason`; a new purchase starts it again.
    case expired
}

/// Why a subscription ended (App Store's `expirationIntent`).
public enum SubscriptionExpirationReason: String, Codable, Sendable, CaseIterable {
    /// The reader turned auto-renew off.
    case voluntary
    /// Every billing retry failed.
    case billingError
    /// The product left the catalog.
    case productRemoved
    /// The store refunded or revoked the period that was current: nothing more is charged.
    case revoked
}

/// One subscription of an account: the chain of periods that share an original transaction.
public struct SubscriptionInfo: Codable, Sendable, Equatable {
    public var originalTransactionId: String
    public var productId: String
    public var state: SubscriptionState
    public var autoRenew: Bool
    /// The end of the latest paid period.
    public var expiresDate: Date
    /// While in grace: when access stops unless a retry succeeds.
    public var gracePeriodExpiresDate: Date?
    /// While in grace or billing retry: when the store tries to charge again.
    public var nextRetryDate: Date?
    /// Failed charges since the last successful one.
    public var failedAttempts: Int
    public var expirationReason: SubscriptionExpirationReason?
    /// Whether the account may read what it covers now (active or in grace).
    public var entitled: Bool
    /// The app's own account token given at purchase, if any.
    public var appAccountToken: String?
    /// Every billing grace window the subscription has had, the open one included: what was
    /// published in one stays entitled, as in a paid period. Absent from stores before them.
    public var graceWindows: [GraceWindow]?
    /// The channel that renews it and is asked to change its auto-renew (`stripe`, `play`); absent
    /// when the store renews it itself (the sandbox) or it was bought for one period.
    public var renewsThrough: String?
    /// The plan it renews as when a downgrade (or a crossgrade to another length) waits for the
    /// next renewal; absent when it renews as itself.
    public var renewsAs: String?

    public init(
        originalTransactionId: String, productId: String, state: SubscriptionState, autoRenew: Bool, expiresDate: Date,
        gracePeriodExpiresDate: Date? = nil, nextRetryDate: Date? = nil, failedAttempts: Int = 0,
        expirationReason: SubscriptionExpirationReason? = nil, entitled: Bool, appAccountToken: String? = nil, graceWindows: [GraceWindow]? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.state = state
        self.autoRenew = autoRenew
        self.expiresDate = expiresDate
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.nextRetryDate = nextRetryDate
        self.failedAttempts = failedAttempts
        self.expirationReason = expirationReason
        self.entitled = entitled
        self.appAccountToken = appAccountToken
        self.graceWindows = graceWindows
    }
}

/// A billing grace window: access went on from the unpaid period's end (`startsAt`) to `endsAt`
/// (grace's end, or the recovery or expiry that closed it).
public struct GraceWindow: Codable, Sendable, Equatable {
    public var startsAt: Date
    public var endsAt: Date

    public init(startsAt: Date, endsAt: Date) {
        self.startsAt = startsAt
        self.endsAt = endsAt
    }
}

/// `GET /v1/subscriptions`: every subscription of the account, and the account's own time
/// (the sandbox may run it ahead, see `kiosk serve --sandbox-time-scale`).
public struct SubscriptionList: Codable, Sendable, Equatable {
    public var subscriptions: [SubscriptionInfo]
    public var now: Date

    public init(subscriptions: [SubscriptionInfo], now: Date) {
        self.subscriptions = subscriptions
        self.now = now
    }
}

/// `POST /v1/admin/accounts/{id}/sandbox`: the sandbox settings of one account. Each field left
/// out is left as it is.
public struct SandboxAccountSettings: Codable, Sendable, Equatable {
    /// Whether the account's renewals are charged (`succeed`) or refused (`fail`).
    public var renewals: RenewalOutcome?
    /// Seconds to move the account's clock forward by (renewals, grace and expiry follow it).
    public var advanceSeconds: Double?

    public enum RenewalOutcome: String, Codable, Sendable, CaseIterable { case succeed, fail }

    public init(renewals: RenewalOutcome? = nil, advanceSeconds: Double? = nil) {
        self.renewals = renewals
        self.advanceSeconds = advanceSeconds
    }
}

/// The answer to a sandbox settings change: the account's settings and clock after it.
public struct SandboxAccountState: Codable, Sendable, Equatable {
    public var accountId: String
    public var renewals: SandboxAccountSettings.RenewalOutcome
    /// How far the account's clock runs ahead of the store's, in seconds.
    public var clockOffsetSeconds: Double
    /// The account's time now.
    public var now: Date

    public init(accountId: String, renewals: SandboxAccountSettings.RenewalOutcome, clockOffsetSeconds: Double, now: Date) {
        self.accountId = accountId
        self.renewals = renewals
        self.clockOffsetSeconds = clockOffsetSeconds
        self.now = now
    }
}

/// `POST /v1/subscriptions/{originalTransactionId}/change`: move to another plan of the group.
public struct PlanChangeRequest: Codable, Sendable {
    /// The plan to move to (a subscription of the same group); the running plan itself undoes a
    /// change waiting for the renewal.
    public var productId: String
    /// One per change the reader asks for: a retry answers the first, never charges twice.
    public var idempotencyKey: String

    public init(productId: String, idempotencyKey: String) {
        self.productId = productId
        self.idempotencyKey = idempotencyKey
    }
}

/// What a plan change came to.
public struct PlanChangeResult: Codable, Sendable {
    /// The subscription after it (`renewsAs` names a change waiting for the renewal).
    public var subscription: SubscriptionInfo
    /// Nil when nothing changed, or a waiting change was undone.
    public var change: PlanChange.Kind?
    /// Whether it took effect at once (a new period of the new plan, charged now).
    public var atOnce: Bool
    /// The new plan's first period, when it took effect at once.
    public var transaction: StoreTransaction?
    /// The unused part of the old period credited back, in the currency's minor unit.
    public var creditedCents: Int
    public var currency: String
    /// What happened, in words.
    public var message: String

    public init(subscription: SubscriptionInfo, change: PlanChange.Kind?, atOnce: Bool, transaction: StoreTransaction?,
                creditedCents: Int, currency: String, message: String) {
        self.subscription = subscription
        self.change = change
        self.atOnce = atOnce
        self.transaction = transaction
        self.creditedCents = creditedCents
        self.currency = currency
        self.message = message
    }
}
