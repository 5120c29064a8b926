import Foundation
import KioskCore

// The rows of the store's tables (see ``Migrations``), decoded by column name on either engine.

/// An account: its secret token is kept only as a SHA-256.
struct AccountRecord: Codable, Sendable {
    var id: String
    var tokenHash: String
    var credits: Int
    var createdAt: Date
    /// Bumped by every commit that changes what the account holds.
    var revision: Int64
    /// The last change number given to one of the account's transactions (see ``TransactionRecord/changeSequence``).
    var lastChange: Int64?
    /// Set while the operator has the account disabled: no device signs in.
    var disabledAt: Date?
    /// Set once its holder deleted it: its personal data is gone, its ledger stays.
    var deletedAt: Date?
    /// The storefront its holder chose (ISO 3166-1 alpha-2): its prices, currency and tax; nil: none.
    var storefront: String? = nil
}

/// One store transaction: a payment, a free re-download of something owned, or a redemption.
struct TransactionRecord: Codable, Sendable {
    /// Its place in the store's history: the order of an account's transaction list and its cursor.
    var sequence: Int64?
    var id: String
    var accountId: String
    var productId: String
    var kind: ProductKind
    var quantity: Int
    var originalTransactionId: String
    var purchaseDate: Date?
    var expiresDate: Date?
    var status: TransactionStatus
    /// `approve`, `decline`, `cancel`, `defer`, `owned` (nothing charged) or `credits`.
    var paymentMethod: String
    var idempotencyKey: String
    var amountCents: Int
    var currency: String
    var creditsGranted: Int
    var creditsSpent: Int
    var signedTransaction: String?
    var message: String?
    var finishedAt: Date?
    var createdAt: Date
    var revokedAt: Date?
    var revocationReason: String?
    /// The payment method the request asked for (`approve`, `defer`…, or `credits` for a
    /// redemption), kept as sent while `paymentMethod` records how it was settled (an approved
    /// Ask to Buy, a free re-buy): a replay of the idempotency key must ask for the same. Nil for
    /// transactions recorded before it was kept.
    var requestedMethod: String?
    /// Its place in the account's change feed: the account's next change number at its last
    /// write a device must learn of. The transaction list's order and cursor.
    var changeSequence: Int64?

    /// The app's own account token sent with the purchase (a UUID), carried into its receipt and notifications.
    var appAccountToken: String? = nil
    /// The introductory offer this period was bought or renewed with (``IntroductoryOffer/Kind``'s
    /// name), and its ISO 8601 period (`P14D`); nil at the normal price.
    var offerType: String? = nil
    var offerPeriod: String? = nil
    /// The reader's storefront when it was bought (ISO 3166-1 alpha-2; the country of its tax),
    /// the tax rate applied in basis points, and the tax inside `amountCents` (issue 65).
    var storefront: String? = nil
    var taxBasisPoints: Int? = nil
    var taxCents: Int = 0

    /// A free re-buy (``PaidBy/owned``): paid for, or approved, while the account already held it.
    var isFreeRebuy: Bool { paymentMethod == PaidBy.owned.rawValue }

    /// Whether committing it is a one-time charge the publisher is told of (`ONE_TIME_CHARGE`):
    /// a book, an issue or a credit pack bought (a subscription's start is `SUBSCRIBED`).
    var announcesCharge: Bool {
        status == .purchased && !isFreeRebuy && kind != .subscription
    }

    /// The notification of a one-time charge.
    var chargeNotification: StoreNotification {
        StoreNotification(type: StoreNotification.Kind.oneTimeCharge, subtype: nil, accountId: accountId, transactionId: id,
                          originalTransactionId: originalTransactionId, renewalInfo: nil)
    }

    var wire: StoreTransaction {
        let settled = status == .purchased || status == .revoked
        return StoreTransaction(
            transactionId: id, productId: productId, status: status,
            signedTransaction: settled ? signedTransaction : nil,
            finished: finishedAt != nil, message: message, revocationDate: revokedAt, revocationReason: revocationReason,
            paidBy: settled ? paymentMethod : nil)
    }
}

/// Money taken from (a charge) or paid back to (a refund, negative) an account: at most one of each
/// per transaction, so nothing is ever charged or refunded twice.
public struct LedgerEntry: Codable, Sendable {
    /// `credit`: the unused part of a period paid back when its plan was upgraded (``Subscriptions/changePlan(accountId:originalTransactionId:_:)``),
    /// negative like a refund; a later refund of that period pays back only the rest.
    public enum Kind: String, Codable, Sendable { case charge, refund, credit }
    public var id: Int64?
    public var transactionId: String
    public var kind: Kind
    public var accountId: String
    public var amountCents: Int
    public var currency: String
    public var reason: String?
    public var createdAt: Date
    /// The reader's country, the tax rate in basis points and the tax inside `amountCents`
    /// (negative in a refund or a credit, as the amount is): what a tax return sums.
    public var country: String? = nil
    public var taxBasisPoints: Int? = nil
    public var taxCents: Int = 0

    /// The charge a settled transaction makes, or nil when it takes no money (owned, credits, free).
    /// Whether the sales figures count it: every charge, and a refund that paid money back. The
    /// refund of what charged nothing (a redemption, paid back in credits; an operator's grant)
    /// is kept in the ledger, where it marks the transaction refunded, but is no refund of a sale.
    var countsInSales: Bool { Self.countsInSales(kind: kind, amountCents: amountCents) }

    /// The rule ``countsInSales`` applies, for a ledger row read without the rest of an entry.
    static func countsInSales(kind: Kind, amountCents: Int) -> Bool { kind == .charge || amountCents != 0 }

    static func charge(for record: TransactionRecord, at now: Date) -> LedgerEntry? {
        guard record.status == .purchased, record.amountCents > 0 else { return nil }
        return LedgerEntry(id: nil, transactionId: record.id, kind: .charge, accountId: record.accountId, amountCents: record.amountCents,
                           currency: record.currency, reason: nil, createdAt: now, country: record.storefront, taxBasisPoints: record.taxBasisPoints,
                           taxCents: record.taxCents)
    }

    /// The entry that pays back `cents` of this charge (a refund or a credit: negative), with the
    /// same share of its tax.
    func payingBack(_ cents: Int, kind: Kind, transactionId: String, reason: String?, at now: Date) -> LedgerEntry {
        let tax = amountCents == 0 ? 0 : TaxTable.rounded(taxCents * cents, over: amountCents)
        return LedgerEntry(id: nil, transactionId: transactionId, kind: kind, accountId: accountId, amountCents: -cents, currency: currency,
                           reason: reason, createdAt: now, country: country, taxBasisPoints: taxBasisPoints, taxCents: -tax)
    }
}
