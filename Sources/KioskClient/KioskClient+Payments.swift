import Foundation
import KioskCore
import KioskTransfer

/// A stored transaction and whether its receipt still verifies.
public struct TransactionView: Sendable {
    public var record: PaymentRecord
    /// nil when the receipt verifies (or there is none yet); otherwise why it cannot be used.
    public var receiptProblem: String?
    /// What the verified receipt says (purchase date, a subscription's end); nil without one that verifies.
    public var claims: ReceiptClaims?

    public init(record: PaymentRecord, receiptProblem: String?, claims: ReceiptClaims? = nil) {
        self.record = record
        self.receiptProblem = receiptProblem
        self.claims = claims
    }
}

extension KioskClient {
    /// Moves unfinished work on: purchases never answered are sent again with their key, paid ones
    /// delivered, Ask to Buy answers and revocations picked up. Each item on its own; one that
    /// fails keeps its error and backoff. An unreachable server is not an error: the work waits.
    @discardableResult
    public func replay() async -> ReplayReport {
        await delivery.replay()
    }

    /// Buys a product and, unless told otherwise, downloads and installs its content before
    /// returning; see ``DeliveryCoordinator`` for the order of commits.
    /// - Parameter downloadNow: false finishes the purchase at once and leaves the download queued.
    public func buy(_ productId: String, quantity: Int = 1, method: PaymentMethod = .approve, downloadNow: Bool = true) async throws -> PurchaseResult {
        try await delivery.buy(productId, quantity: quantity, method: method.rawValue, mode: downloadNow ? .now : .finishNow)
    }

    /// Spends credits on a book or an issue.
    public func redeem(_ productId: String, downloadNow: Bool = true) async throws -> PurchaseResult {
        try await delivery.buy(productId, quantity: 1, method: "credits", mode: downloadNow ? .now : .finishNow)
    }

    /// Brings back every book, issue and subscription period of the account, then downloads what
    /// they entitle and finishes them. A transaction whose receipt does not verify is left out and
    /// named in `refused`; the others are restored all the same.
    /// - Parameter downloadNow: false only queues the content.
    public func restore(downloadNow: Bool = true) async throws -> RestoreResult {
        try await delivery.restore(mode: downloadNow ? .now : .queue)
    }

    /// The account's balance and what it owns, as the server knows it.
    public func accountSummary() async throws -> AccountSummary {
        try await payments.authorizedAPI().account()
    }

    /// This device's account ID, if it has one yet.
    public func accountID() throws -> String? {
        try database.account()?.id
    }

    /// This device's account token, to link another device to the same account.
    public func accountToken() throws -> String? {
        try database.account()?.token
    }

    /// Uses an existing account (from another device) on this one.
    /// - Throws: the server's 401 when the token is not known; ``ClientError/invalidRequest(_:)``
    ///   while a purchase of the current account is still unanswered.
    public func linkAccount(token: String) async throws -> AccountSummary {
        if try database.unfinishedPayments().contains(where: { $0.state == .purchasing }) {
            throw ClientError.invalidRequest("a purchase of this device's account is still unanswered; run kiosk resume once the server is reachable, then link")
        }
        var api = try payments.storeAPI()
        api.token = token
        let summary = try await api.account()
        try database.saveAccount(id: summary.accountId, token: token, replacing: true)
        return summary
    }

    /// Turns purchases on this device on or off (a device restriction, like parental controls).
    public func setPaymentsEnabled(_ enabled: Bool) throws {
        try database.setSetting(Setting.Key.paymentsEnabled, to: enabled ? "on" : "off")
    }

    public func paymentsEnabled() throws -> Bool {
        try database.setting(Setting.Key.paymentsEnabled) != "off"
    }

    /// Every stored transaction, newest first, each receipt verified offline against the cached keys.
    public func transactions() async throws -> [TransactionView] {
        let records = try database.payments()
        let accountId = try database.account()?.id
        let check = ReceiptCheck(database: database)
        var views: [TransactionView] = []
        for record in records {
            var problem: String?
            var verified: ReceiptClaims?
            if let receipt = record.receipt {
                do {
                    let claims = try await check.verify(receipt, accountId: accountId, fetchKeys: nil)
                    if claims.transactionId != record.transactionId || claims.productId != record.productId {
                        problem = "the receipt is for another transaction"
                    } else {
                        verified = claims
                    }
                } catch {
                    problem = "\(error)"
                }
            }
            views.append(TransactionView(record: record, receiptProblem: problem, claims: verified))
        }
        return views
    }
}
