import Foundation
import KioskCore
import SQLKit

/// Play subscriptions: bought in the app and presented as a book's purchase is (``PlayChannel/claim(_:accountId:)``),
/// renewed by Google Play and followed here. Play's Real-time developer notifications say only
/// that something happened to a purchase token (renewed, recovered, in grace, on hold, canceled,
/// restarted, revoked, expired); what stands is read from the Android Publisher API
/// (`purchases.subscriptionsv2.get`, ``PlayDeveloperAPI``) each time, so a notification sent twice,
/// late or out of order is applied against the subscription as Play has it now:
/// - a paid expiry later than the store's is a new period (`DID_RENEW`), keyed by that expiry;
/// - `autoRenewEnabled` is auto-renew; in grace, on hold and expired are those states;
/// - a revocation (type 12, a refund in the Play Console) revokes the latest period.
/// The subscription is known by its token's digest (``PlayChannel/reference(_:)``).
extension PlayChannel {
    /// Play's `subscriptionNotification.notificationType`: a revoked subscription, the one type
    /// whose meaning the purchase's state does not carry (it reads as expired).
    static let revokedType = 12

    /// The state of a subscription a reader presents, when it is paid for: its period and Play's answer.
    func paidSubscription(_ token: String, what: String) async throws -> (period: (start: Date, end: Date), purchase: PlaySubscriptionPurchase) {
        guard let api = base.channels.playAPI else {
            throw StoreError(.forbidden, code: "play_subscriptions_not_configured",
                             message: "this store does not take Play subscriptions: it needs --play-service-account to read each one's state from Google Play")
        }
        let purchase = try await api.subscription(token)
        let paid = ["SUBSCRIPTION_STATE_ACTIVE", "SUBSCRIPTION_STATE_CANCELED", "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"]
        guard let state = purchase.subscriptionState, paid.contains(state), let expiry = purchase.expiry else {
            throw StoreError(.notPaid, code: "play_subscription_inactive",
                             message: "\(what) is \(purchase.subscriptionState.map { $0.replacingOccurrences(of: "SUBSCRIPTION_STATE_", with: "").lowercased() } ?? "in no state") at Google Play; it grants nothing now")
        }
        let start = min(purchase.started ?? clock.wallNow(), expiry.addingTimeInterval(-1))
        return ((start, expiry), purchase)
    }

    /// A `subscriptionNotification`: the subscription's state read from Play and applied.
    func subscriptionNotified(_ fields: [String: JSONValue], eventId: String,
                              keep: (String, String?, String) async throws -> AdminChannelEventRow) async throws -> AdminChannelEventRow {
        guard case .string(let token)? = fields["purchaseToken"], Self.isToken(token) else {
            return try await keep(ChannelEventOutcome.unmatched, nil, "a subscription notification whose purchaseToken is not one Play issues")
        }
        let type: Int? = if case .number(let number)? = fields["notificationType"], number >= 0, number < 1000 { Int(number) } else { nil }
        let reference = Self.reference(token)
        guard base.channels.playAPI != nil else {
            return try await keep(ChannelEventOutcome.ignored, reference, "a subscription notification; following Play subscriptions needs --play-service-account")
        }
        guard try await database.read({ try await SubscriptionRows($0).find(channel: Self.channel, subscriptionId: reference) }) != nil else {
            return try await keep(ChannelEventOutcome.ignored, reference,
                                  "a subscription the app has not presented to this store yet (type \(type.map(String.init) ?? "?")): it is granted when it is")
        }
        // Play's answer is what stands now. Nothing is kept until it is applied: Play unreachable
        // is an error answer, and Pub/Sub pushes the notification again.
        guard let purchase = try await base.channels.playAPI?.subscription(token) else {
            return try await keep(ChannelEventOutcome.ignored, reference, "Play's state could not be read")
        }
        // Applied as of the read, not of the notification's time: what was read is what stands now,
        // so a notification pushed again late still applies it.
        let followed = try await follow(purchase, token: token, type: type, at: clock.wallNow())
        return try await channelRecords.keepEvent(AdminChannelEventRow(
            channel: Self.channel, eventId: eventId, type: "subscriptionNotification",
            payment: reference,
            outcome: followed.refused ? ChannelEventOutcome.unmatched
                : followed.transaction != nil ? ChannelEventOutcome.granted : followed.changed ? ChannelEventOutcome.applied : ChannelEventOutcome.ignored,
            detail: "type \(type.map(String.init) ?? "?"): \(followed.detail)", accountId: followed.account, transactionId: followed.transaction,
            receivedAt: clock.wallNow()))
    }

    /// Brings the store's subscription to Play's state: each difference one step.
    /// - Returns: what changed, in words; the period recorded, if any; whether anything changed.
    func follow(_ purchase: PlaySubscriptionPurchase, token: String, type: Int?, at: Date) async throws
        -> (detail: String, account: String?, transaction: String?, changed: Bool, refused: Bool) {
        let reference = Self.reference(token)
        guard let current = try await database.read({ try await SubscriptionRows($0).find(channel: Self.channel, subscriptionId: reference) }) else {
            return ("no subscription of this store's", nil, nil, false, false)
        }
        var steps: [ChannelSubscriptionEvent] = []
        let state = purchase.subscriptionState ?? ""
        if let expiry = purchase.expiry, expiry > current.expiresDate.addingTimeInterval(0.001),
           ["SUBSCRIPTION_STATE_ACTIVE", "SUBSCRIPTION_STATE_CANCELED"].contains(state) {
            // A period the store has not recorded: its start is the catalog's period before its end.
            let product = try await catalog.storeProducts().products[current.productId]
            let months = product?.periodMonths ?? 1
            let start = max(current.expiresDate, Calendar.utc.date(byAdding: .month, value: -months, to: expiry) ?? current.expiresDate)
            let cents = product.flatMap { try? Store.cents($0.price) } ?? 0
            steps.append(.paid(start: start, end: expiry, key: "\(reference):\(RenewalInfo.milliseconds(expiry))", amountCents: cents,
                               currency: product?.price.currency ?? "USD"))
        }
        if let renewing = purchase.autoRenewing, renewing != current.autoRenew, state != "SUBSCRIPTION_STATE_EXPIRED" {
            steps.append(.autoRenew(renewing, at: at))
        }
        switch state {
        case "SUBSCRIPTION_STATE_IN_GRACE_PERIOD" where current.state == .active: steps.append(.failed(periodEnd: nil, nextAttempt: nil))
        case "SUBSCRIPTION_STATE_ON_HOLD": steps.append(.held)
        case "SUBSCRIPTION_STATE_EXPIRED" where type != Self.revokedType:
            steps.append(.ended(current.state == .billingRetry || current.state == .gracePeriod ? .billingError : .voluntary))
        default: break
        }
        var said: [String] = []
        var transaction: String?
        var changed = false
        var refused = false
        for step in steps {
            switch try await subscriptions.channelStep(step, channel: Self.channel, subscriptionId: reference, method: Self.channel) {
            case .applied(let detail, _, let recorded):
                said.append(detail)
                transaction = recorded ?? transaction
                changed = true
            case .unchanged(let why, _, _): said.append(why)
            case .refused(let why, _):
                said.append("\(why): refund it in the Play Console")
                refused = true
            case .unknown: break
            }
        }
        if type == Self.revokedType, let latest = try await database.read({ try await Subscriptions.latestPeriod(current.originalTransactionId, in: $0) }) {
            // Refunded in the Play Console: the latest period is taken back, which ends the subscription.
            if let problem = try await channelRecords.revokeGrant(latest, reason: "revoked by Google Play") {
                said.append("revoked by Google Play, but \(latest) was not taken back: \(problem)")
            } else {
                said.append("revoked by Google Play: \(latest) revoked")
                changed = true
            }
            if case .applied = try await subscriptions.channelStep(.ended(.revoked), channel: Self.channel, subscriptionId: reference, method: Self.channel) {
                said.append("the subscription ended")
                changed = true
            }
        }
        return (said.isEmpty ? "Play's state (\(state)) is the store's already" : said.joined(separator: "; "), current.accountId, transaction, changed, refused)
    }
}
