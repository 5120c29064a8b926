import Foundation
import GRDB
import KioskCore

/// A stored transaction and whether its receipt still verifies.
public struct TransactionView: Sendable {
    public var record: PaymentRecord
    /// nil when the receipt verifies (or there is none yet); otherwise why it cannot be used.
    public var receiptProblem: String?

    public init(record: PaymentRecord, receiptProblem: String?) {
        self.record = record
        self.receiptProblem = receiptProblem
    }
}

extension KioskClient {
    func paymentQueue(server: String) -> PaymentQueue {
        PaymentQueue(database: database, http: http, server: server, logger: logger, downloads: downloadQueue(server: server))
    }

    /// Replays unfinished work; every command that talks to the server calls this first.
    /// An unreachable server is not an error here: the work simply waits for the next command.
    @discardableResult
    public func replay(server: String) async throws -> ReplayReport {
        do {
            return try await paymentQueue(server: server).replay()
        } catch let error as ClientError where error.isUnreachable {
            return ReplayReport()
        }
    }

    /// Buys a product; see ``PaymentQueue`` for the order of commits.
    public func buy(_ productId: String, quantity: Int = 1, method: PaymentMethod = .approve, downloadNow: Bool = true, server: String) async throws -> PurchaseResult {
        try await paymentQueue(server: server).buy(productId: productId, quantity: quantity, method: method, downloadNow: downloadNow)
    }

    /// Spends credits on a book or an issue.
    public func redeem(_ productId: String, downloadNow: Bool = true, server: String) async throws -> PurchaseResult {
        try await paymentQueue(server: server).redeem(productId: productId, downloadNow: downloadNow)
    }

    /// Brings back every book, issue and active subscription of the account.
    public func restore(server: String) async throws -> [PaymentRecord] {
        try await paymentQueue(server: server).restore()
    }

    /// The account's balance and what it owns, as the server knows it.
    public func accountSummary(server: String) async throws -> AccountSummary {
        try await paymentQueue(server: server).authorizedAPI().account()
    }

    /// This device's account ID, if it has one yet.
    public func accountID() async throws -> String? {
        try await database.pool.read { try Setting.value(Setting.Key.accountID, in: $0) }
    }

    /// This device's account token, to link another device to the same account.
    public func accountToken() async throws -> String? {
        try await database.pool.read { try Setting.value(Setting.Key.accountToken, in: $0) }
    }

    /// Uses an existing account (from another device) on this one.
    /// - Throws: the server's 401 when the token is not known.
    public func linkAccount(token: String, server: String) async throws -> AccountSummary {
        var api = paymentQueue(server: server).api()
        api.token = token
        let summary = try await api.account()
        try await database.pool.write { db in
            try Setting.set(Setting.Key.accountID, to: summary.accountId, in: db)
            try Setting.set(Setting.Key.accountToken, to: token, in: db)
        }
        return summary
    }

    /// Turns purchases on this device on or off (a device restriction, like parental controls).
    public func setPaymentsEnabled(_ enabled: Bool) async throws {
        try await database.pool.write { try Setting.set(Setting.Key.paymentsEnabled, to: enabled ? "on" : "off", in: $0) }
    }

    public func paymentsEnabled() async throws -> Bool {
        try await database.pool.read { try Setting.value(Setting.Key.paymentsEnabled, in: $0) } != "off"
    }

    /// Every stored transaction, newest first, each receipt verified offline against the cached keys.
    public func transactions() async throws -> [TransactionView] {
        let (records, accountId) = try await database.pool.read { db in
            (try PaymentRecord.order(PaymentRecord.Columns.id.desc).fetchAll(db), try Setting.value(Setting.Key.accountID, in: db))
        }
        let check = ReceiptCheck(database: database)
        var views: [TransactionView] = []
        for record in records {
            var problem: String?
            if let receipt = record.receipt {
                do {
                    let claims = try await check.verify(receipt, accountId: accountId, fetchKeys: nil)
                    if claims.transactionId != record.transactionId || claims.productId != record.productId {
                        problem = "the receipt is for another transaction"
                    }
                } catch {
                    problem = "\(error)"
                }
            }
            views.append(TransactionView(record: record, receiptProblem: problem))
        }
        return views
    }
}
