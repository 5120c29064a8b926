import Foundation
import PostgresNIO
import SQLKit

/// One renewal step's whole write on PostgreSQL, as one statement of data-modifying CTEs (SQLite,
/// which lacks them, runs the same writes one by one in ``Store/step(_:)``'s transaction).
///
/// Why one statement: a step writes up to nine rows — the subscription, the account's revision
/// and change number, the new transaction, its charge and the day's sales, the grace window, the
/// notification and a delivery per endpoint — and as separate statements each was a round trip
/// (twelve with BEGIN and COMMIT), which held PostgreSQL renewals to a third of purchases a second.
///
/// `moved` is the compare-and-set every other part hangs from: the subscription moves only while it
/// is still at the claimed `version` and claimed by this instance (`$1`–`$3`); when it does not,
/// the statement writes nothing and returns no row. The new period (`$15` true) moves the account
/// (revision and change number, its row locked until the commit, as every writer of an account
/// does) and is inserted with that change number; its charge (`$37`) writes the ledger and the
/// day's sales (the account's ``SalesSlot``, `$53`). A grace window opens (`$44`, `$45`) or the open one closes at `$46`. The
/// notification (`$48` its type, none when null) names the new period or else the subscription's
/// latest one, with a pending delivery per registered endpoint. A unique index refusing the period
/// (its idempotency key names it) undoes the whole statement.
struct RecordRenewalStep: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        WITH "moved" AS (
            UPDATE "subscription" SET "state" = $4, "autoRenew" = $5, "expiresDate" = $6, "dueAt" = $7, "retryAt" = $8,
                "graceEndsAt" = $9, "failedAttempts" = $10, "expirationReason" = $11, "claimedBy" = NULL, "claimedUntil" = NULL,
                "version" = $12, "updatedAt" = $13
            WHERE "originalTransactionId" = $1 AND "version" = $2 AND "claimedBy" = $3
            RETURNING "originalTransactionId"
        ), "advanced" AS (
            UPDATE "account" SET "revision" = "revision" + 1, "lastChange" = "lastChange" + 1
            FROM "moved" WHERE "account"."id" = $14 AND $15
            RETURNING "account"."lastChange"
        ), "recorded" AS (
            INSERT INTO "storeTransaction" (\#(TransactionRecord.insertedColumns))
            SELECT $16, $14, $17, $18, $19, $1, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35,
                "advanced"."lastChange", $36
            FROM "advanced"
            RETURNING "sequence"
        ), "charged" AS (
            INSERT INTO "ledgerEntry" ("transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt")
            SELECT $16, $38, $14, $39, $40, $41, $42
            FROM "recorded" WHERE $37
        ), "counted" AS (
            INSERT INTO "salesDaySlot" ("day", "productId", "currency", "slot", "sales", "refunds", "netCents")
            SELECT $43, $17, $40, $53, 1, 0, $39
            FROM "recorded" WHERE $37
            \#(SalesSlot.addOnConflict)
        ), "opened" AS (
            INSERT INTO "subscriptionGrace" ("originalTransactionId", "accountId", "startsAt", "endsAt")
            SELECT $1, $14, $44, $45 FROM "moved" WHERE $44 IS NOT NULL
        ), "closed" AS (
            UPDATE "subscriptionGrace" SET "endsAt" = $46
            FROM "moved" WHERE "subscriptionGrace"."originalTransactionId" = $1 AND "subscriptionGrace"."endsAt" > $46
        ), "announced" AS (
            INSERT INTO "notification" ("id", "accountId", "type", "subtype", "transactionId", "originalTransactionId", "renewalInfo", "createdAt")
            SELECT $47, $14, $48, $49,
                COALESCE($50, (SELECT "id" FROM "storeTransaction" WHERE "originalTransactionId" = $1 AND "status" = 'purchased'
                    AND "paymentMethod" <> 'owned' ORDER BY "sequence" DESC LIMIT 1)),
                $1, $51, $52
            FROM "moved" WHERE $48 IS NOT NULL
            RETURNING "sequence"
        ), "fanned" AS (
            INSERT INTO "delivery" ("notificationSequence", "webhookId", "accountId", "state", "attempts", "nextAttemptAt")
            SELECT "announced"."sequence", "webhook"."id", $14, 'pending', 0, $52 FROM "announced", "webhook"
        )
        SELECT "moved"."originalTransactionId" FROM "moved"
        """#
    static let parameterTypes: [PostgresDataType] = [
        // the compare-and-set and the subscription's new state ($1–$15)
        .text, .int8, .text, .text, .bool, .timestamptz, .timestamptz, .timestamptz, .timestamptz, .int8, .text, .int8, .timestamptz,
        .text, .bool,
        // the new period ($16–$36)
        .text, .text, .text, .int8, .timestamptz, .timestamptz, .text, .text, .text, .int8, .text, .int8, .int8, .text, .text,
        .timestamptz, .timestamptz, .timestamptz, .text, .text, .text,
        // its charge ($37–$43)
        .bool, .text, .int8, .text, .text, .timestamptz, .text,
        // grace ($44–$46)
        .timestamptz, .timestamptz, .timestamptz,
        // the notification ($47–$52)
        .text, .text, .text, .text, .text, .timestamptz,
        // the account's sales row ($53)
        .int8,
    ]

    let step: Subscriptions.RenewalStep
    /// The version the step was decided on.
    let claimedVersion: Int64
    /// The instance whose claim the step commits under.
    let instance: String
    /// The notification's `renewalInfo`, as JSON.
    let renewalInfo: String?
    let notificationId = UUID().uuidString.lowercased()
    /// When the step is written (the rows' `updatedAt` and `createdAt`), on the wall clock.
    let now: Date

    var parameters: [StatementParameter] {
        let s = step.subscription
        let renewal = step.renewal
        let charge = renewal.flatMap { LedgerEntry.charge(for: $0, at: now) }
        let notification = step.notification
        return [
            .text(s.originalTransactionId), .integer(claimedVersion), .text(instance), .text(s.state.rawValue), .flag(s.autoRenew),
            .date(s.expiresDate), .date(s.dueAt), .date(s.retryAt), .date(s.graceEndsAt), .integer(Int64(s.failedAttempts)),
            .text(s.expirationReason?.rawValue), .integer(s.version), .date(s.updatedAt), .text(s.accountId), .flag(renewal != nil),
            .text(renewal?.id), .text(renewal?.productId), .text(renewal?.kind.rawValue), .integer(renewal.map { Int64($0.quantity) }),
            .date(renewal?.purchaseDate), .date(renewal?.expiresDate), .text(renewal?.status.rawValue), .text(renewal?.paymentMethod),
            .text(renewal?.idempotencyKey), .integer(renewal.map { Int64($0.amountCents) }), .text(renewal?.currency),
            .integer(renewal.map { Int64($0.creditsGranted) }), .integer(renewal.map { Int64($0.creditsSpent) }), .text(renewal?.signedTransaction),
            .text(renewal?.message), .date(renewal?.finishedAt), .date(renewal?.createdAt), .date(renewal?.revokedAt),
            .text(renewal?.revocationReason), .text(renewal?.requestedMethod), .text(renewal?.appAccountToken),
            .flag(charge != nil), .text(charge?.kind.rawValue), .integer(charge.map { Int64($0.amountCents) }), .text(charge?.currency),
            .text(charge?.reason), .date(charge?.createdAt), .text(charge.map { Store.day($0.createdAt) }),
            .date(step.opensGrace?.startsAt), .date(step.opensGrace?.endsAt), .date(step.closesGraceAt),
            .text(notificationId), .text(notification?.type), .text(notification?.subtype), .text(notification?.transactionId),
            .text(renewalInfo), .date(now), .integer(SalesSlot.of(s.accountId)),
        ]
    }
}
