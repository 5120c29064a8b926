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
        await flows.replay()
    }

    /// Buys a product and, unless told otherwise, downloads and installs its content before
    /// returning; see ``Flows`` for the order of commits.
    /// - Parameter downloadNow: false finishes the purchase at once and leaves the download queued.
    public func buy(_ productId: String, quantity: Int = 1, method: PaymentMethod = .approve, downloadNow: Bool = true) async throws -> PurchaseResult {
        try await flows.buy(productId, quantity: quantity, method: method.rawValue, mode: downloadNow ? .now : .finishNow)
    }

    /// Spends credits on a book or an issue.
    public func redeem(_ productId: String, downloadNow: Bool = true) async throws -> PurchaseResult {
        try await flows.buy(productId, quantity: 1, method: "credits", mode: downloadNow ? .now : .finishNow)
    }

    /// Brings back every book, issue and subscription period of the account, then downloads what
    /// they entitle and finishes them. A transaction whose receipt does not verify is left out and
    /// named in `refused`; the others are restored all the same.
    /// - Parameter downloadNow: false only queues the content.
    public func restore(downloadNow: Bool = true) async throws -> RestoreResult {
        try await flows.restore(mode: downloadNow ? .now : .queue)
    }

    /// The account's balance and what it owns, as the server knows it (creating the account on
    /// first use).
    public func accountSummary() async throws -> AccountSummary {
        try await purchases.authorizedAPI().account()
    }

    /// The account's balance and what it owns, as the server knows it; nil when this device has
    /// no account yet. Looking creates nothing on the server.
    public func existingAccountSummary() async throws -> AccountSummary? {
        guard try database.account() != nil else { return nil }
        return try await purchases.authorizedAPI().account()
    }

    /// The account's subscriptions with their state (active until, auto-renew, grace, billing
    /// retry, expired and why), as the store knows them; nil when this device has no account yet.
    public func subscriptions() async throws -> SubscriptionList? {
        guard try database.account() != nil else { return nil }
        return try await purchases.authorizedAPI().subscriptions()
    }

    /// Turns a subscription's auto-renew off (it ends at its period's end) or back on.
    public func setAutoRenew(_ originalTransactionId: String, on: Bool) async throws -> SubscriptionInfo {
        try await purchases.authorizedAPI().setAutoRenew(originalTransactionId, on: on)
    }

    /// Cancels the purchase of `productId` saved on this device and never sent to a store.
    /// - Throws: ``ClientError/invalidRequest(_:)`` when there is none, or when it was sent and its
    ///   answer is still awaited (it may have been charged).
    public func cancelUnsentPurchase(_ productId: String) throws -> PaymentRecord {
        let waiting = try database.unsentPurchases(productId: productId)
        // The one never sent, if any: one that was sent may have been charged.
        guard let record = waiting.first(where: { $0.sentAt == nil }) ?? waiting.first, let id = record.id else {
            throw ClientError.invalidRequest("no purchase of \(productId) waits to be sent on this device; kiosk transactions lists them")
        }
        return try database.cancelUnsent(id)
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
        let check = ReceiptCheck(database: database)
        var views: [TransactionView] = []
        for record in records {
            var problem: String?
            var verified: ReceiptClaims?
            if let receipt = record.receipt {
                do {
                    verified = try await check.verifiedReceipt(receipt, of: ReceiptSubject(transactionId: record.transactionId, productId: record.productId), keysFrom: nil)
                } catch {
                    problem = "\(error)"
                }
            }
            views.append(TransactionView(record: record, receiptProblem: problem, claims: verified))
        }
        return views
    }
}
