import Foundation
import KioskCore
import SQLKit

/// Renewals: what the renewal worker (`PeriodicService.renewals` in the server) does on every instance.
///
/// A due subscription is first **claimed**: one statement marks up to `limit` due rows with this
/// instance's name and a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two instances claim
/// different rows and never wait on each other; SQLite has one writer). Each claimed row is then
/// decided (renew, fail, leave grace, expire), its receipt signed outside any transaction, and
/// committed in **one** transaction with everything the step changes: the subscription's row
/// (compare-and-set on its `version`), the new transaction, its charge, the account's revision,
/// the grace window and the notification. A renewal's idempotency key names its period, so the
/// unique key refuses a second renewal of one period whatever happens. An instance killed
/// between the claim and the commit leaves nothing written; its lease (``renewalLease``, 30 s)
/// lapses and another (or the same, restarted) takes the row again.
extension Subscriptions {
    /// Claims the subscriptions due now and takes each one step (several rounds, until none is
    /// due or claimable, or `stopping` says the server is shutting down).
    /// - Returns: how many steps were committed.
    @discardableResult
    public func renewDue(limit: Int = 200, stopping: @Sendable () -> Bool = { false }) async throws -> Int {
        var total = 0
        while !stopping() {
            let claimed = try await claimDue(limit: limit)
            if claimed.isEmpty { return total }
            let sandboxes = try await sandboxes(of: Set(claimed.map(\.accountId)))
            let done = try await withThrowingTaskGroup(of: Bool.self) { group in
                for subscription in claimed {
                    let sandbox = sandboxes[subscription.accountId] ?? .defaults(subscription.accountId)
                    group.addTask { try await self.step(subscription, sandbox: sandbox) }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            total += done
            if done == 0 { return total }
        }
        return total
    }

    /// Marks up to `limit` due, unclaimed subscriptions as this instance's for ``renewalLease``.
    func claimDue(limit: Int) async throws -> [SubscriptionRecord] {
        let now = clock.now()
        let wall = clock.wallNow()
        let lease = wall.addingTimeInterval(renewalLease)
        let skipLocked = database.engine == .postgres
        let instance = self.instance
        return try await database.statement { db in
            try await SubscriptionRows(db).claimDue(for: instance, until: lease, now: now, wall: wall, limit: limit, skipLocked: skipLocked)
        }
    }

    /// The sandbox settings of the accounts named, read once for a round of steps (an account
    /// without a row of its own has the defaults).
    func sandboxes(of accountIds: Set<String>) async throws -> [String: SandboxAccount] {
        let rows = try await database.read { db in
            try await db.select().column("*").from("sandboxAccount").where("accountId", .in, Array(accountIds)).all(decoding: SandboxAccount.self)
        }
        return Dictionary(rows.map { ($0.accountId, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// What one step of a subscription's life comes to.
    struct RenewalStep: Sendable {
        var subscription: SubscriptionRecord
        /// The new period, when it renewed.
        var renewal: TransactionRecord?
        var notification: StoreNotification?
        /// A grace window opened (`startsAt`, `endsAt`), or the open one closed at `closesGraceAt`.
        var opensGrace: (startsAt: Date, endsAt: Date)?
        var closesGraceAt: Date?
    }

    /// Decides and commits one step of a claimed subscription.
    /// - Returns: whether it committed (false when another instance got there first).
    func step(_ claimed: SubscriptionRecord, sandbox: SandboxAccount) async throws -> Bool {
        // The plan it renews as: the one a downgrade waited for, unless that left the catalog.
        let products = try await catalog.storeProducts().products
        let product = products[claimed.renewalProductId] ?? products[claimed.productId]
        guard let decided = decide(claimed, product: product, sandbox: sandbox) else { return false }
        let step = try await signed(decided)
        try await beforeRenewalCommit?(claimed.originalTransactionId)
        return try await commit(step, claimedVersion: claimed.version, instance: instance)
    }

    /// The step with its new period's receipt signed (outside any transaction) and named by its
    /// notification; a step without a new period as it is.
    func signed(_ step: RenewalStep) async throws -> RenewalStep {
        guard var renewal = step.renewal else { return step }
        var signed = step
        renewal.signedTransaction = try await keys.sign(claims(of: renewal))
        signed.renewal = renewal
        signed.notification?.transactionId = renewal.id
        return signed
    }

    /// Commits a decided step under the compare-and-set on the subscription's `claimedVersion`
    /// and its claim by `instance` ("" for a channel's step, which claims nothing).
    /// - Returns: whether it committed (false when the row moved on meanwhile).
    func commit(_ decided: RenewalStep, claimedVersion: Int64, instance: String) async throws -> Bool {
        let claimed = decided.subscription
        do {
            let committed = if database.engine == .postgres {
                try await database.statement { db in
                    let statement = RecordRenewalStep(step: decided, claimedVersion: claimedVersion, instance: instance,
                                                      renewalInfo: try decided.notification?.renewalInfoJSON(), now: clock.wallNow())
                    return try await db.rows(statement).count == 1
                }
            } else {
                try await commitOneByOne(decided, claimedVersion: claimedVersion, instance: instance)
            }
            if committed, let renewal = decided.renewal { changes.committed(renewal.accountId) }
            return committed
        } catch where database.isUniqueViolation(error) {
            // The period was renewed already (its key is taken): the claim was stale.
            logger.warning("a renewal found its period renewed already", metadata: ["subscription": "\(claimed.originalTransactionId)"])
            return false
        }
    }

    /// SQLite: the step's plan (``RecordRenewalStep``) a statement at a time, in one transaction.
    /// - Returns: false when the claim was lost (the subscription moved on, or another instance has it).
    private func commitOneByOne(_ decided: RenewalStep, claimedVersion: Int64, instance: String) async throws -> Bool {
        let traceParent = TraceParent.current()
        do {
            return try await database.write { db in
                let plan = RecordRenewalStep.plan(
                    decided, claimedVersion: claimedVersion, instance: instance, renewalInfo: try decided.notification?.renewalInfoJSON(),
                    now: clock.wallNow(), slot: SalesSlot.of(decided.subscription.accountId, in: db), traceParent: traceParent)
                guard try await db.run(plan) != nil else { throw LostClaim() }
                return true
            }
        } catch is LostClaim {
            return false
        }
    }

    private struct LostClaim: Error {}

    /// The next step of a due subscription, in the account's time; nil when nothing is due.
    func decide(_ current: SubscriptionRecord, product: Product?, sandbox: SandboxAccount) -> RenewalStep? {
        let now = clock.now(offset: sandbox.clockOffset)
        guard let at = Self.stepInstant(of: current, now: now) else { return nil }
        var draft = StepDraft(current: current, clockOffset: sandbox.clockOffset, environment: keys.identity.environment, wallNow: clock.wallNow(),
                              taxes: base.taxes)
        if !current.autoRenew {
            // Off while paid up: it ends at the period's end. Off while failing: nothing more is tried.
            if current.state == .active {
                guard at <= now else { return nil }
                return draft.expire(.voluntary, at: at)
            }
            return draft.expire(.voluntary, at: min(at, now))
        }
        guard at <= now else { return nil }
        guard let product, product.kind == .subscription, product.price(in: current.storefront) != nil else { return draft.expire(.productRemoved, at: at) }
        if current.state == .gracePeriod, let graceEnd = current.graceEndsAt, graceEnd <= at, (current.retryAt ?? .distantFuture) > graceEnd {
            return draft.graceOver()
        }
        if sandbox.renewals == .succeed { return draft.renewed(product, at: at) }
        return draft.failed(product, at: at)
    }

    /// The instant a subscription's next step happens at: the scheduled one, so that a clock moved
    /// far ahead catches up period by period exactly as if the worker had been there each time.
    /// Nil for an expired subscription, which has no next step.
    static func stepInstant(of current: SubscriptionRecord, now: Date) -> Date? {
        switch current.state {
        case .active: return current.expiresDate
        case .gracePeriod:
            let graceEnd = current.graceEndsAt ?? now
            return min(graceEnd, current.retryAt ?? graceEnd)
        case .billingRetry: return current.retryAt ?? now
        case .expired: return nil
        }
    }
}

/// A subscription's next state as one step decides it (its version moved on), and the step it
/// comes to: each method is one of the outcomes ``Subscriptions/decide(_:product:sandbox:)`` picks.
struct StepDraft {
    let current: SubscriptionRecord
    var s: SubscriptionRecord
    let clockOffset: Double
    let environment: StoreEnvironment
    let wallNow: Date
    /// The tax table a renewal's charge is taxed by.
    let taxes: TaxTable

    init(current: SubscriptionRecord, clockOffset: Double, environment: StoreEnvironment, wallNow: Date, taxes: TaxTable = .none) {
        self.taxes = taxes
        self.current = current
        self.s = current
        self.s.version += 1
        self.s.updatedAt = wallNow
        self.clockOffset = clockOffset
        self.environment = environment
        self.wallNow = wallNow
    }

    /// A time on the account's sandbox clock, as a due time on the store's.
    func due(_ date: Date?) -> Date? { date.map { $0.addingTimeInterval(-clockOffset) } }

    func notify(_ type: String, _ subtype: String?) -> StoreNotification {
        StoreNotification(type: type, subtype: subtype, accountId: s.accountId, transactionId: nil,
                          originalTransactionId: s.originalTransactionId, renewalInfo: RenewalInfo(s, environment: environment))
    }

    mutating func expire(_ reason: SubscriptionExpirationReason, at end: Date) -> Subscriptions.RenewalStep {
        let closes = s.state == .gracePeriod ? min(end, s.graceEndsAt ?? end) : nil
        s.state = .expired
        s.expirationReason = reason
        s.dueAt = nil
        s.retryAt = nil
        s.graceEndsAt = nil
        let subtype: String? = switch reason {
        case .voluntary: "VOLUNTARY"
        case .billingError: "BILLING_RETRY"
        case .productRemoved: "PRODUCT_NOT_FOR_SALE"
        case .revoked: nil
        }
        return Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.expired, subtype), closesGraceAt: closes)
    }

    /// Grace is over; retries go on without access.
    mutating func graceOver() -> Subscriptions.RenewalStep {
        s.state = .billingRetry
        s.graceEndsAt = nil
        s.dueAt = due(s.retryAt)
        return Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.gracePeriodExpired, nil))
    }

    /// The sandbox's pretend charge succeeded: a new period from the old one's end (or, recovering
    /// from failed charges, from the step's instant).
    mutating func renewed(_ product: Product, at: Date) -> Subscriptions.RenewalStep? {
        let recovering = current.state != .active
        let start = recovering ? at : current.expiresDate
        // The storefront it was bought in: its price there (a storefront the product no longer
        // lists a price for is decided by ``Subscriptions/decide(_:product:sandbox:)``: it ends).
        guard let expires = Calendar.utc.date(byAdding: .month, value: product.periodMonths ?? 1, to: start),
              let price = product.price(in: current.storefront), var cents = try? Store.cents(price), let normal = try? Store.cents(product.price) else {
            return nil
        }
        // An introductory offer paid as it goes: its price for the renewals it still covers.
        let offer = product.introductoryOffer.flatMap { $0.type == .payAsYouGo && current.offerRenewalsLeft > 0 && product.id == current.productId ? $0 : nil }
        if let offer { cents = offer.firstChargeCents(local: cents, normal: normal) }
        let charge = taxes.charge(cents: cents, currency: price.currency, country: current.storefront, category: product.taxClass)
        let renewal = TransactionRecord(
            sequence: nil, id: Store.newTransactionID(), accountId: s.accountId, productId: product.id, kind: .subscription, quantity: 1,
            originalTransactionId: s.originalTransactionId, purchaseDate: start, expiresDate: expires, status: .purchased,
            paymentMethod: PaidBy.renewal.rawValue, idempotencyKey: "renewal:\(s.originalTransactionId):\(RenewalInfo.milliseconds(start))",
            amountCents: charge.cents, currency: charge.currency, creditsGranted: 0, creditsSpent: 0, signedTransaction: nil,
            message: nil, finishedAt: nil, createdAt: wallNow, revokedAt: nil, revocationReason: nil, requestedMethod: PaidBy.renewal.rawValue,
            appAccountToken: s.appAccountToken, offerType: offer?.type.rawValue, offerPeriod: offer?.isoPeriod(periodMonths: product.periodMonths ?? 1),
            storefront: current.storefront, taxBasisPoints: charge.taxBasisPoints, taxCents: charge.taxCents)
        s.offerRenewalsLeft = offer == nil ? 0 : current.offerRenewalsLeft - 1
        // A change of plan that waited for this renewal takes effect with it.
        s.productId = product.id
        s.pendingProductId = nil
        let closes = current.state == .gracePeriod ? at : nil
        s.state = .active
        s.expiresDate = expires
        s.dueAt = due(expires)
        s.retryAt = nil
        s.graceEndsAt = nil
        s.failedAttempts = 0
        s.expirationReason = nil
        return Subscriptions.RenewalStep(subscription: s, renewal: renewal,
                                         notification: notify(StoreNotification.Kind.didRenew, recovering ? "BILLING_RECOVERY" : nil), closesGraceAt: closes)
    }

    /// The charge failed: a retry scheduled (with a grace window, when the product gives one and
    /// the period was paid up), or, when retries are used up, the end.
    mutating func failed(_ product: Product, at: Date) -> Subscriptions.RenewalStep {
        s.failedAttempts = current.failedAttempts + 1
        guard let retry = RenewalSchedule.retry(after: s.failedAttempts, periodEnd: current.expiresDate) else {
            return expire(.billingError, at: at)
        }
        s.retryAt = retry
        if current.state == .active {
            if let graceEnd = RenewalSchedule.graceEnd(days: product.gracePeriodDays, periodEnd: current.expiresDate) {
                s.state = .gracePeriod
                s.graceEndsAt = graceEnd
                s.dueAt = due(min(retry, graceEnd))
                var step = Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.didFailToRenew, "GRACE_PERIOD"))
                step.opensGrace = (current.expiresDate, graceEnd)
                return step
            }
            s.state = .billingRetry
            s.dueAt = due(retry)
            return Subscriptions.RenewalStep(subscription: s, notification: notify(StoreNotification.Kind.didFailToRenew, nil))
        }
        // A later retry failed too: App Store says nothing until the state changes.
        if s.state == .gracePeriod, let graceEnd = s.graceEndsAt {
            s.dueAt = due(min(retry, graceEnd))
        } else {
            s.dueAt = due(retry)
        }
        return Subscriptions.RenewalStep(subscription: s)
    }
}
