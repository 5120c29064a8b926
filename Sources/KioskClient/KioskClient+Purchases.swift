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

/// What linking this device to an account did.
public struct AccountLink: Sendable {
    /// The linked account, as the store knows it.
    public var summary: AccountSummary
    /// The account this device had before, when it was another one.
    public var replaced: String?
    /// What the replaced account owned: purchases and subscriptions, and credits.
    public var replacedHoldings = 0
    public var replacedCredits = 0
    /// This device was already linked to that account: nothing changed.
    public var alreadyLinked = false

    public var accountId: String { summary.accountId }
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

    /// This device's account ID, if it has one yet.
    public func accountID() throws -> String? {
        try database.account()?.id
    }

    /// This device's account token, to link another device to the same account.
    public func accountToken() throws -> String? {
        try database.account()?.token
    }

    /// Uses an existing account (from another device) on this one.
    ///
    /// The account this device had is replaced; when it owns anything (purchases, credits or
    /// subscriptions, as the store knows them) linking is refused unless `force` is true, since
    /// this device would no longer reach them.
    /// - Throws: the server's 401 when the token is not known; ``ClientError/invalidRequest(_:)``
    ///   while a purchase of the current account is still unanswered, or when the current account
    ///   owns something and `force` is false.
    public func linkAccount(token: String, force: Bool = false) async throws -> AccountLink {
        if try database.unfinishedPayments().contains(where: { $0.state == .purchasing }) {
            throw ClientError.invalidRequest("a purchase of this device's account is still unanswered; send it first (kiosk resume) once the server is reachable, then link")
        }
        var api = try purchases.storeAPI()
        api.token = token
        let summary = try await api.account()
        var link = AccountLink(summary: summary)
        if let current = try database.account(), current.id != summary.accountId {
            var currentAPI = api
            currentAPI.token = current.token
            let holdings = try await currentAPI.account()
            link.replaced = current.id
            link.replacedHoldings = holdings.owned.count + holdings.subscriptions.count
            link.replacedCredits = holdings.credits
            if !force, link.replacedHoldings > 0 || holdings.credits > 0 {
                throw ClientError.invalidRequest(
                    "this device's account \(current.id) owns \(link.replacedHoldings) purchase(s) and \(holdings.credits) credits, which this device would no longer reach; "
                    + "keep its token first (kiosk account --show-token), then link with --force")
            }
        } else if let current = try database.account(), current.id == summary.accountId {
            link.alreadyLinked = true
        }
        try database.saveAccount(id: summary.accountId, token: token, replacing: true)
        return link
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
