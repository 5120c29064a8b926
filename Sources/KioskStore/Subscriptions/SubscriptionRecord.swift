import Foundation
import KioskCore

/// A subscription's row (`subscription`, see ``Migrations``): the chain of periods that share one
/// original transaction, where it is in its life, and the next time something is due for it.
struct SubscriptionRecord: Codable, Sendable {
    var originalTransactionId: String
    var accountId: String
    var productId: String
    var state: SubscriptionState
    var autoRenew: Bool
    /// The end of the latest paid period, in the account's time.
    var expiresDate: Date
    /// When the renewal worker next has something to do, in the store's time (the account's time
    /// less its offset, so that one index serves every account); nil once expired.
    var dueAt: Date?
    /// The next charge attempt while failing to renew, in the account's time.
    var retryAt: Date?
    /// The end of the grace period while in it, in the account's time.
    var graceEndsAt: Date?
    var failedAttempts: Int
    var expirationReason: SubscriptionExpirationReason?
    var appAccountToken: String?
    /// The instance that claimed it for renewal, until `claimedUntil` (wall clock).
    var claimedBy: String?
    var claimedUntil: Date?
    /// Moved by every write: the compare-and-set each change of state commits under.
    var version: Int64
    var updatedAt: Date
    /// The channel that renews it (`stripe`, `play`), nil when the store does (the sandbox's
    /// worker) or nobody does (a period bought once). A channel's subscription is never claimed
    /// by the worker (its `dueAt` is nil): that channel's events move it.
    var channel: String? = nil
    /// That channel's id of it (`sub_…`, a Play purchase token), which its events name.
    var channelSubscriptionId: String? = nil
    /// The time of the newest update from the channel applied (its event's own time), so that an
    /// older one coming late changes nothing.
    var channelUpdatedAt: Date? = nil
    /// Renewals still at the introductory offer's price (an offer paid as it goes, issue 65).
    var offerRenewalsLeft: Int = 0
    /// The plan it renews as at its next renewal, when a downgrade (or a crossgrade to another
    /// length) waits for it; nil: it renews as itself.
    var pendingProductId: String? = nil
    /// The storefront it was bought in: its renewals are charged that storefront's price and tax.
    var storefront: String? = nil

    /// The plan its next renewal charges for.
    var renewalProductId: String { pendingProductId ?? productId }

    func info(now: Date) -> SubscriptionInfo {
        var info = SubscriptionInfo(
            originalTransactionId: originalTransactionId, productId: productId, state: state, autoRenew: autoRenew,
            expiresDate: expiresDate, gracePeriodExpiresDate: state == .gracePeriod ? graceEndsAt : nil,
            nextRetryDate: state == .gracePeriod || state == .billingRetry ? retryAt : nil, failedAttempts: failedAttempts,
            expirationReason: expirationReason,
            entitled: state == .active && expiresDate > now || state == .gracePeriod && (graceEndsAt ?? .distantPast) > now,
            appAccountToken: appAccountToken)
        info.renewsThrough = channel
        info.renewsAs = pendingProductId
        return info
    }
}

/// One account's sandbox settings (`sandboxAccount`); an account without a row has the defaults.
struct SandboxAccount: Codable, Sendable {
    var accountId: String
    /// Seconds the account's clock runs ahead of the store's.
    var clockOffset: Double
    var renewals: SandboxAccountSettings.RenewalOutcome

    static func defaults(_ accountId: String) -> SandboxAccount {
        SandboxAccount(accountId: accountId, clockOffset: 0, renewals: .succeed)
    }
}

/// When a failing subscription is charged again and when the store gives up, counted from the
/// end of the period that could not be renewed (docs/subscriptions.md): attempts at the period's
/// end and 1, 3, 7 and 14 days after it; the fifth failure expires it (`billingError`). Grace,
/// when the product has `gracePeriodDays`, runs from the period's end for that many days (never
/// past the last attempt).
enum RenewalSchedule {
    /// Days after the period's end of the retries that follow the first failed attempt.
    static let retryDays = [1, 3, 7, 14]

    /// The time of the retry after `failedAttempts` failures, or nil when the store gives up.
    static func retry(after failedAttempts: Int, periodEnd: Date) -> Date? {
        guard failedAttempts >= 1, failedAttempts <= retryDays.count else { return nil }
        return periodEnd.addingTimeInterval(Double(retryDays[failedAttempts - 1]) * 86_400)
    }

    /// The end of grace for a period that ended at `periodEnd`, or nil without grace.
    static func graceEnd(days: Int?, periodEnd: Date) -> Date? {
        guard let days, days > 0 else { return nil }
        let last = Double(retryDays.last ?? 0)
        return periodEnd.addingTimeInterval(min(Double(days), last) * 86_400)
    }
}
