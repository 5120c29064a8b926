import Foundation
import SQLKit
import KioskCore
import Logging

/// Payments: charges, redemptions, Ask to Buy's approvals and declines, finishing, revoking and
/// refunding, each decided against what the account holds (``Holdings``) and committed under the
/// account's compare-and-set (see ``settle``).
///
/// Every change is one database transaction, on SQLite or PostgreSQL alike. A payment is decided against a snapshot of what the
/// account holds and committed only if the account has not changed since.
public struct Payments: StoreOwner {
    let base: StoreBase
    // MARK: Payments

    /// Charges (or defers, declines, cancels) a payment, at most once per idempotency key.
    public func pay(_ request: PaymentRequest, accountId: String) async throws -> PaymentResponse {
        // Every method of this route is the sandbox's pretend payment: a production store grants
        // only for a real proof of payment (the App Store bridge).
        guard environment == .sandbox else { throw StoreError.pretendPayment(request.paymentMethod.rawValue) }
        try Self.checkKey(request.idempotencyKey)
        try RequestText.check(request.productId, field: "productId")
        guard (1...100).contains(request.quantity) else {
            throw StoreError.invalidRequest("quantity must be between 1 and 100, not \(request.quantity)")
        }
        if let token = request.appAccountToken, UUID(uuidString: token) == nil {
            throw StoreError.invalidRequest("appAccountToken must be a UUID, not \"\(token.prefix(64))\"")
        }
        let keyed = KeyedRequest(key: request.idempotencyKey, productId: request.productId, quantity: request.quantity, method: request.paymentMethod.rawValue)
        let product: Product
        switch try await sale(of: keyed, accountId: accountId) {
        case .answered(let earlier): return earlier
        case .sell(let sellable): product = sellable
        }
        guard request.quantity == 1 || product.kind == .consumable else {
            throw StoreError.invalidRequest("only consumables can be bought in a quantity; \(product.id) is a \(product.kind.rawValue)")
        }
        // An offer code used with the purchase: checked now, spent in the purchase's own write
        // (only when it goes through: not on a decline, a cancel or a free re-buy).
        var code: OfferCodes.Use?
        if let text = request.offerCode {
            // The same purchase sent again finds its code spent by itself: answered as it was.
            if let earlier = try await replayed(keyed, accountId: accountId) { return earlier }
            guard request.paymentMethod != .defer else {
                throw StoreError.invalidRequest("an offer code is used when the purchase is made, not while it waits for approval; buy without Ask to Buy")
            }
            code = try await codes.use(text, for: product, accountId: accountId)
        }
        let use = code
        // A consumable's outcome depends on nothing the account holds, unless it asks to wait
        // for approval (one pending request per product).
        let readsHoldings = product.kind != .consumable || request.paymentMethod == .defer || product.prices != nil || !base.taxes.isEmpty
        // A subscription's dates are in the account's time, which the sandbox may run ahead.
        let now: Date = if product.kind == .subscription { try await accountNow(accountId) } else { clock.wallNow() }
        var spend: Alongside?
        if let use {
            spend = { @Sendable (record: TransactionRecord, db: any SQLDatabase) async throws -> any Sendable in
                guard record.status == .purchased, !record.isFreeRebuy else { return false }
                try await OfferCodes.spend(use, accountId: accountId, transactionId: record.id, now: now, in: db)
                return true
            }
        }
        let spendCode = spend
        let settled = try await settle(account: accountId, request: keyed, product: product, readsHoldings: readsHoldings || use != nil,
                                       alongside: spendCode) { holdings in
            var record = TransactionRecord.pending(
                account: accountId, product: product, quantity: request.quantity, method: request.paymentMethod.rawValue, key: request.idempotencyKey, at: clock.wallNow())
            record.appAccountToken = request.appAccountToken
            switch request.paymentMethod {
            case .cancel:
                record.status = .cancelled
                record.message = "the purchase was cancelled; nothing was charged"
            case .decline:
                record.status = .declined
                record.message = "the payment was declined (sandbox method 'decline'); nothing was charged, try another payment method"
            case .defer:
                // One pending request per account and product: asking again answers the same one.
                if let pending = holdings.pending { return .existing(pending) }
                if let owned = holdings.decideOwned(&record, product: product, now: now) { return owned }
                record.message = "waiting for approval (Ask to Buy)"
            case .approve:
                try holdings.decide(&record, product: product, now: now)
                if let use, !record.isFreeRebuy { try holdings.apply(use.benefit, to: &record, product: product, now: now) }
            }
            return .new(record)
        }
        let stored = settled.record
        logger.info("payment", metadata: ["transaction": "\(stored.id)", "product": "\(stored.productId)", "outcome": "\(stored.status.rawValue)"])
        metrics.payment(outcome: stored.isFreeRebuy ? PaidBy.owned.rawValue : stored.status.rawValue)
        return try await response(for: settled)
    }

    /// Spends credits on a product that has a credit price, giving a signed transaction of its own.
    public func redeem(_ request: RedemptionRequest, accountId: String) async throws -> PaymentResponse {
        try Self.checkKey(request.idempotencyKey)
        try RequestText.check(request.productId, field: "productId")
        let keyed = KeyedRequest(key: request.idempotencyKey, productId: request.productId, quantity: 1, method: PaidBy.credits.rawValue)
        let product: Product
        switch try await sale(of: keyed, accountId: accountId) {
        case .answered(let earlier): return earlier
        case .sell(let sellable): product = sellable
        }
        guard product.creditPrice != nil else {
            throw StoreError.notRedeemable(product.id)
        }
        let settled = try await settle(account: accountId, request: keyed, product: product) { holdings in
            let now = clock.wallNow()
            var record = TransactionRecord.pending(account: accountId, product: product, quantity: 1, method: PaidBy.credits.rawValue, key: request.idempotencyKey, at: now)
            try holdings.decide(&record, product: product, now: now)
            return .new(record)
        }
        metrics.payment(outcome: settled.record.isFreeRebuy ? PaidBy.owned.rawValue : "redeemed")
        return try await response(for: settled)
    }

    /// Approves a deferred (Ask to Buy) transaction: charges it and signs its receipt. Approved
    /// after the account came to own the product another way, it is a free re-buy.
    ///
    /// Exactly one decision settles a request: the commit takes the request's row and settles it
    /// only while it is still deferred (see ``commit(_:replacing:over:)``), so an approval that
    /// loses to a decline (or to another approval) is refused (`not_deferred`) and charges nothing.
    public func approve(transactionId: String) async throws -> StoreTransaction {
        try Self.checkTransactionId(transactionId)
        let deferred = try await transaction(transactionId)
        guard deferred.status == .deferred else { throw Self.notDeferred(deferred) }
        // Taken off sale while the request waited: nothing is sold any more (decline it).
        let product = try await sellable(deferred.productId)
        let keyed = KeyedRequest(key: deferred.idempotencyKey, productId: product.id, quantity: deferred.quantity, method: PaymentMethod.defer.rawValue)
        let now: Date = if product.kind == .subscription { try await accountNow(deferred.accountId) } else { clock.wallNow() }
        let settled = try await settle(account: deferred.accountId, request: keyed, product: product, replacing: deferred) { holdings in
            var record = deferred
            record.paymentMethod = PaymentMethod.approve.rawValue
            try holdings.decide(&record, product: product, now: now)
            return .new(record)
        }
        return settled.record.wire
    }

    /// Declines a deferred transaction: nothing is charged. The request's row is taken first, so
    /// a decline and an approval of one request at once settle it once: the later one is refused.
    public func decline(transactionId: String) async throws -> StoreTransaction {
        try Self.checkTransactionId(transactionId)
        let declined = try await database.write { db in
            guard let found = try await TransactionRows(db).find(transactionId) else {
                throw StoreError.unknownTransaction(transactionId)
            }
            // The account row first (its next change number), as every writer of an account.
            let change = try await TransactionRows(db).recordChange(of: transactionId, accountId: found.accountId)
            guard var record = try await TransactionRows(db).locked(transactionId) else {
                throw StoreError.unknownTransaction(transactionId)
            }
            guard record.status == .deferred else { throw Self.notDeferred(record) }
            record.changeSequence = change
            record.status = .declined
            record.message = "the request to buy was declined; nothing was charged"
            let declined = record
            guard try await TransactionRows(db).change(transactionId, from: .deferred, {
                $0.set("status", to: declined.status.rawValue).set("message", to: declined.message)
            }) else {
                throw StoreError.settledMeanwhile(transactionId)
            }
            try await PlannedRows.announce(StoreNotification(type: StoreNotification.Kind.askToBuyDeclined, subtype: nil, accountId: record.accountId,
                                                    transactionId: record.id, originalTransactionId: record.originalTransactionId, renewalInfo: nil), at: clock.wallNow(), in: db)
            return record
        }
        changes.committed(declined.accountId)
        return declined.wire
    }

    /// Revokes a purchased transaction: its receipt stops entitling anything, and the date and
    /// reason appear in the account's transaction list, so its devices learn of it. With
    /// `refund`, the money charged is paid back (a negative ledger entry) and the credits the
    /// purchase granted are taken back; a revoked purchase not yet refunded can still be refunded.
    ///
    /// The free re-buys that stood on it (`owned`, pointing at it as their original, or mirroring
    /// the revoked subscription period) are revoked with it: they were granted only because of it,
    /// and left standing they would keep entitling the content and answer the next buy as owned.
    /// The account's revision moves, so a payment decided before the revocation decides again.
    ///
    /// A credit pack is refunded only while the balance still holds every credit it granted: this
    /// is the one place that rule is decided. Taking back only what is left (as the store once did)
    /// paid the money back while the reader kept what the spent credits bought, so the ledger
    /// netted to nothing for goods delivered. Recording a debt would need a negative balance that
    /// every spending path then has to honour, and revoking "what was redeemed" has no answer:
    /// credits are fungible, so no redemption was paid with this pack's credits rather than
    /// another's. Refusing (`credits_spent`) leaves the choice with the operator: revoke the
    /// pack without paying anything back, or refund it once the balance holds its credits again.
    ///
    /// A book or an issue bought with credits is refunded in credits: its price goes back to the
    /// balance (there was no money to pay back). The refund's ledger entry (0 cents then) is what
    /// marks the transaction refunded, so a second refund is refused on every kind of purchase.
    ///
    /// A second revocation, or a second refund, is refused naming the state, not a silent success: the
    /// answer says what this call did, and a call that did nothing must not claim the work.
    /// - Throws: ``StoreError`` `unknown_transaction`; `not_purchased`, `already_revoked`,
    ///   `already_refunded` or `credits_spent`, with nothing written.
    public func revoke(transactionId: String, reason: String?, refund: Bool = false) async throws -> AdminRevocation {
        try Self.checkTransactionId(transactionId)
        if let reason { try RequestText.check(reason, field: "reason", maxBytes: RequestText.maxReasonBytes, allowEmpty: true) }
        let reason = reason.flatMap { $0.isEmpty ? nil : $0 } ?? (refund ? "refunded by the store" : "revoked by the store")
        let revocation = try await database.write { db in
            guard let found = try await TransactionRows(db).find(transactionId) else {
                throw StoreError.unknownTransaction(transactionId)
            }
            // The account row first: a payment that committed before this sees its free re-buy
            // revoked below, and one still deciding waits for this commit and then finds the
            // revision moved. (On PostgreSQL, reading the re-buys before taking the row let a
            // payment slip a re-buy in between.) Then the transaction's own row, which the
            // customer's finish also takes: no write of either is made from a stale read.
            try await AccountRows(db).moveRevision(of: found.accountId)
            guard var record = try await TransactionRows(db).locked(transactionId) else {
                throw StoreError.unknownTransaction(transactionId)
            }
            guard record.status == .purchased || record.status == .revoked else {
                throw StoreError.notRevocable(transactionId, status: record.status)
            }
            let entries = try await TransactionRows(db).ledger { $0.where("transactionId", .equal, transactionId) }
            let charged = entries.first { $0.kind == .charge }
            // What an upgrade credited of this period is paid back already: a refund pays the rest.
            let credited = entries.filter { $0.kind == .credit }.reduce(0) { $0 - $1.amountCents }
            let refundable = max(0, (charged?.amountCents ?? 0) - credited)
            let refundDue = refund && !entries.contains { $0.kind == .refund }
                && (charged != nil || record.creditsGranted > 0 || record.creditsSpent > 0)
            if record.status == .revoked, !refundDue {
                throw refund ? StoreError.alreadyRefunded(transactionId) : StoreError.alreadyRevoked(transactionId)
            }
            guard let account = try await AccountRows(db).find(record.accountId) else {
                throw StoreError.unknownAccount(record.accountId)
            }
            let withdrawn = refundDue ? record.creditsGranted : 0
            let returned = refundDue ? record.creditsSpent : 0
            guard account.credits >= withdrawn else {
                throw StoreError.creditsSpent(transactionId, granted: withdrawn, balance: account.credits)
            }
            var alsoRevoked: [String] = []
            if record.status == .purchased {
                (record, alsoRevoked) = try await revokeWithRebuys(record, reason: reason, in: db)
            }
            // A subscription's period carries its renewal info as it stands after this, as App Store's does.
            let subscription = record.kind == .subscription
                ? try await db.select().column("*").from("subscription").where("originalTransactionId", .equal, record.originalTransactionId)
                    .first(decoding: SubscriptionRecord.self)
                : nil
            try await PlannedRows.announce(StoreNotification(
                type: refundDue ? StoreNotification.Kind.refund : StoreNotification.Kind.revoke, subtype: nil, accountId: record.accountId,
                transactionId: record.id, originalTransactionId: record.originalTransactionId,
                renewalInfo: subscription.map { RenewalInfo($0, environment: keys.identity.environment) }), at: clock.wallNow(), in: db)
            let credits = refundDue
                ? try await payBack(record, cents: refundable, charged: charged, returning: returned, withdrawing: withdrawn,
                                    balance: account.credits, reason: reason, in: db)
                : account.credits
            return AdminRevocation(transaction: record.wire, refundedCents: refundDue ? refundable : 0, currency: charged?.currency ?? record.currency,
                                   creditsWithdrawn: withdrawn, creditsReturned: returned, credits: credits, alsoRevoked: alsoRevoked)
        }
        if let accountId = try? await database.read({ try await TransactionRows($0).find(transactionId)?.accountId }) {
            changes.committed(accountId)
        }
        return revocation
    }

    /// Marks a purchased transaction revoked, and its free re-buys with it (a subscription's mirror
    /// the period they stood on, dates compared to the millisecond); ends a subscription's period.
    /// - Returns: the transaction as revoked, and the re-buys revoked with it.
    /// - Throws: ``StoreError`` `revokedMeanwhile` when another writer revoked it first.
    private func revokeWithRebuys(_ purchased: TransactionRecord, reason: String, in db: any SQLDatabase) async throws -> (TransactionRecord, [String]) {
        var record = purchased
        record.status = .revoked
        record.revokedAt = clock.wallNow()
        record.revocationReason = reason
        guard try await Self.markRevoked(record, in: db) else {
            throw StoreError.revokedMeanwhile(record.id)
        }
        record.changeSequence = try await TransactionRows(db).recordChange(of: record.id, accountId: record.accountId)
        let revoked = record
        if revoked.kind == .subscription { try await SubscriptionRows(db).end(refunded: revoked, at: clock.wallNow()) }
        let derived = try await TransactionRows(db).list {
            $0.where("accountId", .equal, revoked.accountId).where("productId", .equal, revoked.productId)
                .where("status", .equal, TransactionStatus.purchased.rawValue).where("paymentMethod", .equal, PaidBy.owned.rawValue)
                .where("originalTransactionId", .equal, revoked.originalTransactionId)
        }
        var alsoRevoked: [String] = []
        for var rebuy in derived where revoked.kind != .subscription || Store.sameInstant(rebuy.expiresDate, revoked.expiresDate) {
            rebuy.revokedAt = revoked.revokedAt
            rebuy.revocationReason = reason
            if try await Self.markRevoked(rebuy, in: db) {
                try await TransactionRows(db).recordChange(of: rebuy.id, accountId: rebuy.accountId)
                alsoRevoked.append(rebuy.id)
            }
        }
        return (record, alsoRevoked)
    }

    /// A refund's ledger entry (what was charged and not yet credited, paid back; 0 cents for a purchase made with
    /// credits), and the credits it gives back or takes away. Returns the balance after it.
    private func payBack(_ record: TransactionRecord, cents: Int, charged: LedgerEntry?, returning returned: Int, withdrawing withdrawn: Int, balance: Int,
                         reason: String, in db: any SQLDatabase) async throws -> Int {
        // The refund pays back its share of the charge's tax (a credit given before took its own).
        let entry = charged?.payingBack(cents, kind: .refund, transactionId: record.id, reason: reason, at: clock.wallNow())
            ?? LedgerEntry(id: nil, transactionId: record.id, kind: .refund, accountId: record.accountId, amountCents: -cents, currency: record.currency,
                           reason: reason, createdAt: clock.wallNow())
        try await TransactionRows(db).insertLedger(entry)
        guard returned != withdrawn else { return balance }
        let left = try await AccountRows(db).addCredits(returned - withdrawn, to: record.accountId)
        return left ?? balance + returned - withdrawn
    }

    /// Writes a revocation's three columns, only while the transaction is still purchased: the
    /// condition keeps the write from ever undoing another, whatever was read before it.
    /// - Returns: whether it was still purchased.
    private static func markRevoked(_ record: TransactionRecord, in db: any SQLDatabase) async throws -> Bool {
        try await TransactionRows(db).change(record.id, from: .purchased) {
            $0.set("status", to: TransactionStatus.revoked.rawValue).set("revokedAt", to: record.revokedAt).set("revocationReason", to: record.revocationReason)
        }
    }

    /// Records that the client delivered a purchased transaction.
    ///
    /// It writes the one column it owns, `finishedAt`, under the row's lock: written back whole,
    /// a finish racing the operator's refund put the transaction back to `purchased`, refund and all.
    /// A finish of a revoked transaction is accepted (the client may learn of the revocation later).
    public func finish(transactionId: String, accountId: String) async throws -> StoreTransaction {
        try Self.checkTransactionId(transactionId)
        return try await database.write { db in
            guard var record = try await TransactionRows(db).locked(transactionId), record.accountId == accountId else {
                throw StoreError.unknownTransaction(transactionId, ofAccount: true)
            }
            guard record.status == .purchased || record.status == .revoked else {
                throw StoreError.notFinishable(transactionId, status: record.status)
            }
            if record.finishedAt == nil {
                let finishedAt = clock.wallNow()
                try await TransactionRows(db).setFinished(transactionId, at: finishedAt)
                record.finishedAt = finishedAt
                if record.kind == .consumable, record.status == .purchased {
                    try await PlannedRows.announce(StoreNotification(type: StoreNotification.Kind.consumableDelivered, subtype: nil, accountId: accountId,
                                                            transactionId: record.id, originalTransactionId: record.originalTransactionId, renewalInfo: nil), at: clock.wallNow(), in: db)
                }
            }
            return record.wire
        }
    }

    // MARK: Deciding and committing

    /// More rows a caller writes with a new decision, given the transaction as recorded, and what it
    /// answers (what it wrote, what it read). On SQLite they are written in the decision's own
    /// transaction, whose writes are serialized with every other. On PostgreSQL right after it
    /// commits, each statement on its own: there a purchase is one statement
    /// (``commit(_:over:alongside:)``), which more rows would break into seven round trips. So they
    /// must be rows a retry of the caller writes again, and it reads only what a committed write may.
    typealias Alongside = @Sendable (TransactionRecord, any SQLDatabase) async throws -> any Sendable

    /// What a decision comes to: a new (or settled) transaction, or one that already answers it.
    enum Decision {
        case new(TransactionRecord)
        case existing(TransactionRecord)
    }

    /// A settled payment and, when this payment committed it, the account's balance it left, as
    /// its write returned it (nil when an earlier transaction answered: the balance is read then).
    struct Settled: Sendable {
        var record: TransactionRecord
        var credits: Int?
        /// What the caller's ``Alongside`` answered: nil when it did not run (an earlier transaction answered).
        var alongside: (any Sendable)?
    }

    /// Decides a payment against what the account holds and commits it, all or nothing.
    ///
    /// Signing is async and cannot run inside an SQLite transaction, so the decision is taken on a
    /// snapshot of the account (`revision`), signed, and committed only if the account is still
    /// at that revision: a concurrent payment of the same account makes this one decide again,
    /// from what the other committed. N buys of one book therefore charge once (the others are
    /// free re-buys of the first), and N redemptions spend credits once each, exactly. Unique
    /// indexes back the rules the schema can state.
    ///
    /// A decision that `readsHoldings` false (a consumable's charge: its price and credits are the
    /// product's) is first taken on ``Holdings/unread`` and written at whatever revision the
    /// account is at, with the balance's bound checked by the write itself (``AccountRows/advanceStep(account:from:adding:)``):
    /// one statement instead of a look-up and a write, like `pgbench`'s own
    /// `UPDATE … SET abalance = abalance + delta`. Such a write conflicts with no other, so it
    /// shares the account's turn with the others like it (``AccountTurns``): two packs bought at
    /// once on one account share SQLite's group commit, and on PostgreSQL the second waits only on
    /// the row, not for the first's answer; they wait only while a payment that decides on the
    /// holdings has the turn. What only a look-up can answer falls back to it, in turn: an idempotency
    /// key already used (the unique index refuses the insert, undoing the write), a balance that
    /// would overflow, an unknown account.
    ///
    /// `alongside` writes more rows in the decision's own transaction (a channel's event row, with
    /// what the decision came to): one commit where there were two.
    func settle(
        account accountId: String, request: KeyedRequest, product: Product, readsHoldings: Bool = true, replacing deferred: TransactionRecord? = nil,
        alongside: Alongside? = nil, _ decide: @Sendable (Holdings) throws -> Decision
    ) async throws -> Settled {
        if !readsHoldings, deferred == nil,
           let settled = try await turns.run(accountId, shared: true, { try await attempt(on: .unread, request: request, replacing: nil, alongside: alongside, decide) }) {
            changes.committed(accountId)
            return settled
        }
        defer { changes.committed(accountId) }
        // A subscription is decided on the account's plans in its group: the one running, and the
        // history an introductory offer depends on.
        let planGroup = product.kind == .subscription ? try await subscriptions(inGroupOf: product) : []
        let group = product.introductoryOffer == nil ? [] : planGroup
        return try await turns.run(accountId) {
            for _ in 0..<64 {
                var holdings = try await database.read {
                    try await Holdings.read(accountId: accountId, product: product, key: request.key, group: group, planGroup: planGroup, in: $0)
                }
                holdings.taxes = base.taxes
                if let settled = try await attempt(on: holdings, request: request, replacing: deferred, alongside: alongside, decide) {
                    return settled
                }
            }
            throw StoreError.accountBusy
        }
    }

    /// Decides once on `holdings` and commits the decision; nil when the account moved meanwhile
    /// or a rule of the schema refused the write, so the caller decides again on a fresh look-up.
    private func attempt(
        on holdings: Holdings, request: KeyedRequest, replacing deferred: TransactionRecord?, alongside: Alongside?,
        _ decide: @Sendable (Holdings) throws -> Decision
    ) async throws -> Settled? {
        if deferred == nil, let existing = holdings.sameKey {
            try request.check(replayOf: existing)
            return Settled(record: existing, credits: nil)
        }
        var record: TransactionRecord
        switch try decide(holdings) {
        case .existing(let existing): return Settled(record: existing, credits: nil)
        case .new(let decided): record = decided
        }
        if record.status == .purchased {
            record.signedTransaction = try await keys.sign(claims(of: record))
        }
        do {
            return if let deferred {
                try await commit(record, replacing: deferred, over: holdings)
            } else {
                try await commit(record, over: holdings, alongside: alongside)
            }
        } catch is SettleConflict {
            return nil
        } catch where database.isUniqueViolation(error) {
            // A rule of the schema caught what the revision did not: decide again. Unread
            // holdings expect it: a replayed idempotency key is found here.
            if holdings.revision != nil {
                logger.warning("payment hit a unique constraint; deciding again", metadata: ["error": "\(ServerDatabase.describe(error))"])
            }
            return nil
        }
    }

    /// Records a new decision while the account is still at the snapshot's revision (for
    /// ``Holdings/unread``: while its balance stays in range), else throws ``SettleConflict``: the
    /// compare-and-set that makes the decision valid, the transaction, and for a charge its ledger
    /// entry, all or nothing. The balance in the answer is the one the compare-and-set wrote.
    ///
    /// One plan (``RecordPurchase``), rendered for each engine: on PostgreSQL one statement
    /// (data-modifying CTEs), so one round trip with no BEGIN or COMMIT of its own: as five
    /// statements they were five round trips, each parsed and planned again by a backend, and the
    /// backends took half the machine. SQLite cannot put an INSERT inside a WITH, and gains nothing
    /// from it: it runs the plan's steps one by one in the group commit's transaction, in this process.
    private func commit(_ record: TransactionRecord, over holdings: Holdings, alongside: Alongside? = nil) async throws -> Settled {
        let delta = record.creditDelta
        let charge = LedgerEntry.charge(for: record, at: clock.wallNow())
        let starts = record.kind == .subscription && record.status == .purchased && !record.isFreeRebuy
        // A new subscription period starts its subscription's row and announces it: plain
        // statements on either engine (rarer than a pack or a book, and more than one statement).
        // So does a decision with rows of its own to write (a channel's event, a code's redemption):
        // they commit with it or not at all.
        if database.engine == .postgres, !starts, alongside == nil {
            // One account's purchases share commits (``AccountCommits``), as SQLite's group commit shares them all.
            let purchase = RecordPurchase(record: record, revision: holdings.revision, delta: delta, charge: charge)
            guard let (committed, credits) = try await accountCommits.record(purchase) else { throw SettleConflict() }
            var wrote: (any Sendable)?
            if let alongside { wrote = try await database.statement { db -> any Sendable in try await alongside(committed, db) } }
            return Settled(record: committed, credits: credits, alongside: wrote)
        }
        // The same plan, a step at a time, in the write transaction (SQLite's group commit runs it
        // in a task of its own: the request's trace is taken here).
        let traceParent = TraceParent.current()
        return try await database.write { db in
            let plan = RecordPurchase.plan(record, revision: holdings.revision, delta: delta, charge: charge,
                                           slot: SalesSlot.of(record.accountId, in: db), announcedAt: clock.wallNow(), traceParent: traceParent)
            guard let written = try await db.run(plan) else { throw SettleConflict() }
            var recorded = record
            recorded.sequence = try written.integer("recorded", "sequence")
            recorded.changeSequence = try written.integer("recorded", "changeSequence")
            if starts { try await self.startSubscription(recorded, in: db) }
            let wrote = try await alongside?(recorded, db)
            return Settled(record: recorded, credits: Int(try written.integer("advanced", "credits")), alongside: wrote)
        }
    }

    /// Starts (or starts again) the subscription a new period was bought for, in the purchase's
    /// write transaction, and announces it (`SUBSCRIBED`).
    private func startSubscription(_ record: TransactionRecord, in db: any SQLDatabase) async throws {
        guard record.kind == .subscription, record.status == .purchased, !record.isFreeRebuy, let expires = record.expiresDate else { return }
        let offset = try await Self.sandbox(record.accountId, in: db).clockOffset
        let environment = keys.identity.environment
        let now = clock.wallNow()
        // Only the sandbox's worker renews (with pretend money). A production store's subscription
        // bought through a channel renews where it was paid for, and until that channel tells the
        // store of each renewal, the store must not claim a renewal it cannot make: it ends at the
        // period's end.
        // An offer paid as it goes keeps its price for the renewals it still covers.
        let offer = try await catalog.storeProducts().products[record.productId]?.introductoryOffer
        let offerRenewals = record.offerType != nil && record.offerType == offer?.type.rawValue ? offer?.discountedRenewals ?? 0 : 0
        // A period given for nothing (an offer code, the operator's grant) renews at no one's
        // say-so: it ends, and the reader subscribes if they wish.
        let renews = environment == .sandbox && record.paymentMethod != PaidBy.code.rawValue && record.paymentMethod != PaidBy.operator.rawValue
        let (subscription, existed) = try await SubscriptionRows(db).start(record, expires: expires, renews: renews, clockOffset: offset,
                                                                          offerRenewalsLeft: offerRenewals, at: now)
        try await PlannedRows.announce(StoreNotification(
            type: StoreNotification.Kind.subscribed, subtype: existed ? "RESUBSCRIBE" : "INITIAL_BUY", accountId: record.accountId,
            transactionId: record.id, originalTransactionId: record.originalTransactionId,
            renewalInfo: RenewalInfo(subscription, environment: environment)), at: now, in: db)
    }

    /// Settles a deferred request (Ask to Buy approved) with the decision, under the same
    /// compare-and-set; the request must still be deferred. Rare enough to stay in plain statements.
    ///
    /// The request's row is taken (after the account's, the order every writer keeps) and written
    /// only while still deferred, with just the columns a settlement decides: a decline that
    /// committed first makes this refused (`not_deferred`), its compare-and-set, charge and credits rolled back.
    private func commit(_ decided: TransactionRecord, replacing deferred: TransactionRecord, over holdings: Holdings) async throws -> Settled {
        try await database.write { db in
            var record = decided
            guard let advanced = try await AccountRows(db).advance(record.accountId, from: holdings.revision, adding: record.creditDelta) else {
                throw SettleConflict()
            }
            try await AccountRows(db).refuseIfDeleted(record.accountId)
            let credits = advanced.credits
            record.sequence = deferred.sequence
            record.changeSequence = advanced.change
            guard let current = try await TransactionRows(db).locked(deferred.id) else {
                throw StoreError.unknownTransaction(deferred.id)
            }
            guard current.status == .deferred else { throw Self.notDeferred(current) }
            let settled = record
            guard try await TransactionRows(db).change(deferred.id, from: .deferred, {
                $0.set("status", to: settled.status.rawValue).set("paymentMethod", to: settled.paymentMethod)
                    .set("originalTransactionId", to: settled.originalTransactionId).set("purchaseDate", to: settled.purchaseDate)
                    .set("expiresDate", to: settled.expiresDate).set("amountCents", to: settled.amountCents)
                    .set("creditsGranted", to: settled.creditsGranted).set("creditsSpent", to: settled.creditsSpent)
                    .set("signedTransaction", to: settled.signedTransaction).set("message", to: settled.message)
                    .set("changeSequence", to: settled.changeSequence).set("offerType", to: settled.offerType).set("offerPeriod", to: settled.offerPeriod)
            }) else {
                throw StoreError.settledMeanwhile(deferred.id)
            }
            if let charge = LedgerEntry.charge(for: record, at: clock.wallNow()) { try await TransactionRows(db).insertLedger(charge) }
            try await self.startSubscription(record, in: db)
            if record.announcesCharge { try await PlannedRows.announce(record.chargeNotification, at: clock.wallNow(), in: db) }
            return Settled(record: record, credits: credits)
        }
    }

    /// The reply to a payment: the transaction and the balance; a declined payment is refused (`payment_declined`).
    private func response(for settled: Settled) async throws -> PaymentResponse {
        // A replayed key answers with the stored receipt, whose key may have been retired since.
        let record = if settled.credits == nil { try await receipts.withCurrentReceipts([settled.record])[0] } else { settled.record }
        if record.status == .declined {
            throw StoreError.paymentDeclined(record.message)
        }
        var credits = settled.credits
        if credits == nil {
            credits = try await database.read { try await AccountRows($0).find(record.accountId)?.credits ?? 0 }
        }
        return PaymentResponse(transaction: record.wire, credits: credits ?? 0, owned: record.isFreeRebuy)
    }

    private static func checkKey(_ key: String) throws {
        try RequestText.check(key, field: "idempotencyKey")
    }

    static func checkTransactionId(_ id: String) throws {
        try RequestText.check(id, field: "the transaction ID in the path")
    }

    /// The refusal of an approval or a decline that comes after the request was settled, naming the state it is in.
    static func notDeferred(_ record: TransactionRecord) -> StoreError {
        StoreError.notDeferred(record.id, status: record.status)
    }

    /// What an idempotency key was sent with: a replay of the key must send the same, as with
    /// Stripe's keys, or it is refused rather than answered with a purchase it did not ask for.
    struct KeyedRequest: Sendable {
        var key: String
        var productId: String
        var quantity: Int
        /// `approve`, `decline`, `cancel`, `defer`, or `credits` for a redemption.
        var method: String
        /// The key as its sender named it, in a refusal (an operator's grant key `g1` is kept as
        /// `operator:g1`); nil: ``key`` itself.
        var shownKey: String? = nil

        /// - Throws: ``StoreError`` `idempotency_key_reused` naming every field that differs from the first request.
        func check(replayOf existing: TransactionRecord) throws {
            var differences: [String] = []
            if existing.productId != productId { differences.append("product (\(productId), first \(existing.productId))") }
            if existing.quantity != quantity { differences.append("quantity (\(quantity), first \(existing.quantity))") }
            if let first = existing.requestedMethod, first != method { differences.append("payment method (\(method), first \(first))") }
            guard !differences.isEmpty else { return }
            throw StoreError.idempotencyKeyReused(shownKey ?? key, differences: differences)
        }
    }

    /// What a payment or redemption comes to before anything is decided: the product to sell, or,
    /// when it cannot be sold any more (off sale, gone), the answer the same key got the first
    /// time: a device whose answer was lost must not record a charge as refused.
    private enum Sale {
        case sell(Product)
        case answered(PaymentResponse)
    }

    private func sale(of request: KeyedRequest, accountId: String) async throws -> Sale {
        do {
            return .sell(try await sellable(request.productId))
        } catch let refusal as StoreError {
            guard let earlier = try await replayed(request, accountId: accountId) else { throw refusal }
            return .answered(earlier)
        }
    }

    /// The answer a payment or redemption got the first time, when `request`'s key was used
    /// before by the account (the same request, or a 422 naming what differs); nil when it was not.
    private func replayed(_ request: KeyedRequest, accountId: String) async throws -> PaymentResponse? {
        let key = request.key
        guard let existing = try await database.read({ db in
            try await TransactionRows(db).list { $0.where("accountId", .equal, accountId).where("idempotencyKey", .equal, key) }.first
        }) else { return nil }
        try request.check(replayOf: existing)
        return try await response(for: Settled(record: existing, credits: nil))
    }

    // MARK: Introductory offers

    /// Whether `accountId` would be given `product`'s introductory offer now: it never had a
    /// subscription in the product's group (the rule ``Holdings/decide(_:product:now:)`` applies).
    public func introductoryOfferEligible(accountId: String, product: Product) async throws -> Bool {
        guard product.introductoryOffer != nil else { return false }
        let group = try await subscriptions(inGroupOf: product)
        return try await !database.read { try await Holdings.hadSubscription(accountId: accountId, among: group, in: $0) }
    }

    /// Another plan of `product`'s group the account subscribes to now (not expired), and its
    /// period's end: while it runs, `product` is not sold to the account (``StoreError/planRunning(_:until:wanted:)``).
    public func runningPlan(inGroupOf product: Product, accountId: String) async throws -> (productId: String, until: Date)? {
        guard product.kind == .subscription else { return nil }
        let others = try await subscriptions(inGroupOf: product).filter { $0 != product.id }
        let plan = try await database.read { try await SubscriptionRows($0).unended(accountId: accountId, among: others) }
        return plan.map { ($0.productId, $0.expiresDate) }
    }

    /// The IDs of the subscriptions in `product`'s group (``Product/group``), the catalog's now.
    func subscriptions(inGroupOf product: Product) async throws -> [String] {
        try await catalog.storeProducts().products.values.filter { $0.kind == .subscription && $0.group == product.group }.map(\.id).sorted()
    }

    // MARK: Helpers

    /// The account moved on between the snapshot and the commit.
    private struct SettleConflict: Error {}
}
