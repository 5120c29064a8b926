import Foundation
import SQLKit

/// The rows the store's changes write, each row's columns and values written once, as steps of a
/// ``WritePlan``: every change that writes such a row (a purchase on either engine, a renewal
/// step, a refund, a notification) builds it here, so no engine can write it differently.
enum PlannedRows {
    /// The compare-and-set a payment commits under: the account moves to its next revision, its
    /// balance by `delta`, only while it is still at `revision`, the snapshot the payment was
    /// decided on. A decision that depends on nothing the account holds (a consumable's charge,
    /// `revision` nil) moves it from whatever revision it is at, as long as the balance stays
    /// between 0 and the largest integer: the one thing such a decision needs of the account,
    /// checked here, where no other payment can come between the check and the write (the row is
    /// locked, or on SQLite the writer is this connection). The CASE keeps the bound's arithmetic
    /// from overflowing on either engine. It also takes the account's next change number.
    /// Returns `credits` and `lastChange`.
    static func advance(account id: String, from revision: Int64?, adding delta: Int) -> PlanStep {
        let delta = PlanSQL.bind(.integer(Int64(delta)))
        let revision = PlanSQL.bind(.integer(revision))
        return PlanStep(
            name: "advanced",
            write: .update("account", set: [
                ("revision", [.text(#""revision" + 1"#)]),
                ("credits", [.text(#""credits" + "#), delta]),
                ("lastChange", [.text(#""lastChange" + 1"#)]),
            ]),
            conditions: [
                [.text(#""id" = "#), .bind(.text(id))],
                [.text("CASE WHEN "), revision, .text(#" IS NOT NULL THEN "revision" = "#), revision,
                 .text(" WHEN "), delta, .text(#" >= 0 THEN "credits" <= 9223372036854775807 - "#), delta,
                 .text(#" ELSE "credits" >= -"#), delta, .text(" END")],
            ],
            returning: ["credits", "lastChange"])
    }

    /// A transaction's row (every column the store writes), with the change number `change`.
    /// Returns `sequence` and `changeSequence`.
    static func transaction(
        _ record: TransactionRecord?, change: [PlanSQL], after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> PlanStep {
        let r = record
        let columns: [(String, [PlanSQL])] = [
            ("id", [.bind(.text(r?.id))]),
            ("accountId", [.bind(.text(r?.accountId))]),
            ("productId", [.bind(.text(r?.productId))]),
            ("kind", [.bind(.text(r?.kind.rawValue))]),
            ("quantity", [.bind(.integer(r.map { Int64($0.quantity) }))]),
            ("originalTransactionId", [.bind(.text(r?.originalTransactionId))]),
            ("purchaseDate", [.bind(.date(r?.purchaseDate))]),
            ("expiresDate", [.bind(.date(r?.expiresDate))]),
            ("status", [.bind(.text(r?.status.rawValue))]),
            ("paymentMethod", [.bind(.text(r?.paymentMethod))]),
            ("idempotencyKey", [.bind(.text(r?.idempotencyKey))]),
            ("amountCents", [.bind(.integer(r.map { Int64($0.amountCents) }))]),
            ("currency", [.bind(.text(r?.currency))]),
            ("creditsGranted", [.bind(.integer(r.map { Int64($0.creditsGranted) }))]),
            ("creditsSpent", [.bind(.integer(r.map { Int64($0.creditsSpent) }))]),
            ("signedTransaction", [.bind(.text(r?.signedTransaction))]),
            ("message", [.bind(.text(r?.message))]),
            ("finishedAt", [.bind(.date(r?.finishedAt))]),
            ("createdAt", [.bind(.date(r?.createdAt))]),
            ("revokedAt", [.bind(.date(r?.revokedAt))]),
            ("revocationReason", [.bind(.text(r?.revocationReason))]),
            ("requestedMethod", [.bind(.text(r?.requestedMethod))]),
            ("changeSequence", change),
            ("appAccountToken", [.bind(.text(r?.appAccountToken))]),
        ]
        return PlanStep(
            name: "recorded", write: .insert(into: "storeTransaction", columns: columns.map(\.0), values: columns.map(\.1), onConflict: nil),
            after: after, conditions: conditions, returning: ["sequence", "changeSequence"])
    }

    /// A ledger entry and the day's sales row it adds to (`productId`: the SQL of the product;
    /// `slot`: the account's ``SalesSlot`` on the engine that runs it), in the same change.
    static func ledger(
        _ entry: LedgerEntry?, productId: [PlanSQL], slot: Int64, after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> [PlanStep] {
        let isCharge = entry?.kind == .charge
        let charged = PlanStep(
            name: "charged",
            write: .insert(into: "ledgerEntry", columns: ["transactionId", "kind", "accountId", "amountCents", "currency", "reason", "createdAt"], values: [
                [.bind(.text(entry?.transactionId))], [.bind(.text(entry?.kind.rawValue))], [.bind(.text(entry?.accountId))],
                [.bind(.integer(entry.map { Int64($0.amountCents) }))], [.bind(.text(entry?.currency))], [.bind(.text(entry?.reason))],
                [.bind(.date(entry?.createdAt))],
            ], onConflict: nil),
            after: after, conditions: conditions)
        let counted = PlanStep(
            name: "counted",
            write: .insert(into: "salesDaySlot", columns: ["day", "productId", "currency", "slot", "sales", "refunds", "netCents"], values: [
                [.bind(.text(entry.map { Store.day($0.createdAt) }))], productId, [.bind(.text(entry?.currency))],
                [.bind(.integer(slot))], [.bind(.integer(isCharge ? 1 : 0))], [.bind(.integer(isCharge ? 0 : 1))],
                [.bind(.integer(entry.map { Int64($0.amountCents) }))],
            ], onConflict: SalesSlot.addOnConflict),
            after: after, conditions: conditions)
        return [charged, counted]
    }

    /// A notification in the outbox, and its fan-out: one pending delivery per registered endpoint.
    /// - Parameters:
    ///   - transactionId: the SQL of the transaction it names (a bound ID, or a look-up).
    ///   - renewalInfo: its renewal info, as JSON.
    static func notification(
        _ notification: StoreNotification?, transactionId: [PlanSQL], renewalInfo: String?, at now: Date,
        after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> [PlanStep] {
        let n = notification
        let announced = PlanStep(
            name: "announced",
            write: .insert(into: "notification", columns: ["id", "accountId", "type", "subtype", "transactionId", "originalTransactionId", "renewalInfo", "createdAt"], values: [
                [.bind(.text(UUID().uuidString.lowercased()))], [.bind(.text(n?.accountId))], [.bind(.text(n?.type))], [.bind(.text(n?.subtype))],
                transactionId, [.bind(.text(n?.originalTransactionId))], [.bind(.text(renewalInfo))], [.bind(.date(now))],
            ], onConflict: nil),
            after: after, conditions: conditions, returning: ["sequence"])
        let fanned = PlanStep(
            name: "fanned",
            write: .insert(into: "delivery", columns: ["notificationSequence", "webhookId", "accountId", "state", "attempts", "nextAttemptAt"], values: [
                [.earlier("announced", "sequence")], [.text(#""webhook"."id""#)], [.bind(.text(n?.accountId))], [.text("'pending'")], [.text("0")],
                [.bind(.date(now))],
            ], onConflict: nil),
            tables: ["webhook"])
        return [announced, fanned]
    }
}

extension SQLDatabase {
    /// Writes `notification` to the outbox with one pending delivery per registered endpoint.
    /// Call it inside the write transaction of the change it reports.
    func announce(_ notification: StoreNotification, at now: Date) async throws {
        let steps = PlannedRows.notification(
            notification, transactionId: [.bind(.text(notification.transactionId))], renewalInfo: try notification.renewalInfoJSON(), at: now)
        try await run(WritePlan(steps: steps, result: []))
    }
}
