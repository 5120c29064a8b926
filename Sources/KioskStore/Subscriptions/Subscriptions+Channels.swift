import Foundation
import KioskCore
import SQLKit

/// What a channel that renews a subscription itself (Stripe Billing, Google Play) says happened to
/// it. Each is one step of the subscription's life, decided against its row as it stands and
/// committed as the renewal worker's steps are (``RecordRenewalStep``, a compare-and-set on the
/// row's version), so a channel's events and a reader's auto-renew change never overwrite each other.
enum ChannelSubscriptionEvent: Sendable {
    /// A period was paid for, from `start` to `end` (the channel's own dates); `key` names the
    /// payment once (`stripe:<invoice>`), so the same payment told twice is one period.
    /// `tax`: what the channel charged as tax itself (Stripe's `automatic_tax`), else nil.
    /// `plan`: the plan the channel says it billed (Stripe's invoice names it in its metadata), when
    /// it is one of the subscription's group; else the plan the store expects next.
    case paid(start: Date, end: Date, key: String, amountCents: Int, currency: String, tax: ChannelTax? = nil, plan: String? = nil)
    /// A renewal's charge failed for the period ending at `periodEnd`; the channel tries again at
    /// `nextAttempt` (nil: it gave up, and its end comes as ``ended(_:)``).
    case failed(periodEnd: Date?, nextAttempt: Date?)
    /// Auto-renew turned on or off, as of `at`, the channel's time of the change.
    case autoRenew(Bool, at: Date)
    /// The channel ended it.
    case ended(SubscriptionExpirationReason)
    /// Grace is over and the channel still tries to charge (Play's account hold): no access.
    case held
}

/// What a channel's event came to for its subscription.
enum ChannelStepOutcome: Sendable, Equatable {
    /// The store has no subscription the channel knows by that id.
    case unknown
    /// Nothing changed, and why (told before, older than what the store has, or moot).
    case unchanged(String, accountId: String, transactionId: String?)
    /// The step committed: the period it recorded, if any, and what it did.
    case applied(String, accountId: String, transactionId: String?)
    /// A payment not recorded, and why: the account is deleted or disabled (the operator refunds it).
    case refused(String, accountId: String)
}

extension Subscriptions {
    /// Applies a channel's event to the subscription it knows as `subscriptionId`: decided on the
    /// row as read, committed only if the row is still at that version, else read and decided again.
    /// - Parameter method: the channel as the new period's payment method (`stripe`, `play`).
    /// - Throws: ``StoreError/subscriptionBusy`` when the row kept moving under it (try again).
    func channelStep(_ event: ChannelSubscriptionEvent, channel: String, subscriptionId: String, method: String) async throws -> ChannelStepOutcome {
        for _ in 0..<8 {
            guard let current = try await database.read({ try await SubscriptionRows($0).find(channel: channel, subscriptionId: subscriptionId) }) else {
                return .unknown
            }
            if case .paid(_, _, let key, _, _, _, _) = event {
                if let recorded = try await period(key: key, accountId: current.accountId) {
                    return .unchanged("that payment was recorded before (\(recorded))", accountId: current.accountId, transactionId: recorded)
                }
                if try await database.read { try await AccountRows($0).isClosed(current.accountId) } {
                    // Nobody can use the period: nothing is granted, and the operator refunds it.
                    return .refused("paid for an account that is deleted or disabled; nothing was granted", accountId: current.accountId)
                }
            }
            let products = try await catalog.storeProducts().products
            let product = products[current.productId]
            // The billed plan counts only when it is a plan of this subscription's group.
            var event = event
            if case let .paid(start, end, key, amount, currency, tax, plan?) = event,
               products[plan]?.kind != .subscription || products[plan]?.group != product?.group {
                event = .paid(start: start, end: end, key: key, amountCents: amount, currency: currency, tax: tax, plan: nil)
            }
            var draft = StepDraft(current: current, clockOffset: 0, environment: keys.identity.environment, wallNow: clock.wallNow(), taxes: base.taxes)
            var step: RenewalStep
            let detail: String
            switch draft.channel(event, product: product, method: method) {
            case .unchanged(let why): return .unchanged(why, accountId: current.accountId, transactionId: nil)
            case .step(let decided, let said): (step, detail) = (decided, said)
            }
            step = try await signed(step)
            if try await commit(step, claimedVersion: current.version, instance: "") {
                return .applied(detail, accountId: current.accountId, transactionId: step.renewal?.id)
            }
            // The row moved (another event, the reader's auto-renew change, a refund): decided again.
        }
        throw StoreError.subscriptionBusy
    }

    /// The period a channel's payment `key` recorded, if it was.
    private func period(key: String, accountId: String) async throws -> String? {
        struct Row: Decodable { var id: String }
        return try await database.read { db in
            try await db.select().column("id").from("storeTransaction").where("accountId", .equal, accountId)
                .where("idempotencyKey", .equal, key).first(decoding: Row.self)?.id
        }
    }
}

/// A channel's decision: a step to commit and what it does, or why nothing changes.
enum ChannelDecision {
    case step(Subscriptions.RenewalStep, String)
    case unchanged(String)
}

extension StepDraft {
    /// The step a channel's event takes from the subscription as it stands. The channel is the
    /// authority on its own subscription, but its events come late, twice and out of order: a
    /// period paid never moves the end back, a failure of a period paid since changes nothing, an
    /// older auto-renew change than the one applied changes nothing, and an ended subscription
    /// only records what was paid.
    mutating func channel(_ event: ChannelSubscriptionEvent, product: Product?, method: String) -> ChannelDecision {
        switch event {
        case let .paid(start, end, key, amountCents, currency, channelTax, billed):
            // The plan the channel billed; else the one a change waited for (at once on Stripe, or
            // at this renewal), else the running one.
            let paidPlan = billed ?? s.renewalProductId
            var renewal = TransactionRecord(
                sequence: nil, id: Store.newTransactionID(), accountId: s.accountId, productId: paidPlan, kind: .subscription, quantity: 1,
                originalTransactionId: s.originalTransactionId, purchaseDate: start, expiresDate: end, status: .purchased,
                paymentMethod: method, idempotencyKey: key, amountCents: amountCents, currency: currency, creditsGranted: 0, creditsSpent: 0,
                signedTransaction: nil, message: nil, finishedAt: nil, createdAt: wallNow, revokedAt: nil, revocationReason: nil,
                requestedMethod: method, appAccountToken: s.appAccountToken)
            // The tax inside what the web charged, by the storefront it was bought in (Google Play
            // collects its own: none is recorded).
            renewal.storefront = s.storefront
            if let channelTax {
                channelTax.record(in: &renewal, fallback: s.storefront)
            } else if method == PaidBy.stripe.rawValue, let country = s.storefront, let entry = taxes.countries[country],
               let rate = entry.rates[product?.taxClass ?? .periodical] ?? entry.rates[.standard] {
                renewal.taxBasisPoints = rate
                renewal.taxCents = TaxTable.part(of: amountCents, rate: rate)
            }
            // Ended by the channel (cancelled, given up): what was paid is recorded, the state stays.
            // Ended by a refund of its latest period: a later period paid brings it back.
            let endedForGood = current.state == .expired && current.expirationReason != .revoked
            guard end > current.expiresDate, !endedForGood else {
                return .step(Subscriptions.RenewalStep(subscription: s, renewal: renewal),
                             "recorded the period paid until \(end.formatted(.iso8601)); the subscription \(endedForGood ? "had ended" : "runs later already") and stays as it is")
            }
            let recovering = current.state != .active
            s.productId = paidPlan
            // A change that waited is done once its plan is paid for (or when nothing says which was).
            if billed == nil || billed == current.pendingProductId { s.pendingProductId = nil }
            s.state = .active
            s.expiresDate = end
            s.retryAt = nil
            s.graceEndsAt = nil
            s.failedAttempts = 0
            s.expirationReason = nil
            return .step(Subscriptions.RenewalStep(subscription: s, renewal: renewal,
                                                   notification: notify(StoreNotification.Kind.didRenew, recovering ? "BILLING_RECOVERY" : nil),
                                                   closesGraceAt: current.state == .gracePeriod ? wallNow : nil),
                         "renewed until \(end.formatted(.iso8601))")
        case let .failed(periodEnd, nextAttempt):
            guard current.state != .expired else { return .unchanged("the subscription has ended") }
            if let periodEnd, periodEnd <= current.expiresDate {
                return .unchanged("that period is paid for already")
            }
            s.failedAttempts = current.failedAttempts + 1
            s.retryAt = nextAttempt
            guard current.state == .active else {
                // Failing already: only the next attempt moves (App Store says nothing until the state changes).
                return .step(Subscriptions.RenewalStep(subscription: s), "failed again; the next attempt is \(nextAttempt.map { $0.formatted(.iso8601) } ?? "none")")
            }
            if let graceEnd = RenewalSchedule.graceEnd(days: product?.gracePeriodDays, periodEnd: current.expiresDate) {
                s.state = .gracePeriod
                s.graceEndsAt = graceEnd
                var step = Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.didFailToRenew, "GRACE_PERIOD"))
                step.opensGrace = (current.expiresDate, graceEnd)
                return .step(step, "the renewal's charge failed: in grace until \(graceEnd.formatted(.iso8601))")
            }
            s.state = .billingRetry
            return .step(Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.didFailToRenew, nil)),
                         "the renewal's charge failed: in billing retry")
        case let .autoRenew(on, at):
            guard current.state != .expired else { return .unchanged("the subscription has ended") }
            if let applied = current.channelUpdatedAt, at < applied {
                return .unchanged("an older change than the one applied (\(applied.formatted(.iso8601)))")
            }
            s.channelUpdatedAt = at
            guard current.autoRenew != on else {
                return .step(Subscriptions.RenewalStep(subscription: s), "auto-renew was \(on ? "on" : "off") already")
            }
            s.autoRenew = on
            return .step(Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.didChangeRenewalStatus,
                                                                                        on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED")),
                         "auto-renew turned \(on ? "on" : "off")")
        case .held:
            guard current.state != .expired, current.state != .billingRetry else { return .unchanged("the subscription is \(current.state.rawValue) already") }
            let wasInGrace = current.state == .gracePeriod
            s.state = .billingRetry
            s.graceEndsAt = nil
            s.failedAttempts = max(1, current.failedAttempts)
            return .step(Subscriptions.RenewalStep(subscription: s, notification: wasInGrace ? notify(StoreNotification.Kind.gracePeriodExpired, nil)
                                                       : notify(StoreNotification.Kind.didFailToRenew, nil),
                                                   closesGraceAt: wasInGrace ? wallNow : nil),
                         "on hold: the renewal's charge failed and access stops until it is paid")
        case .ended(let reason):
            guard current.state != .expired else { return .unchanged("the subscription had ended") }
            s.autoRenew = false
            let step = expire(reason, at: wallNow)
            return .step(step, "ended (\(reason.rawValue))")
        }
    }
}
