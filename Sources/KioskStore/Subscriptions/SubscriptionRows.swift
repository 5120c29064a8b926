import Foundation
import KioskCore
import SQLKit

/// The one writer of the `subscription` table and of its grace windows (`subscriptionGrace`):
/// every statement that changes a subscription's row is here, and its methods are the row's
/// transitions (started, auto-renew turned, claimed for renewal, a step of its life, ended by a
/// refund). Each write is a compare-and-set on the row's `version` or state, so no write is made
/// from a stale read. The owners (``Subscriptions``, ``Payments``, ``Accounts``) call these inside
/// their own write transactions; none spells the table.
struct SubscriptionRows {
    let db: any SQLDatabase

    init(_ db: any SQLDatabase) { self.db = db }

    /// The account's subscription to one of `productIds` that has not ended (active, in grace or
    /// in billing retry: it may still charge), the latest-ending first; nil when none.
    func unended(accountId: String, among productIds: [String]) async throws -> SubscriptionRecord? {
        guard !productIds.isEmpty else { return nil }
        return try await db.select().column("*").from("subscription").where("accountId", .equal, accountId)
            .where("productId", .in, productIds).where("state", .notEqual, SubscriptionState.expired.rawValue)
            .orderBy("expiresDate", .descending).limit(1).first(decoding: SubscriptionRecord.self)
    }

    /// Starts (or starts again) the subscription a new period was bought for, in the purchase's
    /// write transaction. Started again by a purchase of its own (one the store renews, or one
    /// bought once), it is no longer the channel's that renewed it: that channel's later events
    /// find no subscription of theirs and are kept for the operator. A channel's purchase hands it
    /// back to its channel in the same transaction (``link(_:channel:subscriptionId:at:)``).
    /// - Parameter renews: whether the store itself renews it (only the sandbox's worker does).
    /// - Returns: the subscription as started and whether it existed before (a resubscription).
    /// - Parameter offerRenewalsLeft: renewals still at the introductory offer's price.
    func start(_ record: TransactionRecord, expires: Date, renews: Bool, clockOffset: Double, offerRenewalsLeft: Int = 0, at now: Date) async throws -> (SubscriptionRecord, existed: Bool) {
        let existing = try await db.select().column("originalTransactionId").from("subscription")
            .where("originalTransactionId", .equal, record.originalTransactionId).first()
        let subscription = SubscriptionRecord(
            originalTransactionId: record.originalTransactionId, accountId: record.accountId, productId: record.productId, state: .active,
            autoRenew: renews, expiresDate: expires, dueAt: expires.addingTimeInterval(-clockOffset), retryAt: nil, graceEndsAt: nil,
            failedAttempts: 0, expirationReason: nil, appAccountToken: record.appAccountToken, claimedBy: nil, claimedUntil: nil, version: 0, updatedAt: now,
            offerRenewalsLeft: offerRenewalsLeft, storefront: record.storefront)
        try await db.raw(#"""
            INSERT INTO "subscription" ("originalTransactionId", "accountId", "productId", "state", "autoRenew", "expiresDate", "dueAt",
                "failedAttempts", "appAccountToken", "version", "updatedAt", "offerRenewalsLeft", "storefront")
            VALUES (\#(bind: subscription.originalTransactionId), \#(bind: subscription.accountId), \#(bind: subscription.productId),
                \#(bind: subscription.state.rawValue), \#(bind: renews), \#(bind: expires), \#(bind: subscription.dueAt), 0,
                \#(bind: subscription.appAccountToken), 0, \#(bind: now), \#(bind: offerRenewalsLeft), \#(bind: record.storefront))
            ON CONFLICT ("originalTransactionId") DO UPDATE SET "state" = 'active', "autoRenew" = \#(bind: renews), "expiresDate" = \#(bind: expires),
                "offerRenewalsLeft" = \#(bind: offerRenewalsLeft),
                "dueAt" = \#(bind: subscription.dueAt), "retryAt" = NULL, "graceEndsAt" = NULL, "failedAttempts" = 0, "expirationReason" = NULL,
                "claimedBy" = NULL, "claimedUntil" = NULL, "version" = "subscription"."version" + 1, "updatedAt" = \#(bind: now),
                "appAccountToken" = COALESCE(\#(bind: subscription.appAccountToken), "subscription"."appAccountToken"),
                "channel" = NULL, "channelSubscriptionId" = NULL, "channelUpdatedAt" = NULL, "pendingProductId" = NULL,
                "storefront" = \#(bind: record.storefront)
            """#).run()
        return (subscription, existing != nil)
    }

    /// Hands the subscription a new period started to `channel`, which renews it from now on (its
    /// events move it): auto-renew on, nothing due for the store's own worker. Written in the
    /// transaction that started (or started again) the subscription, whose row it takes over.
    func link(_ originalTransactionId: String, channel: String, subscriptionId: String, at now: Date) async throws {
        try await db.update("subscription").set("channel", to: channel).set("channelSubscriptionId", to: subscriptionId)
            .set("autoRenew", to: true).set(SQLIdentifier("dueAt"), to: SQLLiteral.null)
            .set(SQLIdentifier("claimedBy"), to: SQLLiteral.null).set(SQLIdentifier("claimedUntil"), to: SQLLiteral.null)
            .set(SQLIdentifier("version"), to: SQLRaw(#""version" + 1"#)).set("updatedAt", to: now)
            .where("originalTransactionId", .equal, originalTransactionId).run()
    }

    /// A plan change that takes effect at once: the subscription becomes `changed` (its plan, its
    /// new period's end and due time, no offer price left, nothing waiting), only while the row is
    /// still at `version`. A renewal that committed first, or another change, makes this write nothing.
    /// - Returns: whether it was written.
    func changePlan(_ changed: SubscriptionRecord, from version: Int64) async throws -> Bool {
        try await db.update("subscription").set("productId", to: changed.productId).set("expiresDate", to: changed.expiresDate)
            .set("storefront", to: changed.storefront)
            .set("dueAt", to: changed.dueAt).set("offerRenewalsLeft", to: changed.offerRenewalsLeft)
            .set(SQLIdentifier("pendingProductId"), to: SQLLiteral.null)
            .set(SQLIdentifier("claimedBy"), to: SQLLiteral.null).set(SQLIdentifier("claimedUntil"), to: SQLLiteral.null)
            .set("version", to: changed.version).set("updatedAt", to: changed.updatedAt)
            .where("originalTransactionId", .equal, changed.originalTransactionId).where("version", .equal, version)
            .where("state", .equal, SubscriptionState.active.rawValue)
            .returning("originalTransactionId").all().count == 1
    }

    /// The plan the subscription renews as (nil: itself), only while the row is still at `version`.
    /// - Returns: whether it was written.
    func setRenewalPlan(_ changed: SubscriptionRecord, from version: Int64) async throws -> Bool {
        try await db.update("subscription").set("pendingProductId", to: changed.pendingProductId)
            .set("version", to: changed.version).set("updatedAt", to: changed.updatedAt)
            .where("originalTransactionId", .equal, changed.originalTransactionId).where("version", .equal, version)
            .returning("originalTransactionId").all().count == 1
    }

    /// The subscription `channel` knows as `subscriptionId`, if the store has it.
    func find(channel: String, subscriptionId: String) async throws -> SubscriptionRecord? {
        try await db.select().column("*").from("subscription").where("channel", .equal, channel)
            .where("channelSubscriptionId", .equal, subscriptionId).first(decoding: SubscriptionRecord.self)
    }

    /// Writes `written`'s auto-renew setting (and its due time, version and update time), only
    /// while the row is still at version `from`.
    /// - Returns: whether the row was still there to write.
    func setAutoRenew(_ written: SubscriptionRecord, from version: Int64) async throws -> Bool {
        try await db.update("subscription").set("autoRenew", to: written.autoRenew).set("version", to: written.version)
            .set("updatedAt", to: written.updatedAt).set("dueAt", to: written.dueAt)
            .where("originalTransactionId", .equal, written.originalTransactionId).where("version", .equal, version)
            .returning("originalTransactionId").all().count == 1
    }

    /// The account's sandbox clock moved forward by `advance` seconds: its subscriptions' due
    /// times move with it (read and written back in Swift: the engines spell date arithmetic
    /// differently).
    func moveDueTimes(of accountId: String, earlierBy advance: Double) async throws {
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

    /// Marks up to `limit` due, unclaimed subscriptions as `instance`'s until `lease` (on the wall
    /// clock, which every instance shares). On PostgreSQL `FOR UPDATE SKIP LOCKED`, so two
    /// instances claim different rows.
    /// - Parameters:
    ///   - now: the store's clock, which due times are on.
    ///   - wall: the wall clock, which leases are on.
    func claimDue(for instance: String, until lease: Date, now: Date, wall: Date, limit: Int, skipLocked: Bool) async throws -> [SubscriptionRecord] {
        let skip = skipLocked ? "FOR UPDATE SKIP LOCKED" : ""
        return try await db.raw(#"""
            UPDATE "subscription" SET "claimedBy" = \#(bind: instance), "claimedUntil" = \#(bind: lease)
            WHERE "originalTransactionId" IN (
                SELECT "originalTransactionId" FROM "subscription"
                WHERE "dueAt" <= \#(bind: now) AND ("claimedUntil" IS NULL OR "claimedUntil" < \#(bind: wall))
                ORDER BY "dueAt" LIMIT \#(bind: limit) \#(unsafeRaw: skip))
            RETURNING *
            """#).all(decoding: SubscriptionRecord.self)
    }

    /// A refunded or revoked period that is its subscription's current one ends the subscription
    /// (one the store renews itself; a channel's goes on as that channel says), as App Store's
    /// revoked status does: expired (`revoked`), auto-renew off, nothing due, no
    /// further charge, an open grace window closed now. A compare-and-set on the period's expiry: a renewal that
    /// committed first made another period current, and that one is left alone (as is an older
    /// period's refund). The renewal worker's own compare-and-set (the row's `version`) then finds
    /// the row moved and writes nothing.
    func end(refunded period: TransactionRecord, at now: Date) async throws {
        guard let expires = period.expiresDate else { return }
        let ended = try await db.update("subscription")
            .set("state", to: SubscriptionState.expired.rawValue).set("expirationReason", to: SubscriptionExpirationReason.revoked.rawValue)
            .set("autoRenew", to: false).set(SQLIdentifier("dueAt"), to: SQLLiteral.null).set(SQLIdentifier("retryAt"), to: SQLLiteral.null)
            .set(SQLIdentifier("graceEndsAt"), to: SQLLiteral.null).set(SQLIdentifier("claimedBy"), to: SQLLiteral.null)
            .set(SQLIdentifier("claimedUntil"), to: SQLLiteral.null).set(SQLIdentifier("version"), to: SQLRaw(#""version" + 1"#))
            .set("updatedAt", to: now)
            // The same instant to the millisecond both engines keep (``Store/sameInstant(_:_:)``): an
            // expiry read back into a `Date` and bound again is not always the stored value to the
            // bit on SQLite, and an exact match left about one refunded subscription in four renewing.
            .where("originalTransactionId", .equal, period.originalTransactionId)
            .where("expiresDate", .greaterThan, expires.addingTimeInterval(-0.001)).where("expiresDate", .lessThan, expires.addingTimeInterval(0.001))
            .where("state", .notEqual, SubscriptionState.expired.rawValue)
            // A subscription a channel renews goes on there after a refund of one period (Stripe
            // bills on until the publisher cancels it): the period is revoked, its life is the channel's.
            .where("channel", .is, SQLLiteral.null)
            .returning("originalTransactionId").all()
        guard !ended.isEmpty else {
            try await shorten(refunded: period, at: now)
            return
        }
        try await db.raw(#"""
            UPDATE "subscriptionGrace" SET "endsAt" = \#(bind: now) WHERE "originalTransactionId" = \#(bind: period.originalTransactionId) AND "endsAt" > \#(bind: now)
            """#).run()
    }

    /// A channel's subscription whose period was refunded runs to the end of its latest period that
    /// stands (none: the refunded one's start), so `entitled` says what the reader holds; its
    /// state stays the channel's. Written in the refund's transaction, after the period is marked.
    private func shorten(refunded period: TransactionRecord, at now: Date) async throws {
        try await db.raw(#"""
            UPDATE "subscription" SET "expiresDate" = COALESCE((SELECT MAX(t."expiresDate") FROM "storeTransaction" t
                    WHERE t."originalTransactionId" = \#(bind: period.originalTransactionId) AND t."status" = 'purchased'
                    AND t."paymentMethod" <> 'owned' AND t."id" <> \#(bind: period.id)), \#(bind: period.purchaseDate)),
                "version" = "version" + 1, "updatedAt" = \#(bind: now)
            WHERE "originalTransactionId" = \#(bind: period.originalTransactionId) AND "channel" IS NOT NULL
            """#).run()
    }

    /// A deleted account's subscriptions forget its App Store `appAccountToken`.
    func forgetAppAccountTokens(of accountId: String) async throws {
        try await db.update("subscription").set("appAccountToken", to: SQLLiteral.null).where("accountId", .equal, accountId).run()
    }

    // MARK: - Steps of a renewal's one-statement write (``RecordRenewalStep``)

    /// The compare-and-set every other step of a renewal hangs from: the subscription moves to `s`
    /// only while it is still at the claimed `version` and claimed by `instance`. Returns
    /// `originalTransactionId` (no row: nothing moved).
    static func movedStep(_ s: SubscriptionRecord?, claimedVersion: Int64, instance: String) -> PlanStep {
        PlanStep(
            name: "moved",
            write: .update("subscription", set: [
                ("state", [.bind(.text(s?.state.rawValue))]), ("autoRenew", [.bind(.flag(s?.autoRenew ?? false))]),
                ("expiresDate", [.bind(.date(s?.expiresDate))]), ("dueAt", [.bind(.date(s?.dueAt))]), ("retryAt", [.bind(.date(s?.retryAt))]),
                ("graceEndsAt", [.bind(.date(s?.graceEndsAt))]), ("failedAttempts", [.bind(.integer(s.map { Int64($0.failedAttempts) }))]),
                ("expirationReason", [.bind(.text(s?.expirationReason?.rawValue))]), ("claimedBy", [.text("NULL")]), ("claimedUntil", [.text("NULL")]),
                ("version", [.bind(.integer(s?.version))]), ("updatedAt", [.bind(.date(s?.updatedAt))]),
                ("channelUpdatedAt", [.bind(.date(s?.channelUpdatedAt))]),
                ("offerRenewalsLeft", [.bind(.integer(s.map { Int64($0.offerRenewalsLeft) }))]),
                // A renewal into the plan a downgrade waited for moves the plan and clears the wait.
                ("productId", [.bind(.text(s?.productId))]), ("pendingProductId", [.bind(.text(s?.pendingProductId))]),
            ]),
            // A channel's step (``Subscriptions/channelStep(_:channel:subscriptionId:)``) claims
            // nothing: its instance is "" and matches an unclaimed row.
            conditions: [[.text(#""originalTransactionId" = "#), .bind(.text(s?.originalTransactionId))],
                         [.text(#""version" = "#), .bind(.integer(claimedVersion))], [.text(#"COALESCE("claimedBy", '') = "#), .bind(.text(instance))]],
            returning: ["originalTransactionId"])
    }

    /// A grace window opened, or the open one closed, by a renewal step (each written only when
    /// the step says so, after `moved`).
    static func graceSteps(_ step: Subscriptions.RenewalStep?) -> (opened: PlanStep, closed: PlanStep) {
        let s = step?.subscription
        let original = PlanSQL.bind(.text(s?.originalTransactionId))
        let opened = PlanStep(
            name: "opened",
            write: .insert(into: "subscriptionGrace", columns: ["originalTransactionId", "accountId", "startsAt", "endsAt"], values: [
                [original], [.bind(.text(s?.accountId))], [.bind(.date(step?.opensGrace?.startsAt))], [.bind(.date(step?.opensGrace?.endsAt))],
            ], onConflict: nil),
            after: ["moved"], conditions: [[.bind(.flag(step?.opensGrace != nil))]])
        let closes = PlanSQL.bind(.date(step?.closesGraceAt))
        let closed = PlanStep(
            name: "closed",
            write: .update("subscriptionGrace", set: [("endsAt", [closes])]),
            after: ["moved"],
            conditions: [[.bind(.flag(step?.closesGraceAt != nil))], [.text(#""subscriptionGrace"."originalTransactionId" = "#), original],
                         [.text(#""subscriptionGrace"."endsAt" > "#), closes]])
        return (opened, closed)
    }
}
