import Foundation
import KioskCore
import SQLKit

/// The web shop's channel: Stripe's signed events, turned into Kiosk purchases and revocations.
///
/// The route checks the event's signature (``StripeSignature``) before anything here reads it.
/// Stripe sends an event again until it is answered 2xx, and events come in any order, so:
/// - a grant is keyed by the Checkout Session (the transaction's idempotency key `stripe:<session>`):
///   the same session granted twice is one purchase;
/// - every event is kept once by its id (`channelEvent`), with what came of it; one Kiosk cannot
///   match (an unknown account or product, a product off sale) is answered 200 and kept for the
///   operator (`kiosk admin events --unmatched`), never dropped;
/// - a refund or a dispute may arrive before the grant it undoes. Each side writes its event row
///   first and then looks for the other's: the grant for a refund of its payment, the refund for a
///   grant of it. Whichever commits second sees the first, so a refund never misses its grant.
public struct StripeChannel: StoreOwner {
    let base: StoreBase

    static let channel = PaidBy.stripe.rawValue
    /// Checkout Session events that mean the money arrived.
    static let paidTypes: Set<String> = ["checkout.session.completed", "checkout.session.async_payment_succeeded"]
    /// Events whose row names a grant of their payment: a checkout's, or a subscription's invoice.
    static let grantTypes = paidTypes.union(["invoice.paid"])
    /// Events that take the money back.
    static let withdrawalTypes: Set<String> = ["charge.refunded", "charge.dispute.created"]

    /// Applies one verified event; the answer says what came of it.
    public func receive(_ event: StripeEvent) async throws -> AdminChannelEventRow {
        guard Self.isIdentifier(event.id) else { throw StoreError.invalidRequest("the event's id is not a Stripe event id") }
        // A paid session's event is not looked up first: its grant is keyed by the session, and its
        // row is written with the grant, so a resent one finds both there (one read fewer an event).
        if !Self.paidTypes.contains(event.type), let kept = try await kept(event.id) {
            // Sent again: answered as it was kept. A step its first delivery may not have finished
            // (a process stopped between two writes) is taken again: a grant's look for a refund
            // that came first, a withdrawal's look for its grant.
            switch kept.outcome {
            case ChannelEventOutcome.unmatched where Self.withdrawalTypes.contains(event.type):
                break
            default:
                return kept
            }
        }
        let object = event.data.object
        if environment == .production, event.livemode == false {
            // Test cards pay for nothing: a test-mode endpoint pointed here by mistake grants nothing.
            return try await keep(event, payment: object.paymentIntent, outcome: ChannelEventOutcome.ignored,
                                  detail: "an event of Stripe's test mode; a production store acts on live events only (check the webhook endpoint's mode)")
        }
        switch event.type {
        case let type where Self.paidTypes.contains(type) && object.mode == "subscription":
            return try await subscriptionCheckoutPaid(event, session: object)
        case let type where Self.paidTypes.contains(type):
            return try await checkoutPaid(event, session: object)
        case "checkout.session.expired":
            return try await checkoutExpired(event, session: object)
        case "invoice.paid":
            return try await invoicePaid(event, invoice: object)
        case "invoice.payment_failed":
            return try await invoiceFailed(event, invoice: object)
        case "customer.subscription.updated", "customer.subscription.deleted":
            return try await subscriptionChanged(event, subscription: object)
        case "invoice.payment_succeeded":
            return try await keep(event, payment: object.invoicePaymentIntent, outcome: ChannelEventOutcome.ignored,
                                  detail: "Kiosk acts on the invoice's invoice.paid, which Stripe sends with it")
        case "charge.refunded":
            let amount = object.amount ?? 0
            guard object.refunded == true || (amount > 0 && (object.amountRefunded ?? 0) >= amount) else {
                return try await keep(event, payment: object.paymentIntent, outcome: ChannelEventOutcome.partialRefund,
                                      detail: "a part of the payment was refunded; nothing was revoked (revoke it by hand if the refund meant to)")
            }
            return try await withdraw(event, payment: object.paymentIntent, reason: "refunded on Stripe")
        case "charge.dispute.created":
            return try await withdraw(event, payment: object.paymentIntent, reason: "disputed by the card holder on Stripe")
        case "charge.dispute.closed" where object.status == "won", "charge.dispute.funds_reinstated":
            return try await disputeWon(event, payment: object.paymentIntent)
        default:
            return try await keep(event, payment: object.paymentIntent, outcome: ChannelEventOutcome.ignored, detail: "an event of a type Kiosk does not act on")
        }
    }

    // MARK: What each event does

    private func checkoutPaid(_ event: StripeEvent, session: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        let payment = session.paymentIntent ?? session.id
        // A session a coupon made free is complete without a payment: it grants as a paid one does.
        guard session.paymentStatus == "paid" || session.paymentStatus == "no_payment_required" else {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.pending,
                                  detail: "the session is not paid yet (\(session.paymentStatus.map { String($0.prefix(40)) } ?? "no payment_status")); its async_payment_succeeded grants it")
        }
        let purchase: SessionPurchase
        switch try await sessionPurchase(event, session: session, payment: payment) {
        case .named(let named): purchase = named
        case .kept(let row): return row
        }
        let (sessionId, accountId, productId, quantity, amount, currency) = (purchase.sessionId, purchase.accountId, purchase.productId, purchase.quantity, purchase.amountCents, purchase.currency)
        // The event's row is written in the grant's own transaction, with what the grant came to:
        // one commit per event, as a purchase has (issue 44's measure, docs/benchmarks.md).
        let received = clock.wallNow()
        let paymentId = payment.flatMap { Self.isIdentifier($0) ? $0 : nil }
        @Sendable func row(for record: TransactionRecord) -> AdminChannelEventRow {
            let owned = record.isFreeRebuy
            return AdminChannelEventRow(
                channel: Self.channel, eventId: event.id, type: String(event.type.prefix(100)), payment: paymentId, outcome: owned ? ChannelEventOutcome.owned : ChannelEventOutcome.granted,
                detail: owned ? "paid for \(productId), which the account already had: refund it on Stripe" : "granted \(productId)",
                accountId: String(accountId.prefix(100)), transactionId: record.id, receivedAt: received)
        }
        let granted: (record: TransactionRecord, alongside: (any Sendable)?)
        do {
            granted = try await payments.grantPaid(
                productId: productId, quantity: quantity, accountId: accountId, reference: "stripe:\(sessionId)", method: Self.channel,
                amountCents: amount, currency: currency, channelTax: stripeTax(session), checkoutStorefront: purchase.storefront,
                alongside: { record, db in
                    // The code its checkout reserved is this grant's.
                    if let code = purchase.offerCode { try await OfferCodes.attach(codeId: code.codeId, intent: code.intent, to: record.id, in: db) }
                    // The row first, then the look for a refund that came first: the refund's own
                    // look for this row comes after its write, so one of the two sees the other.
                    let inserted = try await InsertChannelEvent.insert(row(for: record), in: db)
                    let found = try await Self.withdrawals(of: paymentId ?? "", account: record.accountId, in: db)
                    return Written(inserted: inserted, withdrawals: found.filter { !$0.accountClosed }, accountClosed: found.contains { $0.accountClosed })
                })
        } catch let refusal as StoreError {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: accountId,
                                  detail: "paid but not granted: \(refusal.message); refund it on Stripe or grant it by hand")
        }
        var row = row(for: granted.record)
        guard let written = granted.alongside as? Written else {
            // An earlier grant answered: this event sent again, or the session's other event.
            row = try await channelRecords.keepEvent(row)
            return row.outcome == ChannelEventOutcome.granted || row.outcome == ChannelEventOutcome.owned ? try await undoIfWithdrawn(row) : row
        }
        if written.accountClosed, row.outcome == ChannelEventOutcome.granted, let transaction = row.transactionId {
            // Paid for an account deleted or disabled meanwhile: nobody can use the grant. Taken back
            // here (so the ledger says so) and kept for the operator to refund on Stripe.
            _ = try await channelRecords.revokeGrant(transaction, reason: "paid for an account that is deleted or disabled")
            row.outcome = ChannelEventOutcome.unmatched
            row.detail = "paid for \(productId) on an account that is deleted or disabled: \(transaction) revoked; refund it on Stripe"
            try await settle(event.id, outcome: row.outcome, transaction: transaction, account: row.accountId, detail: row.detail)
            return row
        }
        if !written.inserted {
            // This event was kept before. Granted now, though it was kept without a grant (resent
            // once its account or product came to be): its row says so now. Kept with a grant, it
            // stays as it was kept.
            let kept = try await kept(event.id)
            guard let kept, kept.outcome == ChannelEventOutcome.unmatched || kept.outcome == ChannelEventOutcome.pending else { return kept ?? row }
            try await settle(event.id, outcome: row.outcome, transaction: row.transactionId, account: row.accountId, detail: row.detail)
        }
        return row.outcome == ChannelEventOutcome.granted || row.outcome == ChannelEventOutcome.owned ? try await undo(row, by: written.withdrawals) : row
    }

    /// What a paid Checkout Session names, read and checked before anything is granted.
    private struct SessionPurchase {
        let sessionId: String
        let accountId: String
        let productId: String
        let quantity: Int
        /// In hundredths of the currency's unit, as Kiosk keeps prices.
        let amountCents: Int
        /// Three upper-case letters.
        let currency: String
        /// The offer code its intent reserved, which the grant spends.
        var offerCode: (codeId: String, intent: String)? = nil
        /// The storefront its checkout was priced in.
        var storefront: String? = nil
    }

    private enum SessionReading {
        case named(SessionPurchase)
        /// The session names nothing Kiosk can grant: the event is kept for the operator, as this row says.
        case kept(AdminChannelEventRow)
    }

    /// The account, product, quantity and amount a paid session names: from its intent (made by
    /// `kiosk buy`, paid once) or its own fields, each checked; or the event kept as unmatched, with why.
    private func sessionPurchase(_ event: StripeEvent, session: StripeEvent.StripeObject, payment: String?) async throws -> SessionReading {
        var named = (account: session.clientReferenceId, product: session.metadata?["kiosk_product_id"], quantity: session.metadata?["kiosk_quantity"])
        var code: (codeId: String, intent: String)?
        var storefront: String?
        // A session made from a reader's checkout (`kiosk buy`) names its intent, which says the
        // account and the product, and is paid once.
        if let intentId = session.metadata?["kiosk_intent"], let sessionId = session.id, Self.isIdentifier(sessionId) {
            switch try await claimIntent(intentId, session: sessionId, account: named.account, product: named.product) {
            case .success(nil):
                // An intent this database does not hold: made after the backup it was restored
                // from. The session's own fields (made by Kiosk with the intent) name the account,
                // product and quantity, and are checked as any session's; a price an offer code
                // lowered does not match and is kept for the operator.
                logger.notice("a paid session names an intent this database does not hold (after a restore?); judged by its own fields",
                              metadata: ["intent": "\(intentId.prefix(64))", "session": "\(sessionId)"])
            case .success(let intent?):
                // The intent says the quantity too: a session asking for another one is not its.
                if let asked = named.quantity, asked != String(intent.quantity) {
                    return .kept(try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: intent.accountId,
                                                detail: "metadata.kiosk_quantity \(asked.prefix(20)) is not the quantity intent \(intentId) was made for (\(intent.quantity)); refund it on Stripe or grant it by hand"))
                }
                named = (intent.accountId, intent.productId, String(intent.quantity))
                code = intent.offerCodeId.map { ($0, intent.id) }
                storefront = intent.storefront
            case .failure(let refusal):
                return .kept(try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: named.account,
                                            detail: "\(refusal.message); refund it on Stripe or grant it by hand"))
            }
        }
        guard let sessionId = session.id, let accountId = named.account, let productId = named.product else {
            return .kept(try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched,
                                        detail: "the session names no account (client_reference_id) or no product (metadata.kiosk_product_id); refund it on Stripe or grant it by hand"))
        }
        guard let quantity = Int(named.quantity ?? "1"), let paid = Self.kioskAmount(session.amountTotal, session.currency) else {
            return .kept(try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: accountId,
                                        detail: "the session's amount_total, currency (three letters) or metadata.kiosk_quantity is missing or out of range"))
        }
        guard Self.isIdentifier(sessionId), Self.isIdentifier(accountId), Self.isIdentifier(productId), payment.map(Self.isIdentifier) ?? true else {
            return .kept(try await keep(event, payment: nil, outcome: ChannelEventOutcome.unmatched,
                                        detail: "the session's id, client_reference_id, payment_intent or metadata.kiosk_product_id is not an identifier Kiosk keeps"))
        }
        return .named(SessionPurchase(sessionId: sessionId, accountId: accountId, productId: productId, quantity: quantity,
                                      amountCents: paid.cents, currency: paid.currency, offerCode: code, storefront: storefront))
    }

    /// The tax Stripe computed and charged (`automatic_tax`), when this store asks it to: its
    /// amount in Kiosk's hundredths and the reader's country from the session. Nil otherwise: the
    /// operator's table decides (``Holdings/taxOnChannelPayment(_:product:)``).
    func stripeTax(_ object: StripeEvent.StripeObject) -> ChannelTax? {
        guard base.channels.stripeAutomaticTax, let charged = object.taxCharged,
              let amount = Self.kioskAmount(charged, object.currency ?? "usd") else { return nil }
        return ChannelTax(cents: amount.cents, country: object.customerDetails?.address?.country.flatMap(StorefrontCountry.code))
    }

    /// What Stripe charged, as Kiosk keeps an amount: hundredths of the currency's unit (Stripe's
    /// are its smallest unit, so a currency without a minor unit, yen, is a hundred times more;
    /// ``Price/shown(cents:_:)``) and the currency in upper case; nil for an amount out of the
    /// range Kiosk keeps (checked after that conversion) or a currency that is not three letters.
    static func kioskAmount(_ charged: Int?, _ currency: String?) -> (cents: Int, currency: String)? {
        guard let charged, let currency, currency.utf8.count == 3, currency.allSatisfy({ $0.isASCII && $0.isLetter }),
              (0...Price.maxCents * 100).contains(charged) else { return nil }
        let code = currency.uppercased()
        let cents = Price.wholeUnitCurrencies.contains(code) ? charged * 100 : charged
        return cents <= Price.maxCents * 100 ? (cents, code) : nil
    }

    /// What a grant's event row came to, written with the grant.
    private struct Written: Sendable {
        var inserted: Bool
        var withdrawals: [Withdrawal]
        /// The account is deleted or disabled.
        var accountClosed: Bool
    }

    /// A refund or a dispute kept for a payment (or the account found closed: ``ChannelWithdrawals``).
    struct Withdrawal: Sendable {
        var eventId: String
        var reason: String
        var accountClosed = false
    }

    /// A refund or a dispute of a granted payment that came first undoes the grant now.
    func undoIfWithdrawn(_ granted: AdminChannelEventRow) async throws -> AdminChannelEventRow {
        guard let payment = granted.payment else { return granted }
        let found = try await database.read { try await Self.withdrawals(of: payment, account: granted.accountId ?? "", in: $0) }
        return try await undo(granted, by: found.filter { !$0.accountClosed })
    }

    private func undo(_ granted: AdminChannelEventRow, by found: [Withdrawal]) async throws -> AdminChannelEventRow {
        guard let transaction = granted.transactionId, let withdrawal = found.first else { return granted }
        // Paid for what the account had, and given back: nothing to revoke, nothing to act on.
        let owned = granted.outcome == ChannelEventOutcome.owned
        if !owned { try await channelRecords.revokeGrant(transaction, reason: withdrawal.reason) }
        let outcome = owned ? ChannelEventOutcome.refunded : ChannelEventOutcome.revoked
        // Every withdrawal of the payment is settled (a dispute and a refund of one charge), so none
        // stays in the operator's list saying its grant has not come.
        for each in found {
            try await settle(each.eventId, outcome: outcome, transaction: transaction, account: granted.accountId,
                             detail: owned ? "\(each.reason): the payment was for what the account already had; nothing was revoked"
                                 : "\(each.reason): \(transaction) revoked when its checkout event came")
        }
        var row = granted
        row.outcome = outcome
        row.detail = owned ? "paid for what the account already had, and \(withdrawal.reason) before this event came: nothing left to do"
            : "granted, then revoked: \(withdrawal.reason) before this event came"
        try await settle(granted.eventId, outcome: row.outcome, transaction: transaction, account: granted.accountId, detail: row.detail)
        return row
    }

    /// A refund or a dispute takes back every grant of the payment that stands: the checkout's, or
    /// the one a won dispute gave back (a refund after a won dispute left that one owned, and a
    /// second dispute revoked nothing). One that finds nothing standing took nothing, and says so,
    /// so that winning it later gives nothing back.
    private func withdraw(_ event: StripeEvent, payment: String?, reason: String) async throws -> AdminChannelEventRow {
        guard let payment, Self.isIdentifier(payment) else {
            return try await keep(event, payment: nil, outcome: ChannelEventOutcome.unmatched, detail: "\(reason), but the event names no payment intent")
        }
        // Written first: a grant of this payment committing meanwhile finds it and revokes itself.
        var row = try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched,
                                 detail: "\(reason); no grant of \(payment) yet: if its checkout event comes, it is revoked at once")
        let rows = try await database.read { db in
            try await db.select().column("eventId").column("type").column("outcome").column("transactionId").column("accountId").from("channelEvent")
                .where("channel", .equal, Self.channel).where("payment", .equal, payment).where("eventId", .notEqual, event.id)
                .all(decoding: AdminChannelEventRow.Kept.self)
        }
        if event.type == "charge.dispute.created", !rows.contains(where: { $0.type == event.type }),
           rows.contains(where: { Self.wonTypes.contains($0.type) && $0.outcome == ChannelEventOutcome.reversed }) {
            // Its close (won) came first, before any opening of a dispute of this payment: the
            // dispute takes nothing.
            row.outcome = ChannelEventOutcome.reversed
            row.detail = "\(reason), but the dispute was won before this event came: nothing taken"
            try await settle(event.id, outcome: row.outcome, transaction: nil, account: nil, detail: row.detail)
            return row
        }
        let grants = rows.filter { $0.transactionId != nil && Self.grantTypes.contains($0.type) }
        guard let checkout = grants.first, let checkoutTransaction = checkout.transactionId else { return row }
        row.accountId = checkout.accountId
        if checkout.outcome == ChannelEventOutcome.owned || checkout.outcome == ChannelEventOutcome.refunded {
            // Paid for what the account had (a free re-buy): the money went back, nothing to revoke.
            // Both rows leave the operator's list.
            try await settle(checkout.eventId, outcome: ChannelEventOutcome.refunded, transaction: checkoutTransaction, account: checkout.accountId,
                             detail: "paid for what the account already had, and \(reason): nothing left to do")
            row.outcome = ChannelEventOutcome.refunded
            row.transactionId = checkoutTransaction
            row.detail = "\(reason): the payment was for what the account already had; nothing was revoked"
            try await settle(event.id, outcome: row.outcome, transaction: checkoutTransaction, account: checkout.accountId, detail: row.detail)
            return row
        }
        // The grants of the payment: the checkout's, and any a won dispute gave back.
        var candidates = [checkoutTransaction]
        for kept in rows where Self.wonTypes.contains(kept.type) && kept.outcome == ChannelEventOutcome.reversed {
            if let given = kept.transactionId, !candidates.contains(given) { candidates.append(given) }
        }
        var revoked: [String] = []
        for transaction in candidates where try await self.transaction(transaction).status == .purchased {
            if let problem = try await channelRecords.revokeGrant(transaction, reason: reason) {
                row.transactionId = transaction
                row.detail = "\(reason), but \(transaction) was not revoked: \(problem); settle it by hand"
                try await settle(event.id, outcome: ChannelEventOutcome.unmatched, transaction: transaction, account: checkout.accountId, detail: row.detail)
                return row
            }
            revoked.append(transaction)
        }
        guard let last = revoked.last else {
            // Withdrawn already (a refund before this dispute, say): nothing taken, nothing to give back if it is won.
            row.outcome = ChannelEventOutcome.ignored
            row.detail = "\(reason): nothing of \(payment) stood to revoke (withdrawn already)"
            try await settle(event.id, outcome: row.outcome, transaction: nil, account: checkout.accountId, detail: row.detail)
            return row
        }
        row.outcome = ChannelEventOutcome.revoked
        row.transactionId = last
        row.detail = "\(reason): \(revoked.joined(separator: ", ")) revoked, its content removed from the account's devices"
        try await settle(event.id, outcome: row.outcome, transaction: last, account: checkout.accountId, detail: row.detail)
        return row
    }

    /// Events that close a dispute the publisher won.
    static let wonTypes: Set<String> = ["charge.dispute.closed", "charge.dispute.funds_reinstated"]

    /// A dispute the publisher won (`charge.dispute.closed` with `won`, or the funds reinstated):
    /// what the dispute took is given back, once for both events. A grant it revoked is granted
    /// again as a new purchase of the same quantity and amount, even of a product taken off sale
    /// meanwhile (owned is forever); a grant it could not take back stands as it was; a dispute that
    /// came before its grant no longer revokes the grant when it comes.
    private func disputeWon(_ event: StripeEvent, payment: String?) async throws -> AdminChannelEventRow {
        guard let payment, Self.isIdentifier(payment) else {
            return try await keep(event, payment: nil, outcome: ChannelEventOutcome.unmatched, detail: "a dispute won, but the event names no payment intent")
        }
        let disputes = try await database.read { db in
            try await db.select().column("eventId").column("outcome").column("transactionId").column("accountId").from("channelEvent")
                .where("channel", .equal, Self.channel).where("payment", .equal, payment).where("type", .equal, "charge.dispute.created")
                .all().map { row in
                    (eventId: try row.decode(column: "eventId", as: String.self), outcome: try row.decode(column: "outcome", as: String.self),
                     transaction: try row.decode(column: "transactionId", as: String?.self), account: try row.decode(column: "accountId", as: String?.self))
                }
        }
        guard let dispute = disputes.first(where: { $0.outcome != ChannelEventOutcome.reversed }) ?? disputes.first else {
            // Won before its opening event came (Stripe keeps no order): kept as reversed, so that
            // the opening, when it comes, takes nothing (``withdraw(_:payment:reason:)``).
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.reversed,
                                  detail: "a dispute won before its opening event came: when that comes, it takes nothing")
        }
        if dispute.outcome == ChannelEventOutcome.reversed {
            // The dispute's other closing event (closed, then funds reinstated): given back already.
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.reversed, account: dispute.account, transaction: dispute.transaction,
                                  detail: "the dispute was won; what it took was given back when its first closing event came")
        }
        var given: String? = dispute.transaction
        if dispute.outcome == ChannelEventOutcome.revoked, let revokedId = dispute.transaction {
            let revoked = try await transaction(revokedId)
            given = try await payments.grantPaid(
                productId: revoked.productId, quantity: revoked.quantity, accountId: revoked.accountId, reference: "stripe:reinstated:\(dispute.eventId)",
                method: Self.channel, amountCents: revoked.amountCents, currency: revoked.currency, restoring: true, reinstating: revoked).record.id
        }
        let detail = dispute.outcome == ChannelEventOutcome.revoked
            ? "the dispute was won: \(dispute.transaction ?? "") was revoked by it, \(given ?? "") grants it again"
            : "the dispute was won before it took anything: nothing to give back"
        try await settle(dispute.eventId, outcome: ChannelEventOutcome.reversed, transaction: dispute.transaction, account: dispute.account, detail: detail)
        return try await keep(event, payment: payment, outcome: ChannelEventOutcome.reversed, account: dispute.account, transaction: given, detail: detail)
    }

    /// Refunds and disputes kept for `payment` (the withdrawals a grant must undo).
    static func withdrawals(of payment: String, account: String, in db: any SQLDatabase) async throws -> [Withdrawal] {
        try await db.rows(ChannelWithdrawals(channel: Self.channel, payment: payment, accountId: account)).map { row in
            let type = try row.decode(column: "type", as: String.self)
            return Withdrawal(eventId: try row.decode(column: "eventId", as: String.self),
                              reason: type == "charge.refunded" ? "refunded on Stripe" : "disputed by the card holder on Stripe",
                              accountClosed: type == "account.closed")
        }
    }

    /// A Stripe or Kiosk id as the store keeps it: at most 255 bytes of letters, digits, `_`, `-`
    /// and `.` (a session id becomes an idempotency key, which PostgreSQL's index bounds).
    static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255 && text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F || byte == 0x2D || byte == 0x2E
        }
    }

    // MARK: The kept events

    private func kept(_ eventId: String) async throws -> AdminChannelEventRow? {
        try await channelRecords.keptEvent(channel: Self.channel, eventId: eventId)
    }

    func keep(_ event: StripeEvent, payment: String?, outcome: String, account: String? = nil, transaction: String? = nil,
                      detail: String) async throws -> AdminChannelEventRow {
        try await channelRecords.keepEvent(AdminChannelEventRow(
            channel: Self.channel, eventId: event.id, type: String(event.type.prefix(100)), payment: payment.flatMap { Self.isIdentifier($0) ? $0 : nil },
            outcome: outcome, detail: detail, accountId: account.map { String($0.prefix(100)) }, transactionId: transaction,
            receivedAt: clock.wallNow()))
    }

    private func settle(_ eventId: String, outcome: String, transaction: String?, account: String?, detail: String? = nil) async throws {
        try await channelRecords.settleEvent(channel: Self.channel, eventId: eventId, outcome: outcome, transaction: transaction, account: account, detail: detail)
    }
}

extension AdminChannelEventRow {
    /// The columns a refund or a dispute reads of the payment's other events.
    struct Kept: Decodable {
        var eventId: String
        var type: String
        var outcome: String
        var transactionId: String?
        var accountId: String?
    }
}
