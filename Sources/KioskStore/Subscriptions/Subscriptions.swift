import Foundation
import KioskCore
import SQLKit

/// A subscription's life as the reader and the operator change it: the list with each one's
/// state, auto-renew off and on, and the sandbox settings of an account (its renewals' outcome
/// and its clock); and the renewals worker (``renewDue(limit:stopping:)``).
public struct Subscriptions: StoreOwner {
    let base: StoreBase

    /// Every subscription of the account with its state, newest first.
    public func list(accountId: String) async throws -> SubscriptionList {
        let now = try await accountNow(accountId)
        let (records, graces) = try await database.read { db in
            let records = try await db.select().column("*").from("subscription").where("accountId", .equal, accountId)
                .orderBy("updatedAt", .descending).all(decoding: SubscriptionRecord.self)
            let graces = try await db.select().columns("originalTransactionId", "startsAt", "endsAt").from("subscriptionGrace")
                .where("accountId", .equal, accountId).orderBy("startsAt").all(decoding: GraceRow.self)
            return (records, graces)
        }
        let windows = Dictionary(grouping: graces, by: \.originalTransactionId)
        return SubscriptionList(subscriptions: records.map { record in
            var info = record.info(now: now)
            info.graceWindows = (windows[record.originalTransactionId] ?? []).map { GraceWindow(startsAt: $0.startsAt, endsAt: $0.endsAt) }
            return info
        }, now: now)
    }

    /// Turns auto-renew off (`cancel`) or back on (`resume`). Off, the subscription ends at its
    /// period's end (or at once, when it is failing to renew); on again before that, it renews.
    /// - Throws: ``StoreError`` `unknown_subscription`; `subscription_expired` to resume one that ended.
    public func setAutoRenew(accountId: String, originalTransactionId: String, on: Bool) async throws -> SubscriptionInfo {
        try RequestText.check(originalTransactionId, field: "the subscription ID in the path")
        // In the account's turn (this process): two changes at once (a double click on cancel and
        // resume) reach the channel and the store in the same order, so both end the same.
        return try await base.turns.run(accountId) {
            try await changeAutoRenew(accountId: accountId, originalTransactionId: originalTransactionId, on: on)
        }
    }

    private func changeAutoRenew(accountId: String, originalTransactionId: String, on: Bool) async throws -> SubscriptionInfo {
        let environment = keys.identity.environment
        let clock = self.clock
        let renewedBy = try await askChannel(accountId: accountId, originalTransactionId: originalTransactionId, on: on)
        return try await database.write { db in
            guard let record = try await db.select().column("*").from("subscription")
                .where("originalTransactionId", .equal, originalTransactionId).where("accountId", .equal, accountId)
                .for(.update).first(decoding: SubscriptionRecord.self)
            else {
                throw StoreError.unknownSubscription(originalTransactionId)
            }
            let sandbox = try await Self.sandbox(accountId, in: db)
            let now = clock.now(offset: sandbox.clockOffset)
            guard record.state != .expired else {
                if on { throw StoreError.subscriptionExpired(originalTransactionId) }
                return record.info(now: now)
            }
            guard record.autoRenew != on else { return record.info(now: now) }
            // A production store renews nothing itself (``Payments``' start of a subscription): turned
            // on, it would promise a renewal nobody makes.
            if on, environment != .sandbox, renewedBy == nil { throw StoreError.renewalNotOffered(originalTransactionId) }
            var changed = record
            changed.autoRenew = on
            changed.version += 1
            changed.updatedAt = clock.wallNow()
            // Failing to renew with auto-renew off: nothing more will be tried, so it ends now (a
            // channel's subscription ends when that channel says so).
            if !on, record.state != .active, record.channel == nil {
                changed.dueAt = clock.now()
            }
            let written = changed
            guard try await SubscriptionRows(db).setAutoRenew(written, from: record.version) else { throw StoreError.subscriptionBusy }
            try await PlannedRows.announce(StoreNotification(
                type: StoreNotification.Kind.didChangeRenewalStatus, subtype: on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED",
                accountId: accountId, transactionId: try await Self.latestPeriod(originalTransactionId, in: db),
                originalTransactionId: originalTransactionId, renewalInfo: RenewalInfo(written, environment: environment)), at: clock.wallNow(), in: db)
            return written.info(now: now)
        }
    }

    /// A subscription a channel renews is changed there first, so that it stops (or goes on)
    /// charging: Stripe is asked for `cancel_at_period_end`, and the store's row follows once it
    /// answered (its `customer.subscription.updated` then changes nothing). Nothing is asked of a
    /// subscription the store renews itself, or one that has ended.
    /// - Returns: the channel that renews it, nil when the store does.
    /// - Throws: `renews_elsewhere` for one the store cannot change from here (Google Play's, or
    ///   Stripe's through a publisher's own shop); `payment_service` when Stripe refused or could not be reached.
    private func askChannel(accountId: String, originalTransactionId: String, on: Bool) async throws -> String? {
        guard let record = try await database.read({ db in
            try await db.select().column("*").from("subscription").where("originalTransactionId", .equal, originalTransactionId)
                .where("accountId", .equal, accountId).first(decoding: SubscriptionRecord.self)
        }), let channel = record.channel, let subscriptionId = record.channelSubscriptionId else { return nil }
        // Asked even when the row says so already: the row may be ahead of Stripe (an answer lost)
        // or behind it, and the same request changes nothing there.
        guard record.state != .expired else { return channel }
        guard channel == PaidBy.stripe.rawValue, let stripe = base.channels.stripeAPI else {
            let place = channel == PaidBy.play.rawValue ? "Google Play (Play Store, Payments & subscriptions)" : "the shop it was bought in"
            throw StoreError(.wrongState, code: "renews_elsewhere", message: "this subscription renews through \(place): turn its auto-renew \(on ? "on" : "off") there")
        }
        do {
            try await stripe.setCancelAtPeriodEnd(subscriptionId, !on, idempotencyKey: "kiosk-renewal-\(originalTransactionId)-\(record.version)-\(on ? "on" : "off")")
        } catch let refusal as StripeAPI.Refusal where refusal.status == 404 {
            // Gone on Stripe (cancelled there): it renews no more, so off is true already; on cannot be.
            logger.warning("Stripe no longer has a subscription the store follows", metadata: ["subscription": "\(subscriptionId)"])
            if on { throw StoreError.subscriptionExpired(originalTransactionId) }
        } catch let refusal as StripeAPI.Refusal {
            logger.warning("Stripe refused to change a subscription's renewal", metadata: ["subscription": "\(subscriptionId)", "stripe": "\(refusal)"])
            throw StoreError.paymentService("the payment service refused to change this subscription's renewal; nothing changed, and the store's operator can see why")
        }
        return channel
    }

    /// The ID of the latest purchased period of a subscription.
    static func latestPeriod(_ originalTransactionId: String, in db: any SQLDatabase) async throws -> String? {
        try await db.raw(SQLQueryString([.text("SELECT ")] + latestPeriodQuery(originalTransactionId) + [.text(#" AS "id""#)]))
            .first(decodingColumn: "id", as: String?.self) ?? nil
    }

    /// The subscription's latest period that stands (not a free re-buy), as a scalar subquery.
    static func latestPeriodQuery(_ originalTransactionId: String?) -> [PlanSQL] {
        [.text(#"(SELECT "id" FROM "storeTransaction" WHERE "originalTransactionId" = "#), .bind(.text(originalTransactionId)),
         .text(#" AND "status" = 'purchased' AND "paymentMethod" <> 'owned' ORDER BY "sequence" DESC LIMIT 1)"#)]
    }

    /// Changes one account's sandbox settings: how its renewals turn out, and its clock, moved
    /// forward by `advanceSeconds` (its subscriptions' due times move with it, so renewals, grace
    /// and expiry follow at the renewal worker's next pass).
    /// - Throws: ``StoreError`` `sandbox_only` on a production store; `unknown_account`.
    public func setSandbox(accountId: String, _ settings: SandboxAccountSettings) async throws -> SandboxAccountState {
        guard environment == .sandbox else { throw StoreError.sandboxOnly("an account's renewal setting and clock") }
        try RequestText.check(accountId, field: "the account ID in the path")
        if let advance = settings.advanceSeconds, !(advance >= 0 && advance < 100 * 365 * 86_400) {
            throw StoreError.invalidRequest("advanceSeconds must be between 0 and 100 years, not \(advance)")
        }
        let clock = self.clock
        return try await database.write { db in
            guard try await AccountRows(db).find(accountId) != nil else { throw StoreError.unknownAccount(accountId) }
            var sandbox = try await Self.sandbox(accountId, in: db)
            if let renewals = settings.renewals { sandbox.renewals = renewals }
            let advance = settings.advanceSeconds ?? 0
            sandbox.clockOffset += advance
            try await db.raw(#"""
                INSERT INTO "sandboxAccount" ("accountId", "clockOffset", "renewals") VALUES (\#(bind: accountId), \#(bind: sandbox.clockOffset), \#(bind: sandbox.renewals.rawValue))
                ON CONFLICT ("accountId") DO UPDATE SET "clockOffset" = "sandboxAccount"."clockOffset" + \#(bind: advance), "renewals" = \#(bind: sandbox.renewals.rawValue)
                """#).run()
            if advance > 0 { try await SubscriptionRows(db).moveDueTimes(of: accountId, earlierBy: advance) }
            return SandboxAccountState(accountId: accountId, renewals: sandbox.renewals, clockOffsetSeconds: sandbox.clockOffset,
                                       now: clock.now(offset: sandbox.clockOffset))
        }
    }
}

/// One row of `subscriptionGrace`.
private struct GraceRow: Decodable {
    var originalTransactionId: String
    var startsAt: Date
    var endsAt: Date
}
