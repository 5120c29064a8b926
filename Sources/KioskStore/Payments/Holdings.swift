import Foundation
import PostgresNIO
import SQLKit
import KioskCore

/// What an account holds that a payment's outcome depends on, read in one transaction at one
/// revision of the account; ``Store`` commits a decision only while the account is still at it.
struct Holdings {
    /// The account's revision when read; nil for ``unread``.
    let revision: Int64?
    let credits: Int
    /// The transaction already made with this idempotency key, if any.
    let sameKey: TransactionRecord?
    /// The first standing purchase of the product (a book or an issue).
    let firstPurchase: TransactionRecord?
    /// The latest standing period of the subscription.
    let latestPeriod: TransactionRecord?
    /// A pending Ask to Buy of the product.
    let pending: TransactionRecord?
    /// Whether the account ever had a period of a subscription in the product's group, on any
    /// channel: an introductory offer is for the first one (read only for a product with an offer).
    var hadSubscriptionInGroup = false
    /// Another subscription of the product's group the account has that has not ended (read for
    /// a subscription): active, in grace or in billing retry, it may still charge, so a second plan
    /// of the group is not sold beside it.
    var runningInGroup: SubscriptionRecord?
    /// The account's storefront (its country), which decides its prices and its tax; nil: none chosen.
    var storefront: String?
    /// The operator's tax table the decision charges by (the store's).
    var taxes: TaxTable = .none

    /// Nothing read, for a decision that depends on nothing the account holds (a consumable's
    /// charge): its write checks the one bound such a decision needs, the balance's, itself
    /// (``AccountRows/advanceStep(account:from:adding:)``). The balance counts as 0, so a decision's own overflow checks see
    /// only its own amounts.
    static let unread = Holdings(revision: nil, credits: 0, sameKey: nil, firstPurchase: nil, latestPeriod: nil, pending: nil)

    /// One statement reads the account and the IDs of the transactions the decision depends on,
    /// so on either engine they come from one snapshot; the few transactions found (a replay, an
    /// owned book, a subscription, an Ask to Buy) are then read whole, and each must still be
    /// what the look-up asked for. One that moved meanwhile (a pending request declined) is left
    /// out, as if it had moved before; one whose change moved the account (a revocation) makes the
    /// commit's compare-and-set refuse the decision, which is then taken again.
    ///
    /// Each look-up is one indexed row, so a purchase costs the same however long the history,
    /// and only what the product's kind decides on is looked up: a first purchase for a book or
    /// an issue, the latest period for a subscription, neither for a consumable (``Lookup``).
    /// - Parameter group: the IDs of the subscriptions in the product's group, when it has an
    ///   introductory offer (``hadSubscriptionInGroup``); empty otherwise, and nothing more is read.
    static func read(accountId: String, product: Product, key: String, group: [String] = [], planGroup: [String] = [], in db: any SQLDatabase) async throws -> Holdings {
        let found = try await db.rows(Lookup(accountId: accountId, key: key, productId: product.id,
            firstPurchase: product.kind == .nonConsumable, latestPeriod: product.kind == .subscription)).first
        guard let row = found else {
            throw StoreError.unknownAccount(accountId)
        }
        func transaction(_ column: String, still holds: (TransactionRecord) -> Bool) async throws -> TransactionRecord? {
            guard let id = try row.decode(column: column, as: String?.self),
                  let record = try await TransactionRows(db).find(id), holds(record) else { return nil }
            return record
        }
        var holdings = Holdings(
            revision: try row.decode(column: "revision", as: Int64.self), credits: try row.decode(column: "credits", as: Int.self),
            sameKey: try await transaction("sameKey") { _ in true },
            firstPurchase: try await transaction("firstPurchase") { $0.status == .purchased },
            latestPeriod: try await transaction("latestPeriod") { $0.status == .purchased },
            pending: try await transaction("pending") { $0.status == .deferred })
        holdings.storefront = try row.decode(column: "storefront", as: String?.self)
        if !group.isEmpty { holdings.hadSubscriptionInGroup = try await hadSubscription(accountId: accountId, among: group, in: db) }
        holdings.runningInGroup = try await SubscriptionRows(db).unended(accountId: accountId, among: planGroup.filter { $0 != product.id })
        return holdings
    }

    /// Whether the account ever had a period of one of `group`'s subscriptions: any period,
    /// refunded ones too (a trial taken and refunded was still taken), on any channel.
    static func hadSubscription(accountId: String, among group: [String], in db: any SQLDatabase) async throws -> Bool {
        try await db.select().column(SQLLiteral.numeric("1")).from("storeTransaction")
            .where("accountId", .equal, accountId).where("productId", .in, group)
            .where("status", .in, [TransactionStatus.purchased.rawValue, TransactionStatus.revoked.rawValue])
            .where("paymentMethod", .notEqual, PaidBy.owned.rawValue).limit(1).first() != nil
    }

    /// The look-up ``read(accountId:product:key:in:)`` starts with, one text for every kind of
    /// product: the kind's flags (`$4`, `$5`) decide which look-ups run, and a look-up that
    /// does not run is null.
    ///
    /// The statuses are written as literals, not parameters: the partial unique indexes are on
    /// status, and with a bound status SQLite compiles the statement twice (once blind, again once
    /// the value is bound, to see whether a partial index applies), which cost 3 % of a purchase.
    struct Lookup: StoreStatement {
        typealias Row = any SQLRow
        static let sql = #"""
            SELECT "revision", "credits", "storefront",
                (SELECT "id" FROM "storeTransaction" WHERE "accountId" = $1 AND "idempotencyKey" = $2 ORDER BY "sequence" LIMIT 1) AS "sameKey",
                CASE WHEN $4 THEN (SELECT "id" FROM "storeTransaction" WHERE "accountId" = $1 AND "productId" = $3
                    AND "status" = '\#(TransactionStatus.purchased.rawValue)' ORDER BY "sequence" LIMIT 1) END AS "firstPurchase",
                CASE WHEN $5 THEN (SELECT "id" FROM "storeTransaction" WHERE "accountId" = $1 AND "productId" = $3
                    AND "status" = '\#(TransactionStatus.purchased.rawValue)' AND "expiresDate" IS NOT NULL
                    ORDER BY "expiresDate" DESC LIMIT 1) END AS "latestPeriod",
                (SELECT "id" FROM "storeTransaction" WHERE "accountId" = $1 AND "productId" = $3
                    AND "status" = '\#(TransactionStatus.deferred.rawValue)' ORDER BY "sequence" LIMIT 1) AS "pending"
            FROM "account" WHERE "id" = $1
            """#
        static let parameterTypes: [PostgresDataType] = [.text, .text, .text, .bool, .bool]

        let accountId: String
        let key: String
        let productId: String
        /// Whether to look up the first standing purchase (a book or an issue).
        let firstPurchase: Bool
        /// Whether to look up the latest standing period (a subscription).
        let latestPeriod: Bool

        var parameters: [StatementParameter] {
            [.text(accountId), .text(key), .text(productId), .flag(firstPurchase), .flag(latestPeriod)]
        }
    }

    /// The product's price in the account's storefront, before any tax the storefront adds.
    /// - Throws: `not_sold_here` when the product lists prices and none for this storefront.
    func listPrice(_ product: Product) throws -> (cents: Int, currency: String) {
        guard let price = product.price(in: storefront) else { throw StoreError.notSoldHere(product.id, storefront: storefront) }
        return (try Store.cents(price), price.currency)
    }

    /// Sets what the record charges: `cents` of `currency` as the account's country takes tax on
    /// it (``TaxTable``), with the country, the rate and the tax recorded.
    func charge(_ record: inout TransactionRecord, cents: Int, currency: String, product: Product) {
        let charge = taxes.charge(cents: cents, currency: currency, country: storefront, category: product.taxClass)
        record.amountCents = charge.cents
        record.currency = charge.currency
        record.storefront = storefront
        record.taxBasisPoints = charge.taxBasisPoints
        record.taxCents = charge.taxCents
    }

    /// Records the tax inside what a channel charged (`record.amountCents`, tax included: the web's
    /// price holds it), by the account's country; a store that is the channel's merchant of record
    /// (the App Store, Google Play) collects its own, and none is recorded.
    func taxOnChannelPayment(_ record: inout TransactionRecord, product: Product) {
        record.storefront = storefront
        guard record.paymentMethod == PaidBy.stripe.rawValue, let country = storefront, let entry = taxes.countries[country],
              let rate = entry.rates[product.taxClass] ?? entry.rates[.standard] else { return }
        record.taxBasisPoints = rate
        record.taxCents = TaxTable.part(of: record.amountCents, rate: rate)
    }

    /// Settles an approved payment or redemption: what it costs, grants and signs.
    /// - Throws: ``StoreError`` `insufficient_credits`, `not_sold_here`, or `amount_too_large` when a sum would overflow.
    func decide(_ record: inout TransactionRecord, product: Product, now: Date) throws {
        record.status = .purchased
        record.purchaseDate = now
        record.message = nil
        if decideOwned(&record, product: product, now: now) != nil { return }
        switch product.kind {
        case .consumable:
            let price = try listPrice(product)
            let (amount, amountOverflow) = price.cents.multipliedReportingOverflow(by: record.quantity)
            let (granted, grantedOverflow) = (product.credits ?? 0).multipliedReportingOverflow(by: record.quantity)
            guard !amountOverflow, !grantedOverflow, !credits.addingReportingOverflow(granted).overflow else { throw Self.overflow }
            charge(&record, cents: amount, currency: price.currency, product: product)
            record.creditsGranted = granted
        case .nonConsumable:
            if record.paymentMethod == PaidBy.credits.rawValue {
                let price = product.creditPrice ?? 0
                guard credits >= price else {
                    throw StoreError.insufficientCredits(product.id, price: price, balance: credits)
                }
                record.creditsSpent = price
            } else {
                let price = try listPrice(product)
                charge(&record, cents: price.cents, currency: price.currency, product: product)
            }
        case .subscription:
            // Running: in grace or billing retry (a charge still tried), renewing, or paid up to a
            // later end. One left to lapse (renewal off) whose end has passed is over.
            if let other = runningInGroup, other.state != .active || other.autoRenew || other.expiresDate > now {
                throw StoreError.planRunning(other.productId, until: other.expiresDate, wanted: product.id)
            }
            record.originalTransactionId = latestPeriod?.originalTransactionId ?? record.id
            let months = product.periodMonths ?? 1
            let price = try listPrice(product)
            if let offer = product.introductoryOffer, !hadSubscriptionInGroup {
                record.expiresDate = Calendar.utc.date(byAdding: offer.firstPeriod(periodMonths: months), to: now)
                charge(&record, cents: offer.firstChargeCents(local: price.cents, normal: try Store.cents(product.price)), currency: price.currency, product: product)
                record.offerType = offer.type.rawValue
                record.offerPeriod = offer.isoPeriod(periodMonths: months)
            } else {
                record.expiresDate = Calendar.utc.date(byAdding: .month, value: months, to: now)
                charge(&record, cents: price.cents, currency: price.currency, product: product)
                if product.introductoryOffer != nil {
                    record.message = "the introductory offer is for a first subscription in \(product.group); this account had one, so it starts at the normal price"
                }
            }
        }
    }

    /// An offer code's benefit on a decided purchase: a subscription's introductory offer (given
    /// whether or not the account had one), or a percentage or an amount off the normal price (a
    /// subscription's first period; any introductory offer gives way to it: offers do not stack).
    func apply(_ benefit: CodeBenefit, to record: inout TransactionRecord, product: Product, now: Date) throws {
        let months = product.periodMonths ?? 1
        let price = try listPrice(product)
        record.message = nil
        switch benefit {
        case .introductoryOffer:
            guard let offer = product.introductoryOffer, product.kind == .subscription else { return }
            record.expiresDate = Calendar.utc.date(byAdding: offer.firstPeriod(periodMonths: months), to: now)
            charge(&record, cents: offer.firstChargeCents(local: price.cents, normal: try Store.cents(product.price)), currency: price.currency, product: product)
            record.offerType = offer.type.rawValue
            record.offerPeriod = offer.isoPeriod(periodMonths: months)
        case .percentOff, .amountOff:
            if case .amountOff = benefit, price.currency != product.price.currency {
                throw StoreError(.wrongState, code: "code_other_currency",
                                 message: "this code takes an amount of \(product.price.currency) off, and this account buys in \(price.currency); ask for a code in \(price.currency)")
            }
            if case .amountOff(let off) = benefit, off >= price.cents {
                throw StoreError(.wrongState, code: "code_exceeds_price",
                                 message: "this code takes \(Price.shown(cents: off, price.currency)) off, not less than \(product.id)'s price here, \(Price.shown(cents: price.cents, price.currency)); ask for another code")
            }
            charge(&record, cents: benefit.price(from: price.cents), currency: price.currency, product: product)
            record.offerType = "offerCode"
            if product.kind == .subscription {
                record.expiresDate = Calendar.utc.date(byAdding: .month, value: months, to: now)
                record.offerPeriod = "P\(months)M"
            }
        case .free:
            break
        }
    }

    /// When the account already has the product (a book, an issue, an active subscription), the
    /// payment becomes a free transaction that points at the original: nothing is charged.
    /// - Returns: the decision, or nil when the product is not owned.
    @discardableResult
    func decideOwned(_ record: inout TransactionRecord, product: Product, now: Date) -> Payments.Decision? {
        switch product.kind {
        case .nonConsumable:
            guard let first = firstPurchase else { return nil }
            record.originalTransactionId = first.originalTransactionId
        case .subscription:
            guard let active = latestPeriod, (active.expiresDate ?? .distantPast) > now else { return nil }
            record.originalTransactionId = active.originalTransactionId
            record.expiresDate = active.expiresDate
        case .consumable:
            return nil
        }
        record.status = .purchased
        record.purchaseDate = now
        record.paymentMethod = PaidBy.owned.rawValue
        record.amountCents = 0
        record.creditsSpent = 0
        record.creditsGranted = 0
        record.message = "already owned; nothing was charged"
        return .new(record)
    }

    static let overflow = StoreError.amountTooLarge
}

extension TransactionRecord {
    /// A transaction not yet decided, with its own ID as its original.
    static func pending(account: String, product: Product, quantity: Int, method: String, key: String, at now: Date) -> TransactionRecord {
        let id = Store.newTransactionID()
        return TransactionRecord(
            sequence: nil, id: id, accountId: account, productId: product.id, kind: product.kind,
            quantity: quantity, originalTransactionId: id, purchaseDate: nil, expiresDate: nil, status: .deferred,
            paymentMethod: method, idempotencyKey: key, amountCents: 0, currency: product.price.currency,
            creditsGranted: 0, creditsSpent: 0, signedTransaction: nil, message: nil, finishedAt: nil,
            createdAt: now, revokedAt: nil, revocationReason: nil, requestedMethod: method)
    }

    /// How the account's credit balance changes when this commits.
    var creditDelta: Int {
        status == .purchased ? creditsGranted - creditsSpent : 0
    }
}
