import Foundation
import PostgresNIO
import SQLKit

/// One renewal step's whole write, one plan: on PostgreSQL one statement of data-modifying CTEs;
/// SQLite, which lacks them, runs the same steps one by one in ``Subscriptions/step(_:sandbox:)``'s
/// transaction.
///
/// Why one statement: a step writes up to nine rows — the subscription, the account's revision
/// and change number, the new transaction, its charge and the day's sales, the grace window, the
/// notification and a delivery per endpoint — and as separate statements each was a round trip
/// (twelve with BEGIN and COMMIT), which held PostgreSQL renewals to a third of purchases a second.
///
/// `moved` is the compare-and-set every other step hangs from: the subscription moves only while it
/// is still at the claimed `version` and claimed by this instance; when it does not, the plan
/// writes nothing and answers no row. A new period moves the account (`advanced`: revision and
/// change number, its row locked until the commit, as every writer of an account does) and is
/// inserted with that change number (`recorded`); its charge writes the ledger and the day's sales
/// (the account's ``SalesSlot``). A grace window opens (`opened`) or the open one closes (`closed`).
/// The notification (`announced`) names the new period or else the subscription's latest one,
/// with a pending delivery per registered endpoint (`fanned`). A unique index refusing the period
/// (its idempotency key names it) undoes the whole step.
struct RecordRenewalStep: PlannedStatement {
    typealias Row = any SQLRow
    static let sql = rendered.sql
    static let parameterTypes = rendered.parameterTypes
    static var template: WritePlan {
        plan(nil, claimedVersion: 0, instance: "", renewalInfo: nil, now: Date(timeIntervalSince1970: 0), slot: 0, traceParent: nil)
    }

    let step: Subscriptions.RenewalStep
    /// The version the step was decided on.
    let claimedVersion: Int64
    /// The instance whose claim the step commits under.
    let instance: String
    /// The notification's `renewalInfo`, as JSON.
    let renewalInfo: String?
    /// When the step is written (the rows' `updatedAt` and `createdAt`), on the wall clock.
    let now: Date
    /// The trace the step was decided in (the worker's pass, or a channel's event), taken where it is made.
    var traceParent: String? = TraceParent.current()

    var plan: WritePlan {
        Self.plan(step, claimedVersion: claimedVersion, instance: instance, renewalInfo: renewalInfo, now: now,
                  slot: SalesSlot.of(step.subscription.accountId), traceParent: traceParent)
    }

    /// The plan of one renewal step (nil: the template).
    /// - Parameter slot: the account's ``SalesSlot`` on the engine that runs it.
    static func plan(
        _ step: Subscriptions.RenewalStep?, claimedVersion: Int64, instance: String, renewalInfo: String?, now: Date, slot: Int64,
        traceParent: String?
    ) -> WritePlan {
        let s = step?.subscription
        let renewal = step?.renewal
        let charge = renewal.flatMap { LedgerEntry.charge(for: $0, at: now) }
        let moved = SubscriptionRows.movedStep(s, claimedVersion: claimedVersion, instance: instance)
        let advanced = AccountRows.renewalStep(account: s?.accountId, moves: renewal != nil, after: "moved")
        let (opened, closed) = SubscriptionRows.graceSteps(step)
        // The notification names the new period, or else the subscription's latest one.
        let named: [PlanSQL] = [.text("COALESCE("), .bind(.text(step?.notification?.transactionId)), .text(", ")]
            + Subscriptions.latestPeriodQuery(s?.originalTransactionId) + [.text(")")]
        var steps = [moved, advanced]
        steps.append(TransactionRows.insertStep(renewal, change: [.earlier("advanced", "lastChange")]))
        steps += TransactionRows.ledgerSteps(charge, productId: [.bind(.text(renewal?.productId))], slot: slot, after: ["recorded"], when: [[.bind(.flag(charge != nil))]])
        steps += [opened, closed]
        steps += PlannedRows.notification(step?.notification, transactionId: named, renewalInfo: renewalInfo, traceParent: traceParent, at: now,
                                          after: ["moved"], when: [[.bind(.flag(step?.notification != nil))]])
        return WritePlan(steps: steps, result: [("moved", "originalTransactionId")])
    }
}
