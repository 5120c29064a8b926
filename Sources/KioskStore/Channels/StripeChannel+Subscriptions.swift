import Foundation
import KioskCore
import SQLKit

/// Stripe Billing: a subscription sold with a Checkout Session in subscription mode, renewed by
/// Stripe, and followed here from its signed events (docs/channels.md, "Subscriptions on the web").
///
/// - The **first period** is granted by whichever comes first of the paid session
///   (`checkout.session.completed`) and its first invoice (`invoice.paid`, `subscription_create`),
///   keyed by the Stripe subscription (`stripe:<sub_…>`), so both are one purchase. The grant
///   hands the store's subscription row to Stripe (``SubscriptionRows/link(_:channel:subscriptionId:at:)``):
///   the store's renewal worker never claims it again.
/// - Each **renewal** is an `invoice.paid` for the subscription, a new period keyed by the invoice
///   (`stripe:<in_…>`) with the invoice line's dates, reaching devices and the publisher's
///   webhooks as every renewal does (`DID_RENEW`).
/// - `invoice.payment_failed` enters grace (when the product gives it) or billing retry;
///   `customer.subscription.updated` carries auto-renew (`cancel_at_period_end`);
///   `customer.subscription.deleted` ends it. A refund of an invoice's charge revokes its period
///   (``StripeChannel``'s `charge.refunded`).
///
/// Each step is decided against the subscription as it stands (``StepDraft/channel(_:product:method:)``),
/// so events sent twice, late or out of order leave the state the last real change set.
extension StripeChannel {
    /// A paid Checkout Session in subscription mode: the first period, unless its first invoice
    /// granted it already.
    func subscriptionCheckoutPaid(_ event: StripeEvent, session: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        guard let subscriptionId = session.subscription, Self.isIdentifier(subscriptionId) else {
            return try await keep(event, payment: session.id, outcome: ChannelEventOutcome.unmatched,
                                  detail: "a paid subscription checkout that names no subscription; grant it by hand or refund it on Stripe")
        }
        guard session.paymentStatus == "paid" || session.paymentStatus == "no_payment_required" else {
            return try await keep(event, payment: subscriptionId, outcome: ChannelEventOutcome.pending,
                                  detail: "the subscription's first payment is not made yet; its invoice.paid grants it")
        }
        let named = (account: session.clientReferenceId, product: session.metadata?["kiosk_product_id"], intent: session.metadata?["kiosk_intent"])
        return try await startSubscription(event, subscriptionId: subscriptionId, account: named.account, product: named.product, intent: named.intent,
                                           paid: Self.kioskAmount(session.amountTotal, session.currency), period: nil, payment: subscriptionId, first: true,
                                           offer: Self.offer(in: session.metadata), tax: stripeTax(session))
    }

    /// `invoice.paid`: the first period (when the session's event has not come), or a renewal.
    func invoicePaid(_ event: StripeEvent, invoice: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        let payment = invoice.invoicePaymentIntent.flatMap { Self.isIdentifier($0) ? $0 : nil }
        guard let subscriptionId = invoice.invoiceSubscription, Self.isIdentifier(subscriptionId), let invoiceId = invoice.id, Self.isIdentifier(invoiceId) else {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.ignored, detail: "an invoice of no subscription: Kiosk grants one-time payments from their checkout")
        }
        guard let period = invoice.invoicePeriod, let paid = Self.kioskAmount(invoice.amountPaid, invoice.currency) else {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched,
                                  detail: "invoice \(invoiceId) has no line period, amount_paid or currency Kiosk can read or keep; settle it by hand")
        }
        let linked = try await database.read { try await SubscriptionRows($0).find(channel: Self.channel, subscriptionId: subscriptionId) }
        if invoice.billingReason == "subscription_create" || linked == nil {
            // The first period (or a renewal of a subscription this store never saw start, which
            // starts it here): one grant with the session's event, keyed by the subscription.
            let metadata = invoice.invoiceSubscriptionMetadata
            return try await startSubscription(event, subscriptionId: subscriptionId, account: metadata?["kiosk_account_id"], product: metadata?["kiosk_product_id"],
                                               intent: metadata?["kiosk_intent"], paid: paid, period: period, payment: payment,
                                               first: invoice.billingReason == "subscription_create",
                                               offer: invoice.billingReason == "subscription_create" ? Self.offer(in: metadata) : nil, tax: stripeTax(invoice))
        }
        let outcome = try await subscriptions.channelStep(
            .paid(start: period.start, end: period.end, key: "stripe:\(invoiceId)", amountCents: paid.cents, currency: paid.currency, tax: stripeTax(invoice),
                  plan: invoice.invoiceSubscriptionMetadata?["kiosk_product_id"]),
            channel: Self.channel, subscriptionId: subscriptionId, method: Self.channel)
        let row = try await keep(event, outcome, payment: payment)
        return row.outcome == ChannelEventOutcome.granted ? try await undoIfWithdrawn(row) : row
    }

    /// `invoice.payment_failed`: a renewal's charge failed; Stripe tries again (`next_payment_attempt`).
    func invoiceFailed(_ event: StripeEvent, invoice: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        guard let subscriptionId = invoice.invoiceSubscription, Self.isIdentifier(subscriptionId) else {
            return try await keep(event, payment: nil, outcome: ChannelEventOutcome.ignored, detail: "a failed invoice of no subscription")
        }
        if invoice.billingReason == "subscription_create" {
            return try await keep(event, payment: subscriptionId, outcome: ChannelEventOutcome.ignored,
                                  detail: "the first payment failed: nothing was granted, and the checkout says so to the reader")
        }
        if invoice.billingReason == "subscription_update" {
            // A plan change's invoice: the running plan is paid to its end all the same.
            return try await keep(event, payment: subscriptionId, outcome: ChannelEventOutcome.ignored,
                                  detail: "a plan change's invoice failed; the running plan stays paid to its end, and Stripe tries the invoice again")
        }
        // A time Kiosk can keep (an event's far-off or broken one is no next attempt it can name).
        let next = invoice.nextPaymentAttempt.flatMap { (0...7_258_118_400).contains($0) ? Date(timeIntervalSince1970: TimeInterval($0)) : nil }
        let outcome = try await subscriptions.channelStep(.failed(periodEnd: invoice.invoicePeriod?.end, nextAttempt: next),
                                                          channel: Self.channel, subscriptionId: subscriptionId, method: Self.channel)
        return try await keep(event, outcome, payment: subscriptionId)
    }

    /// `customer.subscription.updated` (auto-renew, as `cancel_at_period_end` says) and
    /// `customer.subscription.deleted` (its end).
    func subscriptionChanged(_ event: StripeEvent, subscription: StripeEvent.StripeObject) async throws -> AdminChannelEventRow {
        guard let subscriptionId = subscription.id, Self.isIdentifier(subscriptionId) else {
            return try await keep(event, payment: nil, outcome: ChannelEventOutcome.ignored, detail: "a subscription event without a subscription id")
        }
        let change: ChannelSubscriptionEvent
        if event.type == "customer.subscription.deleted" || subscription.status == "canceled" {
            change = .ended(subscription.cancellationDetails?.reason == "payment_failed" ? .billingError : .voluntary)
        } else if let cancels = subscription.cancelAtPeriodEnd {
            change = .autoRenew(!cancels, at: Date(timeIntervalSince1970: TimeInterval(event.created ?? 0)))
        } else {
            return try await keep(event, payment: subscriptionId, outcome: ChannelEventOutcome.ignored, detail: "an update that says nothing of auto-renew")
        }
        let outcome = try await subscriptions.channelStep(change, channel: Self.channel, subscriptionId: subscriptionId, method: Self.channel)
        if outcome == .unknown, case .ended = change {
            // Ended before its start came (events keep no order): kept, so the grant, when it comes,
            // ends it at once (``startSubscription``).
            return try await keep(event, payment: subscriptionId, outcome: ChannelEventOutcome.ignored,
                                  detail: "ended before this store granted it: when its first payment comes, the subscription is ended at once")
        }
        return try await keep(event, outcome, payment: subscriptionId)
    }

    // MARK: The first period

    /// - Parameter first: the event is the subscription's first payment (its session, or its first
    ///   invoice); else a renewal of a subscription the store does not follow.
    private func startSubscription(_ event: StripeEvent, subscriptionId: String, account: String?, product: String?, intent: String?,
                                   paid: (cents: Int, currency: String)?, period: (start: Date, end: Date)?, payment: String?,
                                   first: Bool, offer: (type: String, period: String)? = nil, tax: ChannelTax? = nil) async throws -> AdminChannelEventRow {
        var named = (account: account, product: product)
        var code: (codeId: String, intent: String)?
        var storefront: String?
        if let account, let held = try await database.read({ try await SubscriptionRows($0).find(channel: Self.channel, subscriptionId: subscriptionId) }),
           held.accountId != account {
            // Checked before the intent is taken: a session naming another account's subscription
            // must not use up its own intent.
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: account,
                                  detail: "subscription \(subscriptionId) is another account's in this store; refund it on Stripe")
        }
        if let intent {
            // The intent is claimed by the subscription: its session's event and its first invoice
            // both name it, and are the same payment.
            switch try await claimIntent(intent, session: subscriptionId, account: account, product: product) {
            case .success(nil):
                // Made after the backup this database was restored from: the subscription's own
                // metadata (kiosk_account_id, kiosk_product_id) names it, checked as any.
                logger.notice("a subscription names an intent this database does not hold (after a restore?); judged by its own metadata",
                              metadata: ["intent": "\(intent.prefix(64))", "subscription": "\(subscriptionId)"])
            case .success(let claimed?):
                named = (claimed.accountId, claimed.productId)
                code = claimed.offerCodeId.map { ($0, claimed.id) }
                storefront = claimed.storefront
            case .failure(let refusal):
                return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: account,
                                      detail: "\(refusal.message); cancel the subscription on Stripe and refund it, or grant it by hand")
            }
        }
        guard let accountId = named.account, let productId = named.product, Self.isIdentifier(accountId), Self.isIdentifier(productId) else {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched,
                                  detail: "subscription \(subscriptionId) names no account or product Kiosk knows (metadata kiosk_intent, kiosk_account_id, kiosk_product_id); cancel it on Stripe or grant it by hand")
        }
        guard let paid else {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: accountId,
                                  detail: "the first payment of \(subscriptionId) has no amount or currency Kiosk can read or keep; grant it by hand")
        }
        if try await database.read { try await AccountRows($0).isClosed(accountId) } {
            // Nobody can use it: nothing is granted (a book's checkout on a closed account is
            // granted and revoked at once; a subscription is not started at all).
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: accountId,
                                  detail: "subscribed on an account that is deleted or disabled; nothing was granted: cancel \(subscriptionId) on Stripe and refund it")
        }
        let received = clock.wallNow()
        let paymentId = payment.flatMap { Self.isIdentifier($0) ? $0 : nil }
        @Sendable func row(for record: TransactionRecord) -> AdminChannelEventRow {
            let owned = record.isFreeRebuy
            return AdminChannelEventRow(
                channel: Self.channel, eventId: event.id, type: String(event.type.prefix(100)), payment: paymentId,
                outcome: owned ? ChannelEventOutcome.owned : ChannelEventOutcome.granted,
                detail: owned ? "subscribed on Stripe to \(productId), which the account had running already: cancel \(subscriptionId) on Stripe and refund it"
                    : "subscribed to \(productId) (\(subscriptionId))",
                accountId: accountId, transactionId: record.id, receivedAt: received)
        }
        let granted: (record: TransactionRecord, alongside: (any Sendable)?)
        do {
            granted = try await payments.grantPaid(
                productId: productId, quantity: 1, accountId: accountId, reference: "stripe:\(subscriptionId)", method: Self.channel,
                amountCents: paid.cents, currency: paid.currency, period: period, offer: offer, channelTax: tax, checkoutStorefront: storefront,
                alongside: { [code] record, db in
                    // The code its checkout reserved (a plan's trial) is this grant's.
                    if let code { try await OfferCodes.attach(codeId: code.codeId, intent: code.intent, to: record.id, in: db) }
                    if !record.isFreeRebuy, record.kind == .subscription {
                        try await SubscriptionRows(db).link(record.originalTransactionId, channel: Self.channel, subscriptionId: subscriptionId, at: received)
                    }
                    return try await InsertChannelEvent.insert(row(for: record), in: db)
                })
        } catch let refusal as StoreError {
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: accountId,
                                  detail: "paid but not granted: \(refusal.message); cancel \(subscriptionId) on Stripe and refund it, or grant it by hand")
        }
        var kept = row(for: granted.record)
        if granted.alongside == nil, !first {
            // A renewal of a subscription the store knew, and no longer follows: its first period was
            // a re-buy of what the account had, or another subscription took its place.
            kept.outcome = ChannelEventOutcome.unmatched
            kept.transactionId = nil
            kept.detail = "a renewal of \(subscriptionId), which this store does not follow (its first payment was for what the account had, or another subscription replaced it): cancel it on Stripe and refund it"
            return try await channelRecords.keepEvent(kept)
        }
        if granted.alongside == nil {
            // The session's event and the first invoice: the one that came second finds the grant.
            kept.detail = "the first period of \(subscriptionId), granted when its other event came"
            kept = try await channelRecords.keepEvent(kept)
        }
        if !granted.record.isFreeRebuy, try await endedEarlier(subscriptionId) {
            _ = try await subscriptions.channelStep(.ended(.voluntary), channel: Self.channel, subscriptionId: subscriptionId, method: Self.channel)
        }
        return kept.outcome == ChannelEventOutcome.granted ? try await undoIfWithdrawn(kept) : kept
    }


    /// The free trial Kiosk asked Stripe for, as the signed event's metadata brings it back
    /// (Kiosk wrote it when it made the session: ``CheckoutSessionFields/subscription(product:intent:accountId:email:origin:trial:)``).
    static func offer(in metadata: [String: String]?) -> (type: String, period: String)? {
        guard let type = metadata?["kiosk_offer"], IntroductoryOffer.Kind(rawValue: type) != nil,
              let period = metadata?["kiosk_offer_period"], period.utf8.count <= 16, period.hasPrefix("P") else { return nil }
        return (type, period)
    }

    /// Whether a `customer.subscription.deleted` for the subscription came before its grant.
    private func endedEarlier(_ subscriptionId: String) async throws -> Bool {
        try await database.read { db in
            try await db.select().column("eventId").from("channelEvent").where("channel", .equal, Self.channel)
                .where("payment", .equal, subscriptionId).where("type", .equal, "customer.subscription.deleted").first()
        } != nil
    }

    /// Keeps the event with what its subscription step came to.
    private func keep(_ event: StripeEvent, _ outcome: ChannelStepOutcome, payment: String?) async throws -> AdminChannelEventRow {
        switch outcome {
        case .unknown:
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.ignored,
                                  detail: "a subscription this store did not sell (or whose first payment has not come yet)")
        case let .unchanged(why, account, transaction):
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.ignored, account: account, transaction: transaction, detail: why)
        case let .applied(detail, account, transaction):
            return try await keep(event, payment: payment, outcome: transaction == nil ? ChannelEventOutcome.applied : ChannelEventOutcome.granted,
                                  account: account, transaction: transaction, detail: detail)
        case let .refused(why, account):
            return try await keep(event, payment: payment, outcome: ChannelEventOutcome.unmatched, account: account,
                                  detail: "\(why): cancel the subscription on Stripe and refund it")
        }
    }
}
