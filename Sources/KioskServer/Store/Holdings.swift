import Foundation
import SQLKit
import HTTPTypes
import KioskCore

/// What an account holds that a payment's outcome depends on, read in one transaction at one
/// revision of the account; ``Store`` commits a decision only while the account is still at it.
struct Holdings {
    let revision: Int64
    let credits: Int
    /// The transaction already made with this idempotency key, if any.
    let sameKey: TransactionRecord?
    /// The first standing purchase of the product (a book or an issue).
    let firstPurchase: TransactionRecord?
    /// The latest standing period of the subscription.
    let latestPeriod: TransactionRecord?
    /// A pending Ask to Buy of the product.
    let pending: TransactionRecord?

    /// Each look-up is one indexed row, so a purchase costs the same however long the history.
    ///
    /// The account row is read first: on PostgreSQL (read committed) each statement sees its own
    /// snapshot, and a row committed after the account was read belongs to a later revision, which
    /// the commit's compare-and-set refuses.
    /// Only what the product's kind decides on is read: a first purchase for a book or an issue,
    /// the latest period for a subscription, neither for a consumable.
    static func read(accountId: String, product: Product, key: String, in db: any SQLDatabase) async throws -> Holdings {
        let productId = product.id
        guard let account = try await db.account(accountId) else {
            throw APIFailure(.notFound, code: "unknown_account", message: "no account \(accountId)")
        }
        let purchased = TransactionStatus.purchased.rawValue
        let ofProduct = { (query: SQLSelectBuilder) in query.where("accountId", .equal, accountId).where("productId", .equal, productId) }
        return Holdings(
            revision: account.revision, credits: account.credits,
            sameKey: try await db.transactions(limit: 1) { $0.where("accountId", .equal, accountId).where("idempotencyKey", .equal, key) }.first,
            firstPurchase: product.kind != .nonConsumable ? nil
                : try await db.transactions(limit: 1) { ofProduct($0).where("status", .equal, purchased) }.first,
            latestPeriod: product.kind != .subscription ? nil
                : try await ofProduct(db.select().column("*").from("storeTransaction")).where("status", .equal, purchased)
                    .where(SQLColumn("expiresDate"), .isNot, SQLLiteral.null).orderBy("expiresDate", .descending).limit(1).first(decoding: TransactionRecord.self),
            pending: try await db.transactions(limit: 1) { ofProduct($0).where("status", .equal, TransactionStatus.deferred.rawValue) }.first)
    }

    /// Settles an approved payment or redemption: what it costs, grants and signs.
    /// - Throws: 402 `insufficient_credits`; 409 when a sum would overflow.
    func decide(_ record: inout TransactionRecord, product: Product, now: Date = .storeNow) throws {
        record.status = .purchased
        record.purchaseDate = now
        record.message = nil
        if decideOwned(&record, product: product, now: now) != nil { return }
        switch product.kind {
        case .consumable:
            let (amount, amountOverflow) = try Store.cents(product.price).multipliedReportingOverflow(by: record.quantity)
            let (granted, grantedOverflow) = (product.credits ?? 0).multipliedReportingOverflow(by: record.quantity)
            guard !amountOverflow, !grantedOverflow, !credits.addingReportingOverflow(granted).overflow else { throw Self.overflow }
            record.amountCents = amount
            record.creditsGranted = granted
        case .nonConsumable:
            if record.paymentMethod == "credits" {
                let price = product.creditPrice ?? 0
                guard credits >= price else {
                    throw APIFailure(HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"), code: "insufficient_credits",
                        message: "\(product.id) costs \(price) credits and the balance is \(credits); buy a credit pack first")
                }
                record.creditsSpent = price
            } else {
                record.amountCents = try Store.cents(product.price)
            }
        case .subscription:
            record.originalTransactionId = latestPeriod?.originalTransactionId ?? record.id
            record.expiresDate = Calendar.utc.date(byAdding: .month, value: product.periodMonths ?? 1, to: now)
            record.amountCents = try Store.cents(product.price)
        }
    }

    /// When the account already has the product (a book, an issue, an active subscription), the
    /// payment becomes a free transaction that points at the original: nothing is charged.
    /// - Returns: the decision, or nil when the product is not owned.
    @discardableResult
    func decideOwned(_ record: inout TransactionRecord, product: Product, now: Date = .storeNow) -> Store.Decision? {
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
        record.paymentMethod = "owned"
        record.amountCents = 0
        record.creditsSpent = 0
        record.creditsGranted = 0
        record.message = "already owned; nothing was charged"
        return .new(record)
    }

    static let overflow = APIFailure(.conflict, code: "amount_too_large", message: "the amount or balance would be too large; buy fewer at once")
}

extension TransactionRecord {
    /// A transaction not yet decided, with its own ID as its original.
    static func pending(account: String, product: Product, quantity: Int, method: String, key: String) -> TransactionRecord {
        let id = Store.newTransactionID()
        return TransactionRecord(
            sequence: nil, id: id, accountId: account, productId: product.id, kind: product.kind,
            quantity: quantity, originalTransactionId: id, purchaseDate: nil, expiresDate: nil, status: .deferred,
            paymentMethod: method, idempotencyKey: key, amountCents: 0, currency: product.price.currency,
            creditsGranted: 0, creditsSpent: 0, signedTransaction: nil, message: nil, finishedAt: nil,
            createdAt: .storeNow, revokedAt: nil, revocationReason: nil)
    }

    /// How the account's credit balance changes when this commits.
    var creditDelta: Int {
        status == .purchased ? creditsGranted - creditsSpent : 0
    }
}
