import Foundation
import KioskCore
import SQLKit

/// Moving a subscription between the plans of its group (issue 65), by the App Store's rules
/// (``PlanChange``):
///
/// - **At once** (an upgrade, or a crossgrade between plans of one length): a new period of the
///   new plan starts now and is charged at its price, in the subscription's own chain (same
///   original transaction), and the unused part of the running period is **credited**: a
///   `credit` entry in the ledger on that period, what it was charged × the time left ÷ its
///   length, rounded down. So the ledger still sums to what was really paid, and a later refund of
///   that period pays back only the rest.
/// - **At the renewal** (a downgrade, or a crossgrade to another length): the subscription keeps
///   its plan and records the one it renews as (`pendingProductId`); the renewal worker's next
///   period is of that plan. Asking for the running plan again undoes the wait.
///
/// Either is one write transaction under two compare-and-sets: the account's revision (a purchase
/// or a renewal that committed meanwhile makes this decide again) and the subscription row's
/// version (a renewal step or another change). The new period's idempotency key is the request's
/// (`plan:` + key), so a retried request answers the first and never charges twice, and two
/// different changes at once end with one plan: the second decides again on the first's result.
/// The publisher hears `DID_CHANGE_RENEWAL_PREF` with `UPGRADE` (at once) or `DOWNGRADE` (at the
/// renewal), or none when a waiting change is undone, as from the App Store.
///
/// Only a subscription the store renews itself (the sandbox's) changes here. One a channel renews
/// changes where it renews: Google Play's in Play, and a web one is not yet moved by Kiosk (its
/// Stripe subscription would need a price update with proration).
extension Subscriptions {
    /// Moves the subscription to `request.productId`, at once or at its next renewal.
    /// - Throws: ``StoreError`` `unknown_subscription`, `subscription_expired`, `unknown_product`,
    ///   `not_in_group`, `renews_elsewhere`, `plan_change_waits` (failing to renew),
    ///   `payment_declined` (the sandbox account's charges fail), `idempotency_key_reused`.
    public func changePlan(accountId: String, originalTransactionId: String, _ request: PlanChangeRequest) async throws -> PlanChangeResult {
        try RequestText.check(originalTransactionId, field: "the subscription ID in the path")
        try RequestText.check(request.productId, field: "productId")
        try RequestText.check(request.idempotencyKey, field: "idempotencyKey")
        let result = try await base.turns.run(accountId) {
            for _ in 0..<32 {
                do {
                    if let result = try await attemptChange(accountId: accountId, originalTransactionId: originalTransactionId, request) {
                        return result
                    }
                } catch is ChangeConflict {
                    // The row moved (a renewal, another change) under a change that waits: decided again.
                }
            }
            throw StoreError.subscriptionBusy
        }
        changes.committed(accountId)
        return result
    }

    /// What a change is decided on, read in one transaction.
    private struct Seen {
        var revision: Int64
        var subscription: SubscriptionRecord
        var latestPeriod: TransactionRecord?
        var sameKey: TransactionRecord?
        var clockOffset: Double
        var renewals: SandboxAccountSettings.RenewalOutcome
        var storefront: String?
    }

    private struct ChangeConflict: Error {}

    /// Decides once and commits; nil when the account or the subscription moved meanwhile.
    private func attemptChange(accountId: String, originalTransactionId: String, _ request: PlanChangeRequest) async throws -> PlanChangeResult? {
        let key = "plan:" + request.idempotencyKey
        let seen = try await database.read { db -> Seen in
            guard let account = try await AccountRows(db).find(accountId) else { throw StoreError.unknownAccount(accountId) }
            guard let subscription = try await db.select().column("*").from("subscription")
                .where("originalTransactionId", .equal, originalTransactionId).where("accountId", .equal, accountId)
                .first(decoding: SubscriptionRecord.self)
            else { throw StoreError.unknownSubscription(originalTransactionId) }
            let latest = try await Self.latestPeriod(originalTransactionId, in: db)
            let sameKey = try await TransactionRows(db).list(limit: 1) { $0.where("accountId", .equal, accountId).where("idempotencyKey", .equal, key) }.first
            let sandbox = try await Self.sandbox(accountId, in: db)
            return Seen(revision: account.revision, subscription: subscription, latestPeriod: try await latest.asyncMap { try await TransactionRows(db).find($0) } ?? nil,
                        sameKey: sameKey, clockOffset: sandbox.clockOffset, renewals: sandbox.renewals, storefront: account.storefront)
        }
        let environment = keys.identity.environment
        let now = clock.now(offset: seen.clockOffset)
        if let earlier = seen.sameKey {
            try Payments.KeyedRequest(key: key, productId: request.productId, quantity: 1, method: PaidBy.renewal.rawValue, shownKey: request.idempotencyKey)
                .check(replayOf: earlier)
            return try await replay(earlier, subscription: seen.subscription, now: now)
        }
        var s = seen.subscription
        guard s.state != .expired else { throw StoreError.subscriptionExpired(originalTransactionId) }
        // One a channel renews changes there: Stripe's through its API (``changeOnStripe``), Google
        // Play's in Play, one sold through a publisher's own shop (no secret key) in that shop.
        var stripe: (api: StripeAPI, subscriptionId: String)?
        if let channel = s.channel {
            guard channel == PaidBy.stripe.rawValue, let api = base.channels.stripeAPI, let id = s.channelSubscriptionId else {
                let place = channel == PaidBy.play.rawValue ? "Google Play (Play Store, Payments & subscriptions)" : "the shop it was bought in"
                throw StoreError(.wrongState, code: "renews_elsewhere", message: "this subscription renews through \(place): its plan changes there")
            }
            stripe = (api, id)
        } else {
            // A production store renews nothing itself: a subscription without a channel was given for
            // a period (a code, the operator) and there is no renewal to change or charge to make.
            guard environment == .sandbox, s.autoRenew || s.state == .active else {
                throw StoreError(.wrongState, code: "renewal_not_offered",
                                 message: "this subscription was given for one period and does not renew; subscribe to the plan you want when it ends")
            }
        }
        let products = try await catalog.storeProducts().products
        guard let target = products[request.productId], target.kind == .subscription, target.forSale != false else {
            throw StoreError(.invalidRequest, code: "unknown_product",
                             message: "\(request.productId.prefix(200)) is no subscription plan on sale here; kiosk products lists the plans of each group")
        }
        guard let running = products[s.productId], running.group == target.group else {
            throw StoreError(.invalidRequest, code: "not_in_group",
                             message: "\(target.id) is not a plan of this subscription's group; a subscription moves only between the plans of its group")
        }
        let wall = clock.wallNow()
        var changed = s
        changed.version += 1
        changed.updatedAt = wall
        if let stripe {
            return try await changeOnStripe(s, from: running, to: target, stripe: stripe, storefront: seen.storefront, now: now,
                                            waitingPlan: s.pendingProductId.flatMap { products[$0] })
        }

        // The running plan again: undo a change that waited, or nothing to do.
        if target.id == s.productId || target.id == s.pendingProductId {
            guard target.id == s.productId, let waiting = s.pendingProductId else {
                return PlanChangeResult(subscription: s.info(now: now), change: nil, atOnce: false, transaction: nil, creditedCents: 0,
                                        currency: target.price.currency, message: "nothing changed: the subscription already \(target.id == s.productId ? "is" : "renews as") \(target.id)")
            }
            changed.pendingProductId = nil
            try await writeRenewalPlan(changed, from: s.version, subtype: nil, environment: environment)
            s = changed
            return PlanChangeResult(subscription: s.info(now: now), change: nil, atOnce: false, transaction: nil, creditedCents: 0, currency: target.price.currency,
                                    message: "the change to \(waiting) that waited for the renewal is undone: it renews as \(s.productId)")
        }

        let change = PlanChange(from: running, to: target)
        guard change.atOnce else {
            // The renewal that takes it charges the storefront the subscription was bought in.
            guard target.price(in: s.storefront) != nil else { throw StoreError.notSoldHere(target.id, storefront: s.storefront) }
            changed.pendingProductId = target.id
            try await writeRenewalPlan(changed, from: s.version, subtype: "DOWNGRADE", environment: environment)
            return PlanChangeResult(subscription: changed.info(now: now), change: change.kind, atOnce: false, transaction: nil, creditedCents: 0,
                                    currency: target.price.currency,
                                    message: "\(change.described): \(s.productId) runs until \(Store.day(s.expiresDate)), then it renews as \(target.id)"
                                        + (s.autoRenew ? "" : " if its auto-renew is turned back on"))
        }
        guard s.state == .active, s.expiresDate > now else {
            throw StoreError(.wrongState, code: "plan_change_waits",
                             message: "this subscription's renewal failed and is being retried; it can change plan once it is paid up again")
        }
        guard seen.renewals == .succeed else {
            throw StoreError.paymentDeclined("the charge for \(target.id) was declined (the sandbox account's charges fail); nothing changed")
        }
        return try await changeAtOnce(s, to: target, change: change, seen: seen, key: key, now: now, wall: wall, environment: environment)
    }

    /// An upgrade (or a crossgrade of one length): the new plan's first period charged now, the
    /// old period's unused part credited, the subscription moved; nil when something moved first.
    private func changeAtOnce(
        _ s: SubscriptionRecord, to target: Product, change: PlanChange, seen: Seen, key: String, now: Date, wall: Date, environment: StoreEnvironment
    ) async throws -> PlanChangeResult? {
        let months = target.periodMonths ?? 1
        guard let expires = Calendar.utc.date(byAdding: .month, value: months, to: now) else { return nil }
        var period = TransactionRecord.pending(account: s.accountId, product: target, quantity: 1, method: PaidBy.renewal.rawValue, key: key, at: wall)
        period.status = .purchased
        period.originalTransactionId = s.originalTransactionId
        period.purchaseDate = now
        period.expiresDate = expires
        // The new plan at the price of the account's storefront, with its tax.
        guard let price = target.price(in: seen.storefront) else { throw StoreError.notSoldHere(target.id, storefront: seen.storefront) }
        let charge = base.taxes.charge(cents: try Store.cents(price), currency: price.currency, country: seen.storefront, category: target.taxClass)
        period.amountCents = charge.cents
        period.currency = charge.currency
        period.storefront = seen.storefront
        period.taxBasisPoints = charge.taxBasisPoints
        period.taxCents = charge.taxCents
        period.appAccountToken = s.appAccountToken
        // The unused part of the period paid for, with its share of that period's tax.
        let credit: LedgerEntry? = seen.latestPeriod.flatMap { paid in
            guard let start = paid.purchaseDate, let end = paid.expiresDate, let charged = LedgerEntry.charge(for: paid, at: wall) else { return nil }
            let cents = PlanChange.unusedCents(paidCents: paid.amountCents, periodStart: start, periodEnd: end, now: now)
            guard cents > 0 else { return nil }
            return charged.payingBack(cents, kind: .credit, transactionId: paid.id, reason: Self.creditReason(to: period.id), at: wall)
        }
        // The period left ends now, as the App Store's upgraded transaction does: what is left of it
        // is the credit, so it entitles nothing past the change (its receipt signed again with that end).
        var ended: (record: TransactionRecord, from: Date)?
        if var left = seen.latestPeriod, let end = left.expiresDate, end > now {
            left.expiresDate = now
            left.signedTransaction = try await keys.sign(claims(of: left))
            ended = (left, end)
        }
        period.message = "\(change.kind.rawValue) from \(s.productId)" + (credit.map { "; \(Price.shown(cents: -$0.amountCents, $0.currency)) of its unused period credited" } ?? "")
        period.signedTransaction = try await keys.sign(claims(of: period))
        var moved = s
        moved.productId = target.id
        moved.expiresDate = expires
        moved.dueAt = expires.addingTimeInterval(-seen.clockOffset)
        moved.offerRenewalsLeft = 0
        moved.pendingProductId = nil
        moved.storefront = seen.storefront
        moved.version += 1
        moved.updatedAt = wall
        let written = moved
        let proposed = period
        let leaving = ended
        do {
            let recorded = try await database.write { db -> TransactionRecord in
                guard let advanced = try await AccountRows(db).advance(s.accountId, from: seen.revision, adding: 0) else { throw ChangeConflict() }
                try await AccountRows(db).refuseIfDeleted(s.accountId)
                guard try await SubscriptionRows(db).changePlan(written, from: s.version) else { throw ChangeConflict() }
                if let leaving, try await !TransactionRows(db).endEarly(leaving.record, from: leaving.from) { throw ChangeConflict() }
                var record = proposed
                record.changeSequence = advanced.change
                record = try await TransactionRows(db).insert(record)
                if let charge = LedgerEntry.charge(for: record, at: wall) { try await TransactionRows(db).insertLedger(charge) }
                if let credit { try await TransactionRows(db).insertLedger(credit) }
                try await PlannedRows.announce(StoreNotification(
                    type: StoreNotification.Kind.didChangeRenewalPref, subtype: "UPGRADE", accountId: s.accountId, transactionId: record.id,
                    originalTransactionId: s.originalTransactionId, renewalInfo: RenewalInfo(written, environment: environment)), at: wall, in: db)
                return record
            }
            logger.info("plan changed", metadata: ["subscription": "\(s.originalTransactionId)", "from": "\(s.productId)", "to": "\(target.id)"])
            return PlanChangeResult(subscription: written.info(now: now), change: change.kind, atOnce: true, transaction: recorded.wire,
                                    creditedCents: -(credit?.amountCents ?? 0), currency: credit?.currency ?? target.price.currency,
                                    message: "\(change.described): \(target.id) runs until \(Store.day(expires))"
                                        + (credit.map { "; \(Price.shown(cents: -$0.amountCents, $0.currency)) of \(s.productId)'s unused period credited" } ?? ""))
        } catch is ChangeConflict {
            return nil
        } catch where database.isUniqueViolation(error) {
            // The same request committed meanwhile (its key is taken): the next attempt answers it.
            return nil
        }
    }

    /// A web subscription's change, made on Stripe (``SubscriptionChangeFields``): its item moved to
    /// the new plan's price, at once (Stripe invoices the new period now, the old one's unused part
    /// credited on that invoice) or from the next invoice. The store's row says first which plan
    /// the next paid invoice is for (`pendingProductId`), so the `invoice.paid` that follows (a
    /// `subscription_update` at once, the next `subscription_cycle` otherwise) records a period of
    /// the new plan and moves the row to it; Stripe refusing undoes that. The running plan asked
    /// again moves Stripe's price back and clears the wait.
    /// - Throws: `payment_service` when Stripe refused or could not be reached (nothing changed).
    ///
    /// A change at once that Stripe is invoicing (its plan waiting, a level above) holds the
    /// subscription until its `invoice.paid` lands: another change meanwhile is refused, since
    /// Stripe bills each at-once update on its own. The same change asked again (an answer lost)
    /// is sent again under the same key (the row's version since it was recorded), so Stripe does it once.
    private func changeOnStripe(_ s: SubscriptionRecord, from running: Product, to target: Product, stripe: (api: StripeAPI, subscriptionId: String),
                                storefront: String?, now: Date, waitingPlan: Product?) async throws -> PlanChangeResult {
        let environment = keys.identity.environment
        guard s.state == .active else {
            throw StoreError(.wrongState, code: "plan_change_waits",
                             message: "this subscription's renewal failed and Stripe is retrying it; it can change plan once it is paid up again")
        }
        if let waitingPlan, waitingPlan.id != target.id, PlanChange(from: running, to: waitingPlan).atOnce {
            throw StoreError(.wrongState, code: "plan_change_waits",
                             message: "the change to \(waitingPlan.id) is being invoiced by Stripe; change plan again once its invoice is paid")
        }
        let undo = target.id == s.productId
        if undo, s.pendingProductId == nil {
            return PlanChangeResult(subscription: s.info(now: now), change: nil, atOnce: false, transaction: nil, creditedCents: 0,
                                    currency: target.price.currency, message: "nothing changed: the subscription already is \(target.id)")
        }
        let resend = target.id == s.pendingProductId
        let change = PlanChange(from: running, to: target)
        let atOnce = !undo && change.atOnce
        guard let price = target.price(in: storefront), let cents = Price.cents(price.amount) else {
            throw StoreError.notSoldHere(target.id, storefront: storefront)
        }
        // With Stripe's automatic tax the price is sent as it is (Stripe adds or finds the tax).
        let charge = base.channels.stripeAutomaticTax ? Charge(cents: cents, currency: price.currency, country: storefront, taxBasisPoints: nil, taxCents: 0)
            : base.taxes.charge(cents: cents, currency: price.currency, country: storefront, category: target.taxClass)
        // The wait first: an invoice that comes before Stripe's answer is already the new plan's.
        var recorded = s
        if !resend {
            recorded.pendingProductId = undo ? nil : target.id
            recorded.version += 1
            recorded.updatedAt = clock.wallNow()
            let waiting = recorded
            guard try await database.write({ try await SubscriptionRows($0).setRenewalPlan(waiting, from: s.version) }) else { throw ChangeConflict() }
        }
        let written = recorded
        do {
            let item = try await stripe.api.subscriptionItem(stripe.subscriptionId)
            let fields = SubscriptionChangeFields.fields(item: item, plan: target, charged: (charge.cents, charge.currency), atOnce: atOnce)
            try await stripe.api.changeSubscriptionPrice(stripe.subscriptionId, fields, idempotencyKey: "kiosk-plan-\(s.originalTransactionId)-\(written.version)-\(target.id)")
        } catch let refusal as StripeAPI.Refusal {
            // Refused: nothing changed on Stripe, nor here (unless the row moved on meanwhile, which keeps its own).
            var back = written
            back.pendingProductId = resend ? nil : s.pendingProductId
            back.version += 1
            let reverted = back
            _ = try? await database.write { try await SubscriptionRows($0).setRenewalPlan(reverted, from: written.version) }
            logger.warning("Stripe refused to change a subscription's plan", metadata: ["subscription": "\(stripe.subscriptionId)", "stripe": "\(refusal)"])
            throw StoreError.paymentService("the payment service refused to change this subscription's plan; nothing changed, and the store's operator can see why")
        } catch {
            // Out of reach, or no answer: Stripe may have made it. The wait stays, and asking again
            // sends the same request under the same key.
            throw StoreError.paymentService("Stripe could not be reached to change the plan; the change is recorded: ask for it again to confirm it", retryAfter: 10)
        }
        if resend {
            return PlanChangeResult(subscription: written.info(now: now), change: change.kind, atOnce: atOnce, transaction: nil, creditedCents: 0,
                                    currency: charge.currency, message: "the change to \(target.id) was sent to Stripe again; it renews as \(target.id)")
        }
        let wall = clock.wallNow()
        try await database.write { db in
            try await PlannedRows.announce(StoreNotification(
                type: StoreNotification.Kind.didChangeRenewalPref, subtype: undo ? nil : atOnce ? "UPGRADE" : "DOWNGRADE", accountId: s.accountId,
                transactionId: try await Self.latestPeriod(s.originalTransactionId, in: db), originalTransactionId: s.originalTransactionId,
                renewalInfo: RenewalInfo(written, environment: environment)), at: wall, in: db)
        }
        logger.info("plan changed on Stripe", metadata: ["subscription": "\(s.originalTransactionId)", "to": "\(target.id)", "atOnce": "\(atOnce)"])
        let message = undo ? "the change that waited for the renewal is undone: it renews as \(s.productId)"
            : atOnce ? "\(change.described): Stripe invoices \(target.id) now, the unused part of \(s.productId)'s period taken off that invoice; the new period is in the library once it is paid"
            : "\(change.described): \(s.productId) runs until \(Store.day(s.expiresDate)), then Stripe renews it as \(target.id)"
        return PlanChangeResult(subscription: written.info(now: now), change: undo ? nil : change.kind, atOnce: atOnce, transaction: nil, creditedCents: 0,
                                currency: charge.currency, message: message)
    }

    /// A change that waits for the renewal (or the undoing of one), announced.
    private func writeRenewalPlan(_ changed: SubscriptionRecord, from version: Int64, subtype: String?, environment: StoreEnvironment) async throws {
        let wall = clock.wallNow()
        let done = try await database.write { db -> Bool in
            guard try await SubscriptionRows(db).setRenewalPlan(changed, from: version) else { return false }
            try await PlannedRows.announce(StoreNotification(
                type: StoreNotification.Kind.didChangeRenewalPref, subtype: subtype, accountId: changed.accountId,
                transactionId: try await Self.latestPeriod(changed.originalTransactionId, in: db), originalTransactionId: changed.originalTransactionId,
                renewalInfo: RenewalInfo(changed, environment: environment)), at: wall, in: db)
            return true
        }
        if !done { throw ChangeConflict() }
    }

    /// The answer to a change asked again with its key: the period it made, and what it credited.
    private func replay(_ earlier: TransactionRecord, subscription: SubscriptionRecord, now: Date) async throws -> PlanChangeResult {
        let credit = try await database.read { db in
            try await TransactionRows(db).ledger {
                $0.where("accountId", .equal, earlier.accountId).where("kind", .equal, LedgerEntry.Kind.credit.rawValue)
                    .where("reason", .equal, Self.creditReason(to: earlier.id))
            }.first
        }
        let signed = try await receipts.withCurrentReceipts([earlier])[0]
        return PlanChangeResult(subscription: subscription.info(now: now), change: nil, atOnce: true, transaction: signed.wire,
                                creditedCents: -(credit?.amountCents ?? 0), currency: credit?.currency ?? earlier.currency,
                                message: "this change was made already: \(earlier.message ?? earlier.productId)")
    }

    /// A credit's reason names the period it went to, so a replay finds it.
    private static func creditReason(to transactionId: String) -> String {
        "unused part credited on a change of plan (\(transactionId))"
    }
}

private extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
