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
        let environment = keys.identity.environment
        let clock = self.clock
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
            // A production store renews nothing itself (``SQLDatabase/startSubscription``): turned
            // on, it would promise a renewal nobody makes.
            if on, environment != .sandbox { throw StoreError.renewalNotOffered(originalTransactionId) }
            var changed = record
            changed.autoRenew = on
            changed.version += 1
            changed.updatedAt = clock.wallNow()
            // Failing to renew with auto-renew off: nothing more will be tried, so it ends now.
            if !on, record.state != .active {
                changed.dueAt = clock.now()
            }
            let written = changed
            let rows = try await db.update("subscription").set("autoRenew", to: written.autoRenew).set("version", to: written.version)
                .set("updatedAt", to: written.updatedAt).set("dueAt", to: written.dueAt)
                .where("originalTransactionId", .equal, originalTransactionId).where("version", .equal, record.version)
                .returning("originalTransactionId").all()
            guard rows.count == 1 else { throw StoreError.subscriptionBusy }
            try await db.announce(StoreNotification(
                type: StoreNotification.Kind.didChangeRenewalStatus, subtype: on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED",
                accountId: accountId, transactionId: try await Self.latestPeriod(originalTransactionId, in: db),
                originalTransactionId: originalTransactionId, renewalInfo: RenewalInfo(written, environment: environment)), at: clock.wallNow())
            return written.info(now: now)
        }
    }

    /// The ID of the latest purchased period of a subscription.
    static func latestPeriod(_ originalTransactionId: String, in db: any SQLDatabase) async throws -> String? {
        try await db.raw(SQLQueryString([.text("SELECT ")] + latestPeriodQuery(originalTransactionId) + [.text(#" AS "id""#)]))
            .first(decodingColumn: "id", as: String.self)
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
            guard try await db.account(accountId) != nil else { throw StoreError.unknownAccount(accountId) }
            var sandbox = try await Self.sandbox(accountId, in: db)
            if let renewals = settings.renewals { sandbox.renewals = renewals }
            let advance = settings.advanceSeconds ?? 0
            sandbox.clockOffset += advance
            try await db.raw(#"""
                INSERT INTO "sandboxAccount" ("accountId", "clockOffset", "renewals") VALUES (\#(bind: accountId), \#(bind: sandbox.clockOffset), \#(bind: sandbox.renewals.rawValue))
                ON CONFLICT ("accountId") DO UPDATE SET "clockOffset" = "sandboxAccount"."clockOffset" + \#(bind: advance), "renewals" = \#(bind: sandbox.renewals.rawValue)
                """#).run()
            if advance > 0 {
                // Read and written back in Swift: the engines spell date arithmetic differently.
                let due = try await db.select().column("originalTransactionId").column("dueAt").from("subscription")
                    .where("accountId", .equal, accountId).where("dueAt", .isNot, SQLLiteral.null).all()
                for row in due {
                    let id = try row.decode(column: "originalTransactionId", as: String.self)
                    let dueAt = try row.decode(column: "dueAt", as: Date.self)
                    try await db.update("subscription").set("dueAt", to: dueAt.addingTimeInterval(-advance))
                        .set(SQLIdentifier("version"), to: SQLRaw(#""version" + 1"#))
                        .where("originalTransactionId", .equal, id).run()
                }
            }
            return SandboxAccountState(accountId: accountId, renewals: sandbox.renewals, clockOffsetSeconds: sandbox.clockOffset,
                                       now: clock.now(offset: sandbox.clockOffset))
        }
    }
}

extension SQLDatabase {
    /// Starts (or starts again) the subscription a new period was bought for, in the purchase's
    /// write transaction, and announces it (`SUBSCRIBED`).
    func startSubscription(_ record: TransactionRecord, clockOffset: Double, environment: StoreEnvironment, at now: Date) async throws {
        guard record.kind == .subscription, record.status == .purchased, !record.isFreeRebuy, let expires = record.expiresDate else { return }
        // Only the sandbox's worker renews (with pretend money). A production store's subscription
        // bought through a channel renews where it was paid for, and until that channel tells the
        // store of each renewal, the store must not claim a renewal it cannot make: it ends at the
        // period's end.
        let renews = environment == .sandbox
        let existing = try await select().column("originalTransactionId").from("subscription")
            .where("originalTransactionId", .equal, record.originalTransactionId).first()
        let subscription = SubscriptionRecord(
            originalTransactionId: record.originalTransactionId, accountId: record.accountId, productId: record.productId, state: .active,
            autoRenew: renews, expiresDate: expires, dueAt: expires.addingTimeInterval(-clockOffset), retryAt: nil, graceEndsAt: nil,
            failedAttempts: 0, expirationReason: nil, appAccountToken: record.appAccountToken, claimedBy: nil, claimedUntil: nil, version: 0, updatedAt: now)
        try await raw(#"""
            INSERT INTO "subscription" ("originalTransactionId", "accountId", "productId", "state", "autoRenew", "expiresDate", "dueAt",
                "failedAttempts", "appAccountToken", "version", "updatedAt")
            VALUES (\#(bind: subscription.originalTransactionId), \#(bind: subscription.accountId), \#(bind: subscription.productId),
                \#(bind: subscription.state.rawValue), \#(bind: renews), \#(bind: expires), \#(bind: subscription.dueAt), 0,
                \#(bind: subscription.appAccountToken), 0, \#(bind: now))
            ON CONFLICT ("originalTransactionId") DO UPDATE SET "state" = 'active', "autoRenew" = \#(bind: renews), "expiresDate" = \#(bind: expires),
                "dueAt" = \#(bind: subscription.dueAt), "retryAt" = NULL, "graceEndsAt" = NULL, "failedAttempts" = 0, "expirationReason" = NULL,
                "claimedBy" = NULL, "claimedUntil" = NULL, "version" = "subscription"."version" + 1, "updatedAt" = \#(bind: now),
                "appAccountToken" = COALESCE(\#(bind: subscription.appAccountToken), "subscription"."appAccountToken")
            """#).run()
        try await announce(StoreNotification(
            type: StoreNotification.Kind.subscribed, subtype: existing == nil ? "INITIAL_BUY" : "RESUBSCRIBE", accountId: record.accountId,
            transactionId: record.id, originalTransactionId: record.originalTransactionId,
            renewalInfo: RenewalInfo(subscription, environment: environment)), at: now)
    }
}

/// One row of `subscriptionGrace`.
private struct GraceRow: Decodable {
    var originalTransactionId: String
    var startsAt: Date
    var endsAt: Date
}
