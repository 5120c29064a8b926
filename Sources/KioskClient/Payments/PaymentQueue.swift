import Foundation
import KioskCore
import KioskTransfer
import Logging

/// What `buy` or `redeem` ended with.
public struct PurchaseResult: Sendable {
    /// The purchase as stored; its state says the outcome.
    public var record: PaymentRecord
    /// The account's credit balance after the purchase, when the server said.
    public var credits: Int?
    /// The server could not be reached: the purchase is saved and will be sent by the next command.
    public var savedOffline = false
    /// The account already owned it: nothing was charged (the record is the standing purchase).
    public var alreadyOwned = false
    /// What running its download did, when the content was downloaded as part of the purchase.
    public var downloads: DownloadRunReport?
}

/// What replaying unfinished work did.
public struct ReplayReport: Sendable, Equatable {
    public var sent = 0
    public var finished = 0
    public var deferredResolved = 0
    public var revoked: [String] = []
    /// Items that failed again: each keeps its error and its next attempt; the others went on.
    public var failed: [String] = []
    /// The server could not be reached; the rest waits for the next command.
    public var offline = false

    public init(sent: Int = 0, finished: Int = 0, deferredResolved: Int = 0, revoked: [String] = [], failed: [String] = [], offline: Bool = false) {
        self.sent = sent
        self.finished = finished
        self.deferredResolved = deferredResolved
        self.revoked = revoked
        self.failed = failed
        self.offline = offline
    }

    /// True when replay moved anything on or found anything wrong.
    public var isEmpty: Bool { sent + finished + deferredResolved == 0 && revoked.isEmpty && failed.isEmpty }
}

/// What a restore did: the transactions it brought back, and one line per transaction it refused.
struct RestoreReport: Sendable {
    var restored: [PaymentRecord] = []
    /// Why each refused transaction was left out (its receipt did not verify, say).
    var refused: [String] = []
}

/// How far delivering a purchase goes right now.
enum Delivery {
    /// Download and install the content, then finish.
    case now
    /// Queue the content; the purchase waits in `delivering` and finishes once it is installed.
    case queue
    /// Queue the content and finish at once (the reader downloads later).
    case finishNow
}

/// The payment queue: every purchase is saved before it is sent, its receipt is saved before it is
/// delivered, and whatever a crash or a lost connection interrupted is replayed, item by item.
struct PaymentQueue {
    let client: KioskClient
    var database: ClientDatabase { client.database }
    var receipts: ReceiptCheck { ReceiptCheck(database: database) }

    // MARK: Buying

    /// Buys a product: commits a `purchasing` row first, then sends it. A book already owned on
    /// this device is not sent at all: nothing is charged, and its content is reinstalled if missing.
    func buy(productId: String, quantity: Int, method: PaymentMethod, delivery: Delivery) async throws -> PurchaseResult {
        guard try paymentsEnabled() else { throw ClientError.paymentsDisabled }
        let product = try await catalogProduct(productId)
        guard quantity == 1 || product.kind == .consumable else {
            throw ClientError.invalidRequest("only credit packs can be bought in a quantity; \(productId) is a \(product.kind.rawValue)")
        }
        if product.kind == .nonConsumable, let owned = try database.owningPayment(productId: productId) {
            return try await alreadyOwned(owned, delivery: delivery)
        }
        let record = try database.beginPurchase(productId: productId, kind: product.kind, quantity: quantity, method: method.rawValue)
        return try await send(record, delivery: delivery, whileTheReaderWaits: true)
    }

    /// Spends credits on a product with a credit price.
    func redeem(productId: String, delivery: Delivery) async throws -> PurchaseResult {
        let product = try await catalogProduct(productId)
        guard product.creditPrice != nil else {
            throw ClientError.invalidRequest("\(productId) cannot be bought with credits; buy it with `kiosk buy \(productId)`")
        }
        if let owned = try database.owningPayment(productId: productId) {
            return try await alreadyOwned(owned, delivery: delivery)
        }
        let record = try database.beginPurchase(productId: productId, kind: product.kind, quantity: 1, method: "credits")
        return try await send(record, delivery: delivery, whileTheReaderWaits: true)
    }

    /// Nothing to charge: make sure the content is (or will be) in the library.
    private func alreadyOwned(_ owned: PaymentRecord, delivery: Delivery) async throws -> PurchaseResult {
        _ = try await client.checkLibrary(only: [owned.productId])
        if let receipt = owned.receipt, let product = try await deliverableProduct(owned.productId), let content = product.content {
            try database.enqueueDownload(productId: owned.productId, content: content, receipt: receipt, transactionId: owned.transactionId)
        }
        var result = PurchaseResult(record: owned, alreadyOwned: true)
        if delivery == .now {
            result.downloads = try await client.downloadQueue().run(only: [owned.productId], waitForOthers: true)
        }
        return result
    }

    /// Sends a `purchasing` row with its idempotency key and stores whatever the server decided.
    /// - Parameter whileTheReaderWaits: the purchase was just made and the reader sees its answer.
    ///   A store that will not take it now (429, rate limited, after the short waits ``StoreAPI``
    ///   makes itself) charged nothing: the purchase fails in the reader's hands rather than stay
    ///   saved and be sent later behind their back — a reader told "try again" who does would pay
    ///   twice. A purchase replayed from an earlier run was promised to be sent, so it waits instead.
    func send(_ record: PaymentRecord, delivery: Delivery, whileTheReaderWaits: Bool = false) async throws -> PurchaseResult {
        guard let id = record.id else { throw IllegalTransition(subject: record.subject, current: nil, target: "sent") }
        let response: PaymentResponse
        do {
            let api = try await authorizedAPI()
            let key = record.idempotencyKey ?? ""
            if record.paymentMethod == "credits" {
                response = try await api.redeem(RedemptionRequest(productId: record.productId, idempotencyKey: key))
            } else {
                let method = PaymentMethod(rawValue: record.paymentMethod) ?? .approve
                response = try await api.pay(PaymentRequest(productId: record.productId, quantity: record.quantity, paymentMethod: method, idempotencyKey: key))
            }
        } catch let error as ClientError where error.isUnreachable {
            return PurchaseResult(record: record, savedOffline: true)
        } catch let ClientError.serverError(url, 429, code, message) where whileTheReaderWaits {
            _ = try settled(id) { try database.recordRefusal(id, as: .failed, transactionId: nil, reason: message) }
            throw ClientError.serverError(url: url, status: 429, code: code, message: message)
        } catch let ClientError.serverError(_, status, code, message) where Self.isRefusal(status) {
            // The server refused this purchase for good (declined, unknown product, not enough credits).
            let failed = try settled(id) { try database.recordRefusal(id, as: .failed, transactionId: nil, reason: message) }
            if code == "payment_declined" || code == "insufficient_credits" {
                return PurchaseResult(record: failed)
            }
            throw ClientError.serverError(url: try client.server(), status: status, code: code, message: message)
        }
        client.configuration.crashPoint?(.afterCharge)
        var stored = try await store(response.transaction, for: record)
        if stored.state == .purchased {
            client.configuration.crashPoint?(.afterReceipt)
        }
        var result = PurchaseResult(record: stored, credits: response.credits, alreadyOwned: response.owned ?? false)
        if stored.state == .purchased {
            (stored, result.downloads) = try await deliver(stored, delivery)
            result.record = stored
        }
        return result
    }

    /// A 4xx that ``RetryRule`` does not call transient is the store's final answer: sending the
    /// same request again cannot help. A 401 is not: it refuses this device's account token, not
    /// the purchase, which stays saved (it may have been charged) until the account is sorted out.
    static func isRefusal(_ status: Int) -> Bool {
        (400..<500).contains(status) && !RetryRule.isTransient(status: status) && status != 401
    }

    /// Records the server's answer; a receipt is verified and committed with the state `purchased`.
    private func store(_ transaction: StoreTransaction, for record: PaymentRecord) async throws -> PaymentRecord {
        guard let id = record.id else { return record }
        switch transaction.status {
        case .purchased:
            return try await saveReceipt(transaction, for: record)
        case .revoked where transaction.signedTransaction != nil:
            // Charged while its answer was lost, then refunded: keep the receipt and show the
            // refund, rather than call it declined.
            let saved = try await saveReceipt(transaction, for: record)
            let reason = transaction.revocationReason ?? "revoked by the store"
            return try database.markRevoked(transactionId: transaction.transactionId, at: transaction.revocationDate ?? Date(), reason: reason)
                ?? database.payment(id) ?? saved
        case .deferred:
            if record.state == .deferred { return record }
            return try settled(id) { try database.recordDeferred(id, transactionId: transaction.transactionId, message: transaction.message) }
        case .cancelled:
            return try settled(id) { try database.recordRefusal(id, as: .cancelled, transactionId: transaction.transactionId, reason: nil) }
        case .declined, .revoked:
            return try settled(id) {
                try database.recordRefusal(id, as: .failed, transactionId: transaction.transactionId, reason: transaction.message ?? "declined")
            }
        }
    }

    /// Verifies the signed transaction against the store's keys and commits it with the row.
    private func saveReceipt(_ transaction: StoreTransaction, for record: PaymentRecord) async throws -> PaymentRecord {
        guard let id = record.id else { return record }
        guard let receipt = transaction.signedTransaction else {
            throw ClientError.receiptRejected(transactionId: transaction.transactionId, reason: "the server sent no signed transaction")
        }
        let accountId = try database.account()?.id
        let api = try storeAPI()
        let claims = try await receipts.verify(receipt, accountId: accountId, fetchKeys: { try await api.jwks() })
        guard claims.transactionId == transaction.transactionId, claims.productId == record.productId else {
            throw ClientError.receiptRejected(transactionId: transaction.transactionId, reason: "it is for another transaction or product")
        }
        return try settled(id) {
            try database.recordReceipt(id, transactionId: claims.transactionId, originalTransactionId: claims.originalTransactionId, receipt: receipt)
        }
    }

    // MARK: Delivering

    /// Delivers a purchased or restored transaction and finishes it once delivered.
    ///
    /// A book or an issue has its download queued and waits in `delivering` until it is
    /// installed, unless the reader asked to download later: then it finishes now and the
    /// download stays queued. Credits have nothing to download; a subscription queues the issues
    /// it covers. Delivery never depends on an earlier sync: a product missing from the cached
    /// catalog is looked up by syncing it.
    func deliver(_ record: PaymentRecord, _ delivery: Delivery) async throws -> (PaymentRecord, DownloadRunReport?) {
        guard let id = record.id else { return (record, nil) }
        switch record.kind {
        case .consumable:
            return (try await finish(record), nil)
        case .subscription:
            _ = try await deliverableProduct(record.productId)
            _ = try await client.subscriptionIssues().queueCoveredIssues()
            return (try await finish(record), nil)
        case .nonConsumable:
            guard let receipt = record.receipt else { return (record, nil) }
            guard let product = try await deliverableProduct(record.productId) else {
                throw ClientError.invalidRequest("\(record.productId) is no longer in the store's catalog, so its content cannot be downloaded; the receipt is kept")
            }
            guard let content = product.content else { return (try await finish(record), nil) }
            try database.enqueueDownload(productId: record.productId, content: content, receipt: receipt, transactionId: record.transactionId)
            if delivery == .finishNow { return (try await finish(record), nil) }
            var current = try settled(id) { try database.markDelivering(id) }
            // Already installed (by a restore, or an earlier purchase of the same content): done.
            if try deliveryIsOver(current) { return (try await finish(current), nil) }
            guard delivery == .now else { return (current, nil) }
            let report = try await client.downloadQueue().run(only: [record.productId], waitForOthers: true)
            if try database.download(record.productId)?.state == .installed {
                current = try await finish(current)
            }
            return (current, report)
        }
    }

    /// Finishes every `delivering` transaction whose delivery is over.
    func finishDelivered() async throws -> Int {
        var finished = 0
        for record in try database.unfinishedPayments() where record.state == .delivering {
            guard try deliveryIsOver(record) else { continue }
            if try await finish(record).state == .finished { finished += 1 }
        }
        return finished
    }

    /// A delivery is over when its content is installed, or was cancelled by the reader (who can
    /// download it again with `kiosk buy`, which charges nothing), or there is nothing to download.
    private func deliveryIsOver(_ record: PaymentRecord) throws -> Bool {
        guard let download = try database.download(record.productId) else { return true }
        return download.state == .installed || download.state == .cancelled
    }

    /// Reports delivery to the server; offline, the row stays as it is and replay finishes it later.
    func finish(_ record: PaymentRecord) async throws -> PaymentRecord {
        guard let id = record.id, let transactionId = record.transactionId else { return record }
        do {
            _ = try await authorizedAPI().finish(transactionId: transactionId)
        } catch let error as ClientError where error.isUnreachable {
            return record
        }
        return try settled(id) { try database.markFinished(id) }
    }

    // MARK: Replay and restore

    /// Moves every unfinished item on, each on its own: one that fails keeps its error and its next
    /// attempt and never stops the others. Revocations the store made are applied first.
    func replay(now: Date = Date()) async -> ReplayReport {
        var report = ReplayReport()
        let unfinished: [PaymentRecord]
        do {
            unfinished = try database.unfinishedPayments()
        } catch {
            report.failed.append("\(error)")
            return report
        }
        var serverTransactions: [String: StoreTransaction]?
        if (try? database.account()) != nil {
            do {
                let all = try await authorizedAPI().allTransactions()
                serverTransactions = Dictionary(all.map { ($0.transactionId, $0) }, uniquingKeysWith: { $1 })
                report.revoked = try await applyRevocations(all)
            } catch let error as ClientError where error.isUnreachable {
                report.offline = true
                return report
            } catch {
                client.logger.warning("could not read the account's transactions", metadata: ["error": "\(error)"])
            }
        }
        for record in unfinished where (record.nextAttemptAt ?? .distantPast) <= now {
            guard let id = record.id, let current = try? database.payment(id), current.state == record.state else { continue }
            do {
                switch current.state {
                case .purchasing:
                    let result = try await send(current, delivery: .queue)
                    if result.savedOffline { report.offline = true; return report }
                    report.sent += 1
                case .purchased, .restored:
                    let (delivered, _) = try await deliver(current, .queue)
                    if delivered.state == .finished { report.finished += 1 }
                case .delivering:
                    if try deliveryIsOver(current), try await finish(current).state == .finished {
                        report.finished += 1
                    }
                case .deferred:
                    guard let transactionId = current.transactionId, let answer = serverTransactions?[transactionId], answer.status != .deferred else { continue }
                    let stored = try await store(answer, for: current)
                    if stored.state == .purchased { _ = try await deliver(stored, .queue) }
                    report.deferredResolved += 1
                default:
                    continue
                }
            } catch let error as ClientError where error.isUnreachable {
                report.offline = true
                return report
            } catch {
                let attempts = current.attempts + 1
                let retryAt = now.addingTimeInterval(client.configuration.backoff.delay(afterAttempts: attempts, retryAfter: nil))
                try? database.recordPaymentFailure(id, message: "\(error)", retryAt: retryAt)
                client.logger.warning("unfinished transaction failed again", metadata: ["transaction": "\(current.subject)", "error": "\(error)"])
                report.failed.append(current.productId)
            }
        }
        return report
    }

    /// Marks transactions the store revoked and takes their content out of the library.
    /// - Returns: the products whose purchase was revoked.
    func applyRevocations(_ transactions: [StoreTransaction]) async throws -> [String] {
        var revoked: [String] = []
        for transaction in transactions where transaction.status == .revoked {
            let reason = transaction.revocationReason ?? "revoked by the store"
            guard let record = try database.markRevoked(transactionId: transaction.transactionId, at: transaction.revocationDate ?? Date(), reason: reason) else { continue }
            try client.removeContent(grantedBy: record)
            revoked.append(record.productId)
        }
        return revoked
    }

    /// Saves every book, issue and subscription period the account has that this device does not,
    /// and queues their content. Consumables are never restored. Expired subscriptions are restored
    /// too: the issues published while they were active still belong to the reader.
    ///
    /// Each transaction on its own: one whose receipt does not verify is refused and reported, the
    /// others are restored. A transaction this device already has whose receipt no longer verifies
    /// (its key was retired) takes the one the store hands out now, if that one verifies.
    func restore() async throws -> RestoreReport {
        let api = try await authorizedAPI()
        let all = try await api.allTransactions()
        _ = try await applyRevocations(all)
        let accountId = try database.account()?.id
        let known = try database.knownTransactionIds()
        var report = RestoreReport()
        var keysFetched = false
        for transaction in all where transaction.status == .purchased {
            guard let receipt = transaction.signedTransaction else { continue }
            if known.contains(transaction.transactionId) {
                try await refreshReceipt(transaction.transactionId, to: receipt, accountId: accountId, api: api, keysFetched: &keysFetched)
                continue
            }
            let claims: ReceiptClaims
            do {
                claims = try await receipts.verify(receipt, accountId: accountId, fetchKeys: { try await api.jwks() })
            } catch let error as ClientError where error.isUnreachable {
                throw error
            } catch {
                // Reported by the caller (one line each), not logged a second time here.
                report.refused.append("transaction \(transaction.transactionId) (\(transaction.productId)) was not restored: \(error)")
                continue
            }
            guard claims.kind != .consumable else { continue }
            guard ProductID.isValid(claims.productId) else {
                client.logger.warning("a restored transaction was refused", metadata: ["error": "\(ClientError.unsafeProductID(claims.productId, source: "transaction \(claims.transactionId)"))"])
                continue
            }
            if claims.kind == .nonConsumable, try database.owningPayment(productId: claims.productId) != nil { continue }
            guard let record = try database.recordRestored(claims, receipt: receipt), let id = record.id else { continue }
            do {
                report.restored.append(try await deliver(record, .queue).0)
            } catch let error as ClientError where error.isUnreachable {
                throw error
            } catch {
                try database.recordPaymentFailure(id, message: "\(error)", retryAt: Date())
                report.restored.append(try database.payment(id) ?? record)
            }
        }
        try await requeueOwnedContent()
        return report
    }

    /// Takes the store's receipt for a transaction this device has when the one it holds no longer
    /// verifies and the store's does (the store re-signed it after retiring a key).
    private func refreshReceipt(_ transactionId: String, to receipt: String, accountId: String?, api: StoreAPI, keysFetched: inout Bool) async throws {
        guard let held = try database.payment(transactionId: transactionId)?.receipt, held != receipt else { return }
        if !keysFetched {
            // The keys this device cached may still list the retired one: read them afresh, once.
            try database.setSetting(Setting.Key.jwks, to: String(decoding: try await api.jwks(), as: UTF8.self))
            keysFetched = true
        }
        guard (try? await receipts.verify(held, accountId: accountId, fetchKeys: nil)) == nil,
              let claims = try? await receipts.verify(receipt, accountId: accountId, fetchKeys: nil),
              claims.transactionId == transactionId else { return }
        _ = try database.replaceReceipt(transactionId: transactionId, with: receipt)
    }

    /// Restore also brings back what this device already knows it owns but does not have: a
    /// book or issue whose download the reader cancelled, or which failed for good, bought or
    /// covered by a subscription.
    private func requeueOwnedContent() async throws {
        _ = try await client.subscriptionIssues().queueCoveredIssues(requeueStopped: true)
        let products = Set(try database.payments().filter { $0.kind == .nonConsumable && PaymentState.owning.contains($0.state) }.map(\.productId))
        for id in products.sorted() {
            let download = try database.download(id)
            guard download == nil || download?.state == .cancelled || download?.state == .failed,
                  let owning = try database.owningPayment(productId: id), let receipt = owning.receipt,
                  let content = try await deliverableProduct(id)?.content else { continue }
            try database.enqueueDownload(productId: id, content: content, receipt: receipt, transactionId: owning.transactionId)
        }
    }

    // MARK: Account

    /// The API acting for this home's account, creating the account on first use.
    ///
    /// Creation holds a lock on `account.lock` in the home, so of several processes starting
    /// at once exactly one creates the account and the others use it.
    func authorizedAPI() async throws -> StoreAPI {
        var api = try storeAPI()
        if let account = try database.account() {
            api.token = account.token
            return api
        }
        let lock = try await FileLock.acquire(client.home.root.appendingPathComponent("account.lock"))
        defer { lock.release() }
        if let account = try database.account() {
            api.token = account.token
            return api
        }
        let created = try await api.createAccount()
        api.token = try database.saveAccount(id: created.accountId, token: created.token, replacing: false).token
        return api
    }

    func storeAPI() throws -> StoreAPI {
        try client.storeAPI()
    }

    // MARK: Helpers

    func paymentsEnabled() throws -> Bool {
        try database.setting(Setting.Key.paymentsEnabled) != "off"
    }

    /// A product to buy: from the cached catalog, syncing once when the cache does not have it.
    func catalogProduct(_ id: String) async throws -> Product {
        guard let product = try await deliverableProduct(id) else { throw ClientError.unknownProduct(id) }
        return product
    }

    /// The product from the cache, or from a fresh sync when the cache lacks it; nil when the store has none.
    func deliverableProduct(_ id: String) async throws -> Product? {
        if let product = try database.cachedProduct(id) { return product }
        _ = try await catalogForDelivery()
        return try database.cachedProduct(id)
    }

    /// Syncs the catalog (restore or replay may run before the first sync).
    private func catalogForDelivery() async throws -> SyncReport {
        let report = try await client.catalogSync().sync()
        try client.retargetDownloads(report.changed)
        return report
    }

    /// Runs a transition; when another process already moved the row on (both replayed the same
    /// purchase), carries on with the row as it is now instead of failing.
    private func settled(_ id: Int64, _ transition: () throws -> PaymentRecord) throws -> PaymentRecord {
        do {
            return try transition()
        } catch let error as IllegalTransition {
            guard let current = try database.payment(id) else { throw error }
            client.logger.debug("transition already made elsewhere", metadata: ["detail": "\(error)"])
            return current
        }
    }
}
