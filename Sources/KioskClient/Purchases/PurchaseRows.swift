import Foundation
internal import GRDB
import KioskCore

/// The purchase rows of `kiosk.sqlite`, written by nothing else: ``Purchases`` holds the one
/// instance and is the only caller, so every change of a purchase is one of its transitions.
/// Each transition is one SQLite transaction that checks the current state.
struct PurchaseRows: Sendable {
    let database: ClientDatabase

    // MARK: Reads

    func payments() throws -> [PaymentRecord] {
        try database.read { try PaymentRow.order(PaymentRecord.Columns.id.desc).fetchAll($0).map(\.value) }
    }

    func payment(_ id: Int64) throws -> PaymentRecord? {
        try database.read { try PaymentRow.fetchOne($0, key: id)?.value }
    }

    /// The row of a transaction the store named, if this device has it.
    func payment(transactionId: String) throws -> PaymentRecord? {
        try database.read { try PaymentRow.filter(PaymentRecord.Columns.transactionId == transactionId).fetchOne($0)?.value }
    }

    /// Rows replay must move on, oldest first.
    func unfinishedPayments() throws -> [PaymentRecord] {
        try database.read { db in
            try PaymentRow
                .filter([PaymentState.purchasing, .purchased, .restored, .deferred, .delivering].map(\.rawValue).contains(PaymentRecord.Columns.state))
                .order(PaymentRecord.Columns.id)
                .fetchAll(db).map(\.value)
        }
    }

    /// This device's standing purchase of a book, issue or subscription, if it has one.
    func owningPayment(productId: String) throws -> PaymentRecord? {
        try database.read { db in
            try PaymentRow
                .filter(PaymentRecord.Columns.productId == productId)
                .filter(PaymentRecord.Columns.kind != ProductKind.consumable.rawValue)
                .filter(PaymentState.owning.map(\.rawValue).contains(PaymentRecord.Columns.state))
                .filter(PaymentRecord.Columns.transactionId != nil)
                .order(PaymentRecord.Columns.id)
                .fetchOne(db)?.value
        }
    }

    /// This device's Ask to Buy request for a product still waiting for an answer, if any.
    func pendingRequest(productId: String) throws -> PaymentRecord? {
        try database.read { db in
            try PaymentRow
                .filter(PaymentRecord.Columns.productId == productId)
                .filter(PaymentRecord.Columns.state == PaymentState.deferred.rawValue)
                .order(PaymentRecord.Columns.id)
                .fetchOne(db)?.value
        }
    }

    func knownTransactionIds() throws -> Set<String> {
        try database.read { Set(try String.fetchAll($0, sql: "SELECT transactionId FROM payment WHERE transactionId IS NOT NULL")) }
    }

    // MARK: Transitions

    /// A new purchase, saved as `purchasing` with a fresh idempotency key before it is sent.
    func beginPurchase(productId: String, kind: ProductKind, quantity: Int, method: String, storeURL: String, storeKeys: String?,
                       offerCode: String? = nil) throws -> PaymentRecord {
        let now = Date()
        var pending = PaymentRecord(
            id: nil, idempotencyKey: UUID().uuidString.lowercased(), productId: productId, kind: kind,
            quantity: quantity, paymentMethod: method, state: .purchasing, transactionId: nil,
            originalTransactionId: nil, receipt: nil, lastError: nil, createdAt: now, updatedAt: now)
        pending.storeURL = storeURL
        pending.storeKeys = storeKeys
        pending.offerCode = offerCode
        let record = try database.write { db in
            // Nil before the home has an account: the first send binds it (``markSending(_:)``).
            pending.accountId = try Setting.value(Setting.Key.accountID, in: db)
            return try PaymentRow(pending).inserted(db).value
        }
        database.events.publish(.transaction(record))
        return record
    }

    /// `purchasing | deferred → purchased`: the verified receipt is committed with the state.
    ///
    /// A `restore` that ran while this purchase's answer was lost may have saved the same
    /// transaction as a keyless `restored` row: the row that made the purchase takes its place.
    /// - Parameter notCharged: the store answered that the account owned it already (a re-buy,
    ///   charged nothing): the row says so in the same commit, so no event calls it purchased.
    func recordReceipt(_ id: Int64, transactionId: String, originalTransactionId: String, receipt: String, notCharged: Bool = false) throws -> PaymentRecord {
        try movePayment(id, .receiptSaved, [
            PaymentRecord.Columns.transactionId.set(to: transactionId),
            Column("originalTransactionId").set(to: originalTransactionId),
            Column("receipt").set(to: receipt),
        ] + (notCharged ? [Column("paymentMethod").set(to: PaymentRecord.notCharged)] : []) + Self.clearedError) { db in
            try PaymentRow
                .filter(PaymentRecord.Columns.transactionId == transactionId && PaymentRecord.Columns.id != id && Column("idempotencyKey") == nil)
                .deleteAll(db)
        }
    }

    /// Notes, before the request leaves, that a purchase is being sent: from then on the store may
    /// have it, and cancelling it here no longer proves nothing was charged. A purchase not yet
    /// bound to an account is bound to the one the home acts for, in the same transaction that
    /// checks it belongs to it.
    /// - Returns: `send` false when the row is no longer `purchasing` (cancelled meanwhile): do not
    ///   send; whether this is the first time it is sent; and the token to send it with, the
    ///   purchase's account's.
    /// - Throws: ``ClientError/otherAccount(productId:madeFor:current:sent:)`` when the purchase
    ///   belongs to another account than the home's (or the home has none).
    func markSending(_ id: Int64) throws -> (send: Bool, first: Bool, token: String) {
        try database.write { db in
            guard let row = try PaymentRow.filter(key: id).filter(PaymentRecord.Columns.state == PaymentState.purchasing.rawValue).fetchOne(db)?.value else {
                return (false, false, "")
            }
            let account = try Setting.value(Setting.Key.accountID, in: db)
            guard let account, row.belongs(to: account), let token = try Setting.value(Setting.Key.accountToken, in: db) else {
                throw ClientError.otherAccount(productId: row.productId, madeFor: row.accountId, current: account, sent: row.sentAt != nil)
            }
            let first = row.sentAt == nil
            try db.execute(sql: "UPDATE payment SET sentAt = COALESCE(sentAt, ?), accountId = ? WHERE id = ?", arguments: [Date(), account, id])
            return (true, first, token)
        }
    }

    /// The unanswered purchases of `account` are due now, their backoff forgotten: they waited
    /// for this device to sign in to it again, which it just did.
    func makeUnansweredDue(account: String) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE payment SET nextAttemptAt = NULL WHERE state = ? AND accountId = ?", arguments: [PaymentState.purchasing.rawValue, account])
        }
    }

    /// The first send of a purchase never reached the store (the connection was refused): it is
    /// as unsent as before.
    func unmarkSending(_ id: Int64) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE payment SET sentAt = NULL WHERE id = ? AND state = ?", arguments: [id, PaymentState.purchasing.rawValue])
        }
    }

    /// The unsent purchases of a product: `purchasing` rows.
    func unsentPurchases(productId: String) throws -> [PaymentRecord] {
        try database.read { db in
            try PaymentRow.filter(PaymentRecord.Columns.productId == productId && PaymentRecord.Columns.state == PaymentState.purchasing.rawValue).fetchAll(db).map(\.value)
        }
    }

    /// `purchasing → cancelled` by the reader, for a purchase the store has not answered.
    /// - Returns: the cancelled row.
    /// Only a purchase never handed to the network: one that left may have been charged, and its
    /// answer is still to be read (the check and the move are one transaction, so a send that
    /// starts meanwhile either finds it cancelled or makes this refuse).
    func cancelUnsent(_ id: Int64) throws -> PaymentRecord {
        try movePayment(id, .cancelledUnsent, [
            PaymentRecord.Columns.lastError.set(to: "cancelled on this device before it was sent; nothing was charged"),
            PaymentRecord.Columns.nextAttemptAt.set(to: nil),
        ]) { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT productId, storeURL, sentAt FROM payment WHERE id = ?", arguments: [id]),
                  let sent = row["sentAt"] as Date? else { return }
            let product: String = row["productId"]
            let store = (row["storeURL"] as String?) ?? "its store"
            throw ClientError.invalidRequest(
                "\(product): this purchase was sent to \(store) at \(ISO8601DateFormatter().string(from: sent)) and its answer never arrived, so it may have been charged and is not cancelled; "
                + "kiosk resume against that store reads its answer")
        }
    }

    /// `purchasing → deferred`: Ask to Buy.
    func recordDeferred(_ id: Int64, transactionId: String, message: String?) throws -> PaymentRecord {
        try movePayment(id, .askedToBuy, [
            PaymentRecord.Columns.transactionId.set(to: transactionId),
            PaymentRecord.Columns.lastError.set(to: message),
            PaymentRecord.Columns.attempts.set(to: 0),
            PaymentRecord.Columns.nextAttemptAt.set(to: nil),
        ])
    }

    /// A `purchasing` row the store answered with a request this device already holds (a second
    /// Ask to Buy of the same product): nothing new was asked or charged, so the row goes and the
    /// standing request is returned. Both in one transaction, so the row can never be sent again.
    /// - Throws: ``IllegalTransition`` when the row is no longer `purchasing`.
    func dropDuplicateRequest(_ id: Int64, standing transactionId: String) throws -> PaymentRecord {
        try database.write { db -> PaymentRecord in
            let deleted = try PaymentRow
                .filter(key: id)
                .filter(PaymentRecord.Columns.state == PaymentState.purchasing.rawValue)
                .deleteAll(db)
            let standing = try PaymentRow.filter(PaymentRecord.Columns.transactionId == transactionId).fetchOne(db)?.value
            guard deleted == 1, let standing else {
                let current = try PaymentRow.fetchOne(db, key: id)?.value
                throw IllegalTransition(subject: current?.subject ?? "transaction #\(id)", current: current?.state.rawValue, target: "dropped as a duplicate request")
            }
            return standing
        }
    }

    /// `purchasing | deferred → failed | cancelled`: refused by the store or backed out; nothing charged.
    func recordRefusal(_ id: Int64, as state: PaymentState, transactionId: String?, reason: String?) throws -> PaymentRecord {
        var assignments = [PaymentRecord.Columns.lastError.set(to: reason), PaymentRecord.Columns.nextAttemptAt.set(to: nil)]
        if let transactionId { assignments.append(PaymentRecord.Columns.transactionId.set(to: transactionId)) }
        return try movePayment(id, state == .cancelled ? .cancelled : .declined, assignments)
    }

    /// A transaction the store knows and this device does not, saved as `restored`.
    /// - Parameter paidBy: what the store says it was paid with (``StoreTransaction/paidBy``): a
    ///   redemption is shown in credits, a re-buy and the operator's grant as not charged, as on
    ///   the device that made it.
    /// - Returns: nil when another process saved the same transaction first.
    func recordRestored(_ claims: ReceiptClaims, receipt: String, paidBy: String? = nil) throws -> PaymentRecord? {
        let now = Date()
        let method = switch paidBy {
        case PaidBy.credits.rawValue: PaidBy.credits.rawValue
        case PaidBy.operator.rawValue: PaidBy.operator.rawValue
        case PaidBy.owned.rawValue: PaymentRecord.notCharged
        default: "restore"
        }
        let found = PaymentRecord(
            id: nil, idempotencyKey: nil, productId: claims.productId, kind: claims.kind, quantity: claims.quantity,
            paymentMethod: method, state: .restored, transactionId: claims.transactionId,
            originalTransactionId: claims.originalTransactionId, receipt: receipt, lastError: nil,
            createdAt: now, updatedAt: now)
        let record = try database.write { db -> PaymentRecord? in
            // transactionId is UNIQUE: of two processes restoring at once, one row wins.
            guard try PaymentRow.filter(PaymentRecord.Columns.transactionId == claims.transactionId).fetchCount(db) == 0 else { return nil }
            var found = found
            found.accountId = try Setting.value(Setting.Key.accountID, in: db)
            return try PaymentRow(found).inserted(db).value
        }
        if let record { database.events.publish(.transaction(record)) }
        return record
    }

    /// `purchased | restored | delivering → failed`: its receipt no longer verifies on this device.
    func recordReceiptRefused(_ id: Int64, reason: String) throws -> PaymentRecord {
        try movePayment(id, .receiptRefused, [PaymentRecord.Columns.lastError.set(to: reason), PaymentRecord.Columns.nextAttemptAt.set(to: nil)])
    }

    /// `purchased | restored → delivering`: its content is queued and the purchase waits for it.
    func markDelivering(_ id: Int64) throws -> PaymentRecord {
        try movePayment(id, .delivering, Self.clearedError)
    }

    /// `purchased | restored | delivering → finished`: delivered and reported to the server.
    func markFinished(_ id: Int64) throws -> PaymentRecord {
        try movePayment(id, .finished, Self.clearedError)
    }

    /// `purchased | restored | delivering | finished → revoked`, with the store's date and reason.
    /// - Returns: nil when this device has no such transaction or already knows it is revoked.
    func markRevoked(transactionId: String, at date: Date, reason: String) throws -> PaymentRecord? {
        let record = try database.write { db -> PaymentRecord? in
            let changed = try PaymentRow
                .filter(PaymentRecord.Columns.transactionId == transactionId)
                .filter(PaymentTransition.revoked.from.map(\.rawValue).contains(PaymentRecord.Columns.state))
                .updateAll(db, [
                    PaymentRecord.Columns.state.set(to: PaymentTransition.revoked.to.rawValue),
                    Column("revokedAt").set(to: date),
                    Column("revocationReason").set(to: reason),
                    PaymentRecord.Columns.nextAttemptAt.set(to: nil),
                    PaymentRecord.Columns.updatedAt.set(to: Date()),
                ])
            guard changed == 1 else { return nil }
            return try PaymentRow.filter(PaymentRecord.Columns.transactionId == transactionId).fetchOne(db)?.value
        }
        if let record { database.events.publish(.transaction(record)) }
        return record
    }

    /// Puts a receipt the store re-issued (signed with a current key, same claims) in place of the
    /// one this device holds for `transactionId`, on the purchase and on its queued download.
    /// The caller has verified it. The state does not change: only the proof does.
    /// - Returns: whether this device held that transaction.
    func replaceReceipt(transactionId: String, with receipt: String) throws -> Bool {
        let record = try database.write { db -> PaymentRecord? in
            let changed = try PaymentRow.filter(PaymentRecord.Columns.transactionId == transactionId)
                .updateAll(db, [Column("receipt").set(to: receipt), PaymentRecord.Columns.updatedAt.set(to: Date())])
            guard changed > 0 else { return nil }
            try DownloadRow.filter(Column("transactionId") == transactionId).updateAll(db, [Column("receipt").set(to: receipt)])
            return try PaymentRow.filter(PaymentRecord.Columns.transactionId == transactionId).fetchOne(db)?.value
        }
        if let record { database.events.publish(.transaction(record)) }
        return record != nil
    }

    /// Keeps why an attempt failed and when to try again, without changing the state.
    func recordPaymentFailure(_ id: Int64, message: String, retryAt: Date) throws {
        let record = try database.write { db -> PaymentRecord? in
            try PaymentRow.filter(key: id).updateAll(db, [
                PaymentRecord.Columns.lastError.set(to: message),
                PaymentRecord.Columns.attempts += 1,
                PaymentRecord.Columns.nextAttemptAt.set(to: retryAt),
                PaymentRecord.Columns.updatedAt.set(to: Date()),
            ])
            return try PaymentRow.fetchOne(db, key: id)?.value
        }
        if let record { database.events.publish(.transaction(record)) }
    }

    // MARK: Plumbing

    private static var clearedError: [ColumnAssignment] {
        [PaymentRecord.Columns.lastError.set(to: nil), PaymentRecord.Columns.attempts.set(to: 0), PaymentRecord.Columns.nextAttemptAt.set(to: nil)]
    }

    /// Makes one of the table's moves (``PaymentTransition``) in one transaction, or throws naming
    /// both states. `prepare` runs first, in the same transaction.
    private func movePayment(_ id: Int64, _ move: PaymentTransition, _ assignments: [ColumnAssignment],
                             prepare: (Database) throws -> Void = { _ in }) throws -> PaymentRecord {
        let (allowed, target) = (move.from, move.to)
        let record = try database.write { db -> PaymentRecord in
            try prepare(db)
            let changed = try PaymentRow
                .filter(key: id)
                .filter(allowed.map(\.rawValue).contains(PaymentRecord.Columns.state))
                .updateAll(db, [PaymentRecord.Columns.state.set(to: target.rawValue), PaymentRecord.Columns.updatedAt.set(to: Date())] + assignments)
            let current = try PaymentRow.fetchOne(db, key: id)?.value
            guard changed == 1, let current else {
                throw IllegalTransition(subject: current?.subject ?? "transaction #\(id)", current: current?.state.rawValue, target: target.rawValue)
            }
            return current
        }
        database.events.publish(.transaction(record))
        return record
    }
}
