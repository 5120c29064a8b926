import Foundation
import SQLKit

/// The notification outbox's rows (a notification and its deliveries), columns and values written
/// once, as steps of a ``WritePlan``: every change that announces something (a purchase on either
/// engine, a renewal step, a refund) builds them here, so no engine can write them differently.
/// (An account's steps are ``AccountRows``', a transaction's and its ledger's ``TransactionRows``'.)
enum PlannedRows {
    /// A notification in the outbox, and its fan-out: one pending delivery per registered endpoint.
    /// - Parameters:
    ///   - transactionId: the SQL of the transaction it names (a bound ID, or a look-up).
    ///   - renewalInfo: its renewal info, as JSON.
    ///   - traceParent: the trace the change was made in (``TraceParent``), which its delivery continues.
    static func notification(
        _ notification: StoreNotification?, transactionId: [PlanSQL], renewalInfo: String?, traceParent: String?, at now: Date,
        after: [String] = [], when conditions: [[PlanSQL]] = []
    ) -> [PlanStep] {
        let n = notification
        let announced = PlanStep(
            name: "announced",
            write: .insert(into: "notification", columns: ["id", "accountId", "type", "subtype", "transactionId", "originalTransactionId", "renewalInfo", "createdAt", "traceParent"], values: [
                [.bind(.text(Store.newUUID()))], [.bind(.text(n?.accountId))], [.bind(.text(n?.type))], [.bind(.text(n?.subtype))],
                transactionId, [.bind(.text(n?.originalTransactionId))], [.bind(.text(renewalInfo))], [.bind(.date(now))], [.bind(.text(traceParent))],
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

    /// Writes `notification` to the outbox with one pending delivery per registered endpoint.
    /// Call it inside the write transaction of the change it reports.
    static func announce(_ notification: StoreNotification, at now: Date, in db: any SQLDatabase) async throws {
        let steps = Self.notification(
            notification, transactionId: [.bind(.text(notification.transactionId))], renewalInfo: try notification.renewalInfoJSON(),
            traceParent: TraceParent.current(), at: now)
        try await db.run(WritePlan(steps: steps, result: []))
    }
}
