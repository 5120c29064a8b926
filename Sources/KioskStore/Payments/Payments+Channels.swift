import Foundation
import KioskCore

/// Payments a channel took outside Kiosk (a web shop's checkout), granted as purchases.
extension Payments {
    /// A channel's quantity of `product`, once it is one Kiosk grants: 1 to 100, and more than 1
    /// only of a consumable.
    /// - Throws: `invalid_request` naming it.
    static func channelQuantity(_ quantity: Int, of product: Product) throws -> Int {
        guard (1...100).contains(quantity), quantity == 1 || product.kind == .consumable else {
            throw StoreError.invalidRequest("a quantity of \(quantity) of \(product.id) cannot be granted")
        }
        return quantity
    }

    /// Grants what a channel says was paid: a purchase of `productId` for `accountId` with the
    /// amount and currency the channel charged, signed and delivered like any other, at most once
    /// per `reference` (the channel's payment: its events come again and in any order).
    ///
    /// An account that already owns the book or the running subscription gets the free re-buy
    /// every payment of it gets, and the caller learns that money was taken for nothing
    /// (`paymentMethod` `owned`): the operator refunds it on the channel.
    /// `alongside` writes the channel's own row with the grant (``Alongside``); the answer says
    /// what it said, nil when it did not run (an earlier grant of the reference answered).
    ///
    /// `restoring` gives back what a channel's refund took (its reversal, a dispute won) or what the
    /// operator grants by hand: owned is forever, so a product taken off sale meanwhile is granted all
    /// the same (a new sale of it is refused).
    /// - Throws: `unknown_account`, `unknown_product`, `off_sale` (the caller keeps the event for the operator).
    /// - Parameters:
    ///   - shownKey: the reference as its sender named it, in a refusal.
    ///   - reinstating: the transaction a withdrawal revoked, when this grant gives it back (a
    ///     dispute won, a refund reversed): a subscription's period is given back as it was (its
    ///     subscription, its start and its end), not as a fresh period from today, which would give
    ///     more than the withdrawal took.
    ///   - period: a subscription's first period as the channel that renews it dates it (Stripe's
    ///     first invoice), rather than a period from now.
    ///   - offer: the introductory offer the channel gave (its kind and ISO 8601 period): what the
    ///     channel charged says it, not the store's reckoning of the account's eligibility now.
    func grantPaid(productId: String, quantity: Int, accountId: String, reference: String, shownKey: String? = nil, method: String,
                   amountCents: Int, currency: String, restoring: Bool = false, reinstating: TransactionRecord? = nil,
                   period: (start: Date, end: Date)? = nil, offer: (type: String, period: String)? = nil, channelTax: ChannelTax? = nil,
                   checkoutStorefront: String? = nil,
                   alongside: Alongside? = nil) async throws -> (record: TransactionRecord, alongside: (any Sendable)?) {
        // The same reference granted before is found by the decision itself (``Holdings``' key
        // look-up, or the unique index behind a consumable's unread write), as a payment's key is.
        // An unknown account is found by it too (the holdings' look-up, or the write that finds no
        // account to advance and falls back to it): no look-up of its own first (issue 44's
        // measure: one read fewer per event).
        let product = restoring ? try await self.product(productId) : try await sellable(productId)
        _ = try Self.channelQuantity(quantity, of: product)
        let keyed = KeyedRequest(key: reference, productId: product.id, quantity: quantity, method: method, shownKey: shownKey)
        let now: Date = if product.kind == .subscription { try await accountNow(accountId) } else { clock.wallNow() }
        // A consumable's grant depends on nothing the account holds: one write, as a payment's (``settle``).
        let settled = try await settle(account: accountId, request: keyed, product: product, readsHoldings: product.kind != .consumable || !base.taxes.isEmpty,
                                       alongside: alongside) { holdings in
            var record = TransactionRecord.pending(account: accountId, product: product, quantity: quantity, method: method, key: reference, at: clock.wallNow())
            // What a channel charged stands whatever the storefront's prices say: decided as the
            // catalog's base price, then the channel's amount put in its place.
            var base = holdings
            base.storefront = nil
            try base.decide(&record, product: product, now: now)
            // What the channel charged is what was paid, whatever the catalog's price says now.
            if !record.isFreeRebuy {
                record.amountCents = amountCents
                record.currency = currency
                record.taxCents = 0
                record.taxBasisPoints = nil
                // The storefront the checkout was priced in decides the sale's country and tax,
                // whatever the reader chose before the payment landed.
                var priced = holdings
                if let checkoutStorefront { priced.storefront = checkoutStorefront }
                if let channelTax {
                    channelTax.record(in: &record, fallback: priced.storefront)
                } else {
                    priced.taxOnChannelPayment(&record, product: product)
                }
                record.offerType = offer?.type
                record.offerPeriod = offer?.period
                // The store's own words about a sale (an offer not given) say nothing of a channel's grant.
                record.message = nil
                if let period = reinstating, product.kind == .subscription, let expires = period.expiresDate {
                    record.originalTransactionId = period.originalTransactionId
                    record.purchaseDate = period.purchaseDate
                    record.expiresDate = expires
                } else if let period, product.kind == .subscription {
                    record.purchaseDate = period.start
                    record.expiresDate = period.end
                }
            }
            return .new(record)
        }
        logger.info("channel payment granted", metadata: ["transaction": "\(settled.record.id)", "product": "\(settled.record.productId)", "channel": "\(method)"])
        metrics.payment(outcome: settled.record.isFreeRebuy ? PaidBy.owned.rawValue : settled.record.status.rawValue)
        return (settled.record, settled.alongside)
    }

    /// The operator grants `productId` to `accountId` by hand, for `reason`: a purchase of nothing
    /// (no charge in the ledger), signed and delivered like any other, with a line in the account's
    /// audit list written in the grant's own transaction. A product off sale is granted all the same
    /// (an operator settling what a channel's payment could not); one the account owns already gives
    /// the free re-buy (`paymentMethod` `owned`). At most one grant per idempotency key.
    /// - Throws: `unknown_account`, `account_deleted`, `unknown_product`, `bad_request` (no reason, a quantity not 1 to
    ///   100, or more than 1 of what is not a consumable).
    public func grantByOperator(_ request: AdminGrantRequest, accountId: String) async throws -> StoreTransaction {
        try RequestText.check(accountId, field: "the account ID in the path")
        try RequestText.check(request.productId, field: "productId")
        try RequestText.check(request.idempotencyKey, field: "idempotencyKey")
        try RequestText.check(request.reason, field: "reason", maxBytes: RequestText.maxReasonBytes)
        let reason = request.reason.trimmingCharacters(in: .whitespaces)
        guard !reason.isEmpty else { throw StoreError.invalidRequest("reason must say why the product is granted (it goes in the account's audit list)") }
        let product = try await product(request.productId)
        let quantity = try Self.channelQuantity(request.quantity, of: product)
        let granted = try await grantPaid(
            productId: product.id, quantity: quantity, accountId: accountId, reference: "operator:\(request.idempotencyKey)", shownKey: request.idempotencyKey, method: PaidBy.operator.rawValue,
            amountCents: 0, currency: product.price.currency, restoring: true,
            alongside: { record, db in
                try await AccountRows(db).refuseIfDeleted(accountId)
                // A product the account owned already is a free re-buy: the line says nothing more was granted.
                let what = record.isFreeRebuy ? "already owned, nothing more granted" : "\(record.productId)\(quantity > 1 ? " × \(quantity)" : "")"
                try await Accounts.audit(accountId, "granted", by: "operator", "\(record.id): \(what) (\(reason))", at: record.createdAt, in: db)
                return true
            })
        if granted.alongside == nil {
            // This key granted before: the same grant answers again, another one is refused, as
            // a payment's key sent again with other fields is (the first reason is in the audit line).
            let first = granted.record
            let line = try await database.read { try await Accounts.auditList(first.accountId, in: $0) }.first { $0.detail.hasPrefix("\(first.id):") }
            var differences: [String] = []
            if first.accountId != accountId { differences.append("the account (\(accountId), first \(first.accountId))") }
            if first.productId != product.id { differences.append("productId (\(product.id), first \(first.productId))") }
            if first.quantity != quantity { differences.append("quantity (\(quantity), first \(first.quantity))") }
            if let line, !line.detail.hasSuffix("(\(reason))") { differences.append("reason") }
            guard differences.isEmpty else { throw StoreError.idempotencyKeyReused(request.idempotencyKey, differences: differences) }
        } else {
            logger.notice("the operator granted a product by hand", metadata: ["transaction": "\(granted.record.id)", "product": "\(product.id)", "account": "\(accountId)"])
        }
        return try await receipts.withCurrentReceipts([granted.record])[0].wire
    }
}

/// The tax a channel computed and charged itself (Stripe's `automatic_tax`), as its event says:
/// recorded in place of the operator's table, with the reader's country it names.
struct ChannelTax: Sendable {
    /// In hundredths of the currency's unit, as Kiosk keeps amounts.
    var cents: Int
    /// The reader's country (ISO 3166-1 alpha-2), when the event names one Kiosk knows.
    var country: String?

    /// Writes the tax, the country and the rate it makes of the amount (the rate is not in the
    /// event: the tax over what is left, to the nearest basis point) on a channel's transaction.
    func record(in record: inout TransactionRecord, fallback storefront: String?) {
        let tax = max(0, min(cents, record.amountCents))
        record.storefront = country ?? storefront
        record.taxCents = tax
        let net = record.amountCents - tax
        record.taxBasisPoints = tax > 0 && net > 0 ? TaxTable.rounded(tax * 10_000, over: net) : nil
    }
}
