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
    /// - Parameter offerCode: an offer code that takes money off (or gives a subscription's
    ///   introductory offer), spent by the store only if the payment goes through.
    public func buy(_ productId: String, quantity: Int = 1, method: PaymentMethod = .approve, downloadNow: Bool = true,
                    offerCode: String? = nil) async throws -> PurchaseResult {
        try await flows.buy(productId, quantity: quantity, method: method.rawValue, mode: downloadNow ? .now : .finishNow, offerCode: offerCode)
    }

    /// Spends credits on a book or an issue.
    public func redeem(_ productId: String, downloadNow: Bool = true) async throws -> PurchaseResult {
        try await flows.buy(productId, quantity: 1, method: "credits", mode: downloadNow ? .now : .finishNow)
    }

    /// Redeems an offer code for the product it gives, then brings it into the library as a
    /// restore does (its receipt saved before it is finished). The store grants a code once per
    /// account, so redeeming it again after a lost answer finishes the same grant.
    public func redeemCode(_ code: String, downloadNow: Bool = true) async throws -> (redeemed: RedeemCodeResponse, restored: RestoreResult) {
        let redeemed = try await purchases.authorizedAPI().redeemCode(code)
        return (redeemed, try await flows.restore(mode: downloadNow ? .now : .queue))
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
        guard try database.account.current() != nil else { return nil }
        return try await purchases.authorizedAPI().account()
    }

    /// The account's subscriptions with their state (active until, auto-renew, grace, billing
    /// retry, expired and why), as the store knows them; nil when this device has no account yet.
    public func subscriptions() async throws -> SubscriptionList? {
        guard try database.account.current() != nil else { return nil }
        return try await purchases.authorizedAPI().subscriptions()
    }

    /// Turns a subscription's auto-renew off (it ends at its period's end) or back on.
    public func setAutoRenew(_ originalTransactionId: String, on: Bool) async throws -> SubscriptionInfo {
        try await purchases.authorizedAPI().setAutoRenew(originalTransactionId, on: on)
    }

    /// Chooses the account's storefront (a country code such as DE): the prices, the currency and
    /// the tax of what it buys from now on (``Product/price(in:)``). Creates the account on first use.
    public func setStorefront(_ storefront: String) async throws -> AccountSummary {
        try await purchases.authorizedAPI().setStorefront(storefront)
    }

    /// Moves a subscription to another plan of its group: an upgrade at once (its new period
    /// charged, the old period's unused part credited), a downgrade at the next renewal
    /// (``PlanChange``). A period it made is then restored like any other, so its receipt is kept.
    /// Asking for the running plan undoes a change that waits for the renewal.
    /// - Parameter subscription: its original transaction ID, or a plan (product ID) of its group:
    ///   the account's subscription of that group that has not ended.
    public func changePlan(_ subscription: String, to productId: String) async throws -> (changed: PlanChangeResult, restored: RestoreResult?) {
        let api = try await purchases.authorizedAPI()
        let originalTransactionId = try await subscriptionID(subscription, api: api)
        let request = PlanChangeRequest(productId: productId, idempotencyKey: UUID().uuidString.lowercased())
        let changed = try await api.changePlan(originalTransactionId, request)
        return (changed, changed.transaction == nil ? nil : try await flows.restore(mode: .queue))
    }

    /// The ID of the subscription `handle` names: itself when the account has a subscription of
    /// that ID, else the account's subscription that has not ended in the group of the plan it names.
    private func subscriptionID(_ handle: String, api: StoreAPI) async throws -> String {
        let list = try await api.subscriptions().subscriptions
        if list.contains(where: { $0.originalTransactionId == handle }) { return handle }
        guard let plan = try? catalog.cachedProduct(handle), plan.kind == .subscription else { return handle }
        let group = { (id: String) in (try? self.catalog.cachedProduct(id))?.group }
        guard let running = list.first(where: { $0.state != .expired && group($0.productId) == plan.group }) else {
            throw ClientError.invalidRequest("the account has no running subscription in \(plan.group), the group of \(handle); kiosk subscriptions lists them")
        }
        return running.originalTransactionId
    }

    /// Cancels the purchase of `productId` saved on this device and never sent to a store.
    /// - Throws: ``ClientError/invalidRequest(_:)`` when there is none, or when it was sent and its
    ///   answer is still awaited (it may have been charged).
    public func cancelUnsentPurchase(_ productId: String) throws -> PaymentRecord {
        try purchases.cancelUnsent(productId)
    }

    /// Turns purchases on this device on or off (a device restriction, like parental controls).
    public func setPaymentsEnabled(_ enabled: Bool) throws {
        try database.settings.setPaymentsEnabled(enabled)
    }

    public func paymentsEnabled() throws -> Bool {
        try database.settings.paymentsEnabled()
    }

    /// Every stored transaction, newest first, each receipt verified offline against the cached keys.
    public func transactions() async throws -> [TransactionView] {
        let records = try purchases.all()
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

// MARK: The payment channels

extension KioskClient {
    /// The store's environment and how it takes money (`GET /v1/store`).
    public func storeDescription() async throws -> StoreDescription {
        try await flows.purchases.storeDescription()
    }

    /// Buys on the publisher's web shop: the URL where the reader pays for `productId`. The grant
    /// arrives through the change feed once the shop's payment service says it was paid;
    /// ``waitForCheckout(_:known:timeout:downloadNow:)`` waits for it, or the agent delivers it.
    /// - Returns: the checkout, and the transactions of the product this device had before it
    ///   (which the wait tells apart from the new one).
    /// - Parameter offerCode: an offer code the web's checkout takes off the price (or a plan's trial).
    public func checkout(_ productId: String, quantity: Int = 1, offerCode: String? = nil) async throws -> (checkout: Checkout, known: Set<String>) {
        let known = try flows.knownTransactions(of: productId)
        return (try await flows.checkout(productId, quantity: quantity, offerCode: offerCode), known)
    }

    /// Waits until the checkout's purchase arrives, then downloads and installs it (unless told
    /// otherwise); nil when `timeout` passes first.
    public func waitForCheckout(_ checkout: Checkout, known: Set<String>, timeout: Duration, downloadNow: Bool = true) async throws -> PurchaseResult? {
        try await flows.waitForCheckout(checkout, known: known, timeout: timeout, mode: downloadNow ? .now : .finishNow)
    }

    /// Presents a Google Play purchase (its JSON exactly as Play returned it, and its signature):
    /// the store grants it to this account, and it is downloaded and installed (unless told
    /// otherwise). Once this returns, the app acknowledges the purchase to Play.
    /// - Parameter productId: the Kiosk product the reader means, when known: a purchase of another
    ///   one is refused before it is sent.
    public func presentPlayPurchase(json: String, signature: String, for productId: String? = nil, downloadNow: Bool = true) async throws -> ChannelPurchaseResult {
        try await flows.presentPlayPurchase(PlayPurchaseProof(purchase: json, signature: signature), expected: productId, mode: downloadNow ? .now : .finishNow)
    }

    /// Presents an App Store transaction (StoreKit 2's JWS) bought with this account's
    /// `appAccountToken` (``AccountSummary/appAccountToken``): the store grants it to this account.
    public func presentAppStoreTransaction(_ signedTransaction: String, downloadNow: Bool = true) async throws -> ChannelPurchaseResult {
        try await flows.presentAppStoreTransaction(AppStoreTransactionProof(signedTransaction: signedTransaction), mode: downloadNow ? .now : .finishNow)
    }
}
