import Crypto
import HTTPTypes
import Foundation
import GRDB
import KioskCore
import Logging

/// The sandbox store: accounts, payments, redemptions, Ask to Buy, and what each account owns.
///
/// Every change is one SQLite transaction. Signing is async and cannot run inside one, so a
/// payment is decided and signed first, then committed with a second look at its idempotency
/// key: of two identical requests racing, the one that commits second returns the first's result.
public struct Store: Sendable {
    let database: ServerDatabase
    let signer: ReceiptSigner
    let verifier: ReceiptVerifier
    let catalog: CatalogService
    public let environment: StoreEnvironment
    let metrics: ServerMetrics
    let logger: Logger

    public init(
        database: ServerDatabase, signer: ReceiptSigner, catalog: CatalogService, environment: StoreEnvironment,
        metrics: ServerMetrics, logger: Logger
    ) async throws {
        self.metrics = metrics
        self.database = database
        self.signer = signer
        self.verifier = try await ReceiptVerifier(jwks: signer.jwks)
        self.catalog = catalog
        self.environment = environment
        self.logger = logger
    }

    var issuer: String { "kiosk-\(environment.rawValue)" }

    // MARK: Accounts

    /// Creates an account with a fresh secret token; only the token's hash is stored.
    public func createAccount() async throws -> AccountCreated {
        let token = Self.randomHex(bytes: 32)
        let account = AccountRecord(
            id: "acct_" + Self.randomHex(bytes: 8), tokenHash: FileDigest.sha256(of: Data(token.utf8)),
            credits: 0, createdAt: Date())
        try await database.pool.write { try account.insert($0) }
        return AccountCreated(accountId: account.id, token: token)
    }

    /// The account a bearer token acts for.
    /// - Throws: 401 when the token is missing or unknown.
    func account(bearer token: String?) async throws -> AccountRecord {
        guard let token, !token.isEmpty else {
            throw APIFailure.unauthorized("this call needs Authorization: Bearer <account token>")
        }
        let hash = FileDigest.sha256(of: Data(token.utf8))
        guard let account = try await database.pool.read({ try AccountRecord.filter(Column("tokenHash") == hash).fetchOne($0) }) else {
            throw APIFailure.unauthorized("the account token is not known to this store; create an account or link another one")
        }
        return account
    }

    /// The balance and what the account owns.
    func summary(of accountId: String) async throws -> AccountSummary {
        let now = Date()
        return try await database.pool.read { db in
            guard let account = try AccountRecord.fetchOne(db, key: accountId) else {
                throw APIFailure(.notFound, code: "unknown_account", message: "no account \(accountId)")
            }
            let purchased = try TransactionRecord
                .filter(TransactionRecord.Columns.accountId == accountId && TransactionRecord.Columns.status == TransactionStatus.purchased.rawValue)
                .order(TransactionRecord.Columns.sequence)
                .fetchAll(db)
            let owned = Array(Set(purchased.filter { $0.kind == .nonConsumable }.map(\.productId))).sorted()
            var latestExpiry: [String: Date] = [:]
            for record in purchased where record.kind == .subscription {
                if let expires = record.expiresDate, expires > latestExpiry[record.productId] ?? .distantPast {
                    latestExpiry[record.productId] = expires
                }
            }
            let subscriptions = latestExpiry.keys.sorted().map { id in
                SubscriptionStatus(productId: id, expiresDate: latestExpiry[id] ?? now, active: (latestExpiry[id] ?? now) > now)
            }
            return AccountSummary(accountId: account.id, credits: account.credits, owned: owned, subscriptions: subscriptions)
        }
    }

    // MARK: Payments

    /// Charges (or defers, declines, cancels) a payment, at most once per idempotency key.
    func pay(_ request: PaymentRequest, account: AccountRecord) async throws -> PaymentResponse {
        guard !request.idempotencyKey.isEmpty, request.idempotencyKey.count <= 200 else {
            throw APIFailure.badRequest("idempotencyKey must be 1 to 200 characters")
        }
        if let existing = try await existingTransaction(account: account, key: request.idempotencyKey, productId: request.productId) {
            return try await response(for: existing)
        }
        let product = try await product(request.productId)
        guard (1...100).contains(request.quantity) else {
            throw APIFailure.badRequest("quantity must be between 1 and 100, not \(request.quantity)")
        }
        guard request.quantity == 1 || product.kind == .consumable else {
            throw APIFailure.badRequest("only consumables can be bought in a quantity; \(product.id) is a \(product.kind.rawValue)")
        }
        var record = TransactionRecord(
            sequence: nil, id: Self.newTransactionID(), accountId: account.id, productId: product.id, kind: product.kind,
            quantity: request.quantity, originalTransactionId: "", purchaseDate: nil, expiresDate: nil, status: .deferred,
            paymentMethod: request.paymentMethod.rawValue, idempotencyKey: request.idempotencyKey,
            amountCents: 0, currency: product.price.currency, creditsGranted: 0, creditsSpent: 0,
            signedTransaction: nil, message: nil, finishedAt: nil, createdAt: Date(), revokedAt: nil, revocationReason: nil)
        record.originalTransactionId = record.id
        switch request.paymentMethod {
        case .cancel:
            record.status = .cancelled
            record.message = "the purchase was cancelled; nothing was charged"
        case .decline:
            record.status = .declined
            record.message = "the payment was declined (sandbox method 'decline'); nothing was charged, try another payment method"
        case .defer:
            record.status = .deferred
            record.message = "waiting for approval (Ask to Buy)"
        case .approve:
            record = try await settle(record, product: product)
        }
        let stored = try await commit(record, replacingDeferred: false)
        logger.info("payment", metadata: ["transaction": "\(stored.id)", "product": "\(stored.productId)", "outcome": "\(stored.status.rawValue)"])
        metrics.payment(outcome: stored.status.rawValue)
        return try await response(for: stored)
    }

    /// Spends credits on a product that has a credit price, giving a signed transaction of its own.
    func redeem(_ request: RedemptionRequest, account: AccountRecord) async throws -> PaymentResponse {
        guard !request.idempotencyKey.isEmpty, request.idempotencyKey.count <= 200 else {
            throw APIFailure.badRequest("idempotencyKey must be 1 to 200 characters")
        }
        if let existing = try await existingTransaction(account: account, key: request.idempotencyKey, productId: request.productId) {
            return try await response(for: existing)
        }
        let product = try await product(request.productId)
        guard let creditPrice = product.creditPrice else {
            throw APIFailure(.conflict, code: "not_redeemable", message: "\(product.id) has no credit price; buy it instead")
        }
        var record = TransactionRecord(
            sequence: nil, id: Self.newTransactionID(), accountId: account.id, productId: product.id, kind: product.kind,
            quantity: 1, originalTransactionId: "", purchaseDate: nil, expiresDate: nil, status: .deferred,
            paymentMethod: "credits", idempotencyKey: request.idempotencyKey, amountCents: 0,
            currency: product.price.currency, creditsGranted: 0, creditsSpent: creditPrice,
            signedTransaction: nil, message: nil, finishedAt: nil, createdAt: Date(), revokedAt: nil, revocationReason: nil)
        record.originalTransactionId = record.id
        record = try await settle(record, product: product)
        let stored = try await commit(record, replacingDeferred: false)
        metrics.payment(outcome: "redeemed")
        return try await response(for: stored)
    }

    /// Approves a deferred (Ask to Buy) transaction: charges it and signs its receipt.
    func approve(transactionId: String) async throws -> StoreTransaction {
        let record = try await transaction(transactionId)
        guard record.status == .deferred else {
            throw APIFailure(.conflict, code: "not_deferred", message: "transaction \(transactionId) is \(record.status.rawValue), not deferred")
        }
        let settled = try await settle(record, product: product(record.productId))
        return try await commit(settled, replacingDeferred: true).wire
    }

    /// Declines a deferred transaction: nothing is charged.
    func decline(transactionId: String) async throws -> StoreTransaction {
        try await database.pool.write { db in
            guard var record = try TransactionRecord.filter(TransactionRecord.Columns.id == transactionId).fetchOne(db) else {
                throw APIFailure(.notFound, code: "unknown_transaction", message: "no transaction \(transactionId)")
            }
            guard record.status == .deferred else {
                throw APIFailure(.conflict, code: "not_deferred", message: "transaction \(transactionId) is \(record.status.rawValue), not deferred")
            }
            record.status = .declined
            record.message = "the request to buy was declined; nothing was charged"
            try record.update(db)
            return record.wire
        }
    }

    /// Revokes a purchased transaction (a refund): its receipt stops entitling anything, and the
    /// date and reason appear in the account's transaction list, so its devices learn of it.
    func revoke(transactionId: String, reason: String?) async throws -> StoreTransaction {
        try await database.pool.write { db in
            guard var record = try TransactionRecord.filter(TransactionRecord.Columns.id == transactionId).fetchOne(db) else {
                throw APIFailure(.notFound, code: "unknown_transaction", message: "no transaction \(transactionId)")
            }
            guard record.status == .purchased || record.status == .revoked else {
                throw APIFailure(.conflict, code: "not_purchased", message: "transaction \(transactionId) is \(record.status.rawValue); only a purchase can be revoked")
            }
            if record.status == .purchased {
                record.status = .revoked
                record.revokedAt = Date()
                record.revocationReason = reason.flatMap { $0.isEmpty ? nil : $0 } ?? "revoked by the store"
                try record.update(db)
            }
            return record.wire
        }
    }

    /// The account's transactions after `cursor`, oldest first.
    func transactions(account: AccountRecord, after cursor: String?, limit: Int = 100) async throws -> TransactionPage {
        let after: Int64
        if let cursor, !cursor.isEmpty {
            guard let value = Int64(cursor) else { throw APIFailure.badRequest("after must be a cursor from an earlier page") }
            after = value
        } else {
            after = 0
        }
        let records = try await database.pool.read { db in
            try TransactionRecord
                .filter(TransactionRecord.Columns.accountId == account.id && TransactionRecord.Columns.sequence > after)
                .order(TransactionRecord.Columns.sequence)
                .limit(limit + 1)
                .fetchAll(db)
        }
        let page = records.prefix(limit)
        return TransactionPage(
            transactions: page.map(\.wire), cursor: page.last?.sequence.map(String.init) ?? cursor,
            hasMore: records.count > limit)
    }

    /// Records that the client delivered a purchased transaction.
    func finish(transactionId: String, account: AccountRecord) async throws -> StoreTransaction {
        try await database.pool.write { db in
            guard var record = try TransactionRecord
                .filter(TransactionRecord.Columns.id == transactionId && TransactionRecord.Columns.accountId == account.id)
                .fetchOne(db)
            else {
                throw APIFailure(.notFound, code: "unknown_transaction", message: "this account has no transaction \(transactionId)")
            }
            guard record.status == .purchased || record.status == .revoked else {
                throw APIFailure(.conflict, code: "not_purchased", message: "transaction \(transactionId) is \(record.status.rawValue); only a purchased transaction can be finished")
            }
            if record.finishedAt == nil {
                record.finishedAt = Date()
                try record.update(db)
            }
            return record.wire
        }
    }

    /// Money charged to an account, for the admin view and the tests' "charged exactly once".
    func charges(accountId: String) async throws -> [ChargeRecord] {
        try await database.pool.read { try ChargeRecord.filter(Column("accountId") == accountId).order(Column("id")).fetchAll($0) }
    }

    // MARK: Deciding and committing

    /// Decides what an approved payment costs and grants, and signs its receipt.
    private func settle(_ pending: TransactionRecord, product: Product) async throws -> TransactionRecord {
        var record = pending
        let now = Date()
        record.status = .purchased
        record.purchaseDate = now
        record.message = nil
        let (accountId, productId) = (record.accountId, record.productId)
        let previous = try await database.pool.read { db in
            try TransactionRecord
                .filter(TransactionRecord.Columns.accountId == accountId
                    && TransactionRecord.Columns.productId == productId
                    && TransactionRecord.Columns.status == TransactionStatus.purchased.rawValue)
                .order(TransactionRecord.Columns.sequence)
                .fetchAll(db)
        }
        switch product.kind {
        case .consumable:
            record.amountCents = try Self.cents(product.price) * record.quantity
            record.creditsGranted = (product.credits ?? 0) * record.quantity
            record.creditsSpent = 0
        case .nonConsumable:
            if let first = previous.first {
                // Already owned: a new transaction that points at the first, and nothing charged.
                record.originalTransactionId = first.originalTransactionId
                record.paymentMethod = "owned"
                record.amountCents = 0
                record.creditsSpent = 0
            } else if record.paymentMethod != "credits" {
                record.amountCents = try Self.cents(product.price)
            }
        case .subscription:
            if let active = previous.last(where: { ($0.expiresDate ?? .distantPast) > now }) {
                record.originalTransactionId = active.originalTransactionId
                record.expiresDate = active.expiresDate
                record.paymentMethod = "owned"
                record.amountCents = 0
            } else {
                record.originalTransactionId = previous.first?.originalTransactionId ?? record.id
                record.expiresDate = Calendar.utc.date(byAdding: .month, value: product.periodMonths ?? 1, to: now)
                record.amountCents = try Self.cents(product.price)
            }
        }
        let claims = ReceiptClaims(
            transactionId: record.id, originalTransactionId: record.originalTransactionId, productId: record.productId,
            kind: record.kind, quantity: record.quantity, accountId: record.accountId, purchaseDate: now,
            expiresDate: record.expiresDate, environment: environment, issuer: issuer)
        record.signedTransaction = try await signer.sign(claims)
        return record
    }

    /// Stores a transaction, its charge and its credits in one SQLite transaction.
    private func commit(_ record: TransactionRecord, replacingDeferred: Bool) async throws -> TransactionRecord {
        try await database.pool.write { db in
            var record = record
            if replacingDeferred {
                guard let current = try TransactionRecord.filter(TransactionRecord.Columns.id == record.id).fetchOne(db),
                      current.status == .deferred
                else {
                    throw APIFailure(.conflict, code: "not_deferred", message: "transaction \(record.id) was already settled")
                }
                record.sequence = current.sequence
            } else if let winner = try TransactionRecord
                .filter(TransactionRecord.Columns.accountId == record.accountId && TransactionRecord.Columns.idempotencyKey == record.idempotencyKey)
                .fetchOne(db)
            {
                return winner
            }
            if record.status == .purchased, record.creditsSpent > 0 || record.creditsGranted > 0 {
                guard var account = try AccountRecord.fetchOne(db, key: record.accountId) else {
                    throw APIFailure(.notFound, code: "unknown_account", message: "no account \(record.accountId)")
                }
                guard account.credits >= record.creditsSpent else {
                    throw APIFailure(HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"), code: "insufficient_credits",
                        message: "\(record.productId) costs \(record.creditsSpent) credits and the balance is \(account.credits); buy a credit pack first")
                }
                account.credits += record.creditsGranted - record.creditsSpent
                try account.update(db)
            }
            try record.save(db)
            if record.status == .purchased, record.amountCents > 0 {
                try ChargeRecord(
                    id: nil, transactionId: record.id, accountId: record.accountId, amountCents: record.amountCents,
                    currency: record.currency, createdAt: Date()
                ).insert(db)
            }
            return record
        }
    }

    /// The reply to a payment: the transaction and the balance; a declined payment is a 402.
    private func response(for record: TransactionRecord) async throws -> PaymentResponse {
        if record.status == .declined {
            throw APIFailure(HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"), code: "payment_declined", message: record.message ?? "the payment was declined")
        }
        let credits = try await database.pool.read { try AccountRecord.fetchOne($0, key: record.accountId)?.credits ?? 0 }
        return PaymentResponse(transaction: record.wire, credits: credits, owned: record.paymentMethod == "owned")
    }

    private func existingTransaction(account: AccountRecord, key: String, productId: String) async throws -> TransactionRecord? {
        let existing = try await database.pool.read { db in
            try TransactionRecord
                .filter(TransactionRecord.Columns.accountId == account.id && TransactionRecord.Columns.idempotencyKey == key)
                .fetchOne(db)
        }
        if let existing, existing.productId != productId {
            throw APIFailure(.conflict, code: "idempotency_key_reused",
                message: "idempotency key \(key) was already used for \(existing.productId); use a fresh key for a new purchase")
        }
        return existing
    }

    func transaction(_ id: String) async throws -> TransactionRecord {
        guard let record = try await database.pool.read({ try TransactionRecord.filter(TransactionRecord.Columns.id == id).fetchOne($0) }) else {
            throw APIFailure(.notFound, code: "unknown_transaction", message: "no transaction \(id)")
        }
        return record
    }

    func product(_ id: String) async throws -> Product {
        guard let product = await catalog.current.products[id] else { throw APIFailure.unknownProduct(id) }
        return product
    }

    // MARK: Helpers

    /// "4.99" → 499. The catalog loader has already checked the format.
    static func cents(_ price: Price) throws -> Int {
        let parts = price.amount.split(separator: ".", omittingEmptySubsequences: false)
        guard let whole = Int(parts[0]) else { throw APIFailure.badRequest("bad price \(price.amount)") }
        let fraction = parts.count > 1 ? String(parts[1]).padding(toLength: 2, withPad: "0", startingAt: 0) : "00"
        return whole * 100 + (Int(fraction) ?? 0)
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }

    static func newTransactionID() -> String { "txn_" + randomHex(bytes: 10) }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()
}
