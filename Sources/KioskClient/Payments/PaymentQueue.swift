import Foundation
import GRDB
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
}

/// What replaying unfinished work did.
public struct ReplayReport: Sendable, Equatable {
    public var sent = 0
    public var finished = 0
    public var deferredResolved = 0

    public init(sent: Int = 0, finished: Int = 0, deferredResolved: Int = 0) {
        self.sent = sent
        self.finished = finished
        self.deferredResolved = deferredResolved
    }
}

/// The payment queue: every purchase is saved before it is sent, its receipt is saved before it is
/// delivered, and whatever a crash or a lost connection interrupted is replayed by the next command.
struct PaymentQueue {
    let database: ClientDatabase
    let http: HTTPClient
    let server: String
    let logger: Logger
    let downloads: DownloadQueue

    var receipts: ReceiptCheck { ReceiptCheck(database: database) }

    // MARK: Buying

    /// Buys a product: commits a `purchasing` row first, then sends it.
    func buy(productId: String, quantity: Int, method: PaymentMethod, downloadNow: Bool) async throws -> PurchaseResult {
        guard try await paymentsEnabled() else { throw ClientError.paymentsDisabled }
        let product = try await cachedProduct(productId)
        guard quantity == 1 || product.kind == .consumable else {
            throw ClientError.invalidRequest("only credit packs can be bought in a quantity; \(productId) is a \(product.kind.rawValue)")
        }
        let now = Date()
        let pending = PaymentRecord(
            id: nil, idempotencyKey: UUID().uuidString.lowercased(), productId: productId, kind: product.kind,
            quantity: quantity, paymentMethod: method.rawValue, state: .purchasing, transactionId: nil,
            originalTransactionId: nil, receipt: nil, lastError: nil, createdAt: now, updatedAt: now)
        let record = try await database.pool.write { try pending.inserted($0) }
        return try await send(record, downloadNow: downloadNow)
    }

    /// Spends credits on a product with a credit price.
    func redeem(productId: String, downloadNow: Bool) async throws -> PurchaseResult {
        let product = try await cachedProduct(productId)
        guard product.creditPrice != nil else {
            throw ClientError.invalidRequest("\(productId) cannot be bought with credits; buy it with `kiosk buy \(productId)`")
        }
        let now = Date()
        let pending = PaymentRecord(
            id: nil, idempotencyKey: UUID().uuidString.lowercased(), productId: productId, kind: product.kind,
            quantity: 1, paymentMethod: "credits", state: .purchasing, transactionId: nil,
            originalTransactionId: nil, receipt: nil, lastError: nil, createdAt: now, updatedAt: now)
        let record = try await database.pool.write { try pending.inserted($0) }
        return try await send(record, downloadNow: downloadNow)
    }

    /// Sends a `purchasing` row with its idempotency key and stores whatever the server decided.
    private func send(_ record: PaymentRecord, downloadNow: Bool) async throws -> PurchaseResult {
        let response: PaymentResponse
        do {
            let api = try await authorizedAPI()
            if record.paymentMethod == "credits" {
                response = try await api.redeem(RedemptionRequest(productId: record.productId, idempotencyKey: record.idempotencyKey ?? ""))
            } else {
                let method = PaymentMethod(rawValue: record.paymentMethod) ?? .approve
                response = try await api.pay(PaymentRequest(
                    productId: record.productId, quantity: record.quantity, paymentMethod: method,
                    idempotencyKey: record.idempotencyKey ?? ""))
            }
        } catch let error as ClientError where error.isUnreachable {
            return PurchaseResult(record: record, credits: nil, savedOffline: true)
        } catch let ClientError.serverError(_, status, code, message) where (400..<500).contains(status) && status != 401 && status != 408 && status != 429 {
            // The server refused this purchase for good (declined, unknown product, not enough credits).
            let failed = try await update(record) { $0.state = .failed; $0.lastError = message }
            if code == "payment_declined" || code == "insufficient_credits" {
                return PurchaseResult(record: failed, credits: nil)
            }
            throw ClientError.serverError(url: server, status: status, code: code, message: message)
        }
        CrashPoint.afterCharge.reach()
        var stored = try await store(response.transaction, for: record)
        if stored.state == .purchased {
            CrashPoint.afterReceipt.reach()
            stored = try await deliver(stored, downloadNow: downloadNow)
        }
        return PurchaseResult(record: stored, credits: response.credits)
    }

    /// Records the server's answer; a receipt is verified and committed with the state `purchased`.
    private func store(_ transaction: StoreTransaction, for record: PaymentRecord) async throws -> PaymentRecord {
        switch transaction.status {
        case .purchased:
            guard let receipt = transaction.signedTransaction else {
                throw ClientError.receiptRejected(transactionId: transaction.transactionId, reason: "the server sent no signed transaction")
            }
            let accountId = try await database.pool.read { try Setting.value(Setting.Key.accountID, in: $0) }
            let claims = try await receipts.verify(receipt, accountId: accountId, fetchKeys: { try await api().jwks() })
            guard claims.transactionId == transaction.transactionId, claims.productId == record.productId else {
                throw ClientError.receiptRejected(transactionId: transaction.transactionId, reason: "it is for another transaction or product")
            }
            return try await update(record) {
                $0.state = .purchased
                $0.transactionId = claims.transactionId
                $0.originalTransactionId = claims.originalTransactionId
                $0.receipt = receipt
                $0.lastError = nil
            }
        case .deferred:
            return try await update(record) { $0.state = .deferred; $0.transactionId = transaction.transactionId; $0.lastError = transaction.message }
        case .cancelled:
            return try await update(record) { $0.state = .cancelled; $0.transactionId = transaction.transactionId; $0.lastError = nil }
        case .declined, .revoked:
            return try await update(record) { $0.state = .failed; $0.transactionId = transaction.transactionId; $0.lastError = transaction.message ?? "declined" }
        }
    }

    /// Delivers a purchased or restored transaction and finishes it once delivered.
    ///
    /// A book or an issue has its download queued and waits in `delivering` until it is
    /// installed, unless the reader asked to download later: then it finishes now and the
    /// download stays queued. Credits have nothing to download; a subscription queues the issues
    /// it covers.
    func deliver(_ record: PaymentRecord, downloadNow: Bool) async throws -> PaymentRecord {
        switch record.kind {
        case .nonConsumable:
            if let receipt = record.receipt, let product = try? await cachedProduct(record.productId) {
                try await downloads.enqueue(product, receipt: receipt)
            }
            if downloadNow {
                return try await update(record) { $0.state = .delivering }
            }
        case .subscription:
            _ = try await SubscriptionIssues(database: database, downloads: downloads).queueCoveredIssues()
        case .consumable:
            break
        }
        return try await finish(record)
    }

    /// Finishes every `delivering` transaction whose content is now installed.
    func finishDelivered() async throws -> Int {
        let delivered = try await database.pool.read { db in
            try PaymentRecord
                .filter(PaymentRecord.Columns.state == PaymentState.delivering.rawValue)
                .filter(sql: "productId IN (SELECT productId FROM download WHERE state = 'installed')")
                .fetchAll(db)
        }
        var finished = 0
        for record in delivered where try await finish(record).state == .finished {
            finished += 1
        }
        return finished
    }

    /// Reports delivery to the server; offline, the row stays as it is and the next command finishes it.
    func finish(_ record: PaymentRecord) async throws -> PaymentRecord {
        guard let transactionId = record.transactionId else { return record }
        do {
            _ = try await authorizedAPI().finish(transactionId: transactionId)
        } catch let error as ClientError where error.isUnreachable {
            return record
        }
        return try await update(record) { $0.state = .finished }
    }

    // MARK: Replay and restore

    /// Sends again what was never answered, delivers what was paid for, and asks about Ask to Buy.
    func replay() async throws -> ReplayReport {
        var report = ReplayReport()
        let pending = try await database.pool.read { db in
            try PaymentRecord
                .filter([PaymentState.purchasing, .purchased, .restored, .deferred].map(\.rawValue).contains(PaymentRecord.Columns.state))
                .order(PaymentRecord.Columns.id)
                .fetchAll(db)
        }
        report.finished += try await finishDelivered()
        guard !pending.isEmpty else { return report }
        var serverTransactions: [String: StoreTransaction]?
        for record in pending {
            switch record.state {
            case .purchasing:
                let result = try await send(record, downloadNow: true)
                if result.savedOffline { return report }
                report.sent += 1
            case .purchased, .restored:
                let delivered = try await deliver(record, downloadNow: true)
                if delivered.state == .finished { report.finished += 1 }
            case .deferred:
                if serverTransactions == nil {
                    let all = try await authorizedAPI().allTransactions()
                    serverTransactions = Dictionary(all.map { ($0.transactionId, $0) }, uniquingKeysWith: { $1 })
                }
                guard let id = record.transactionId, let current = serverTransactions?[id], current.status != .deferred else { continue }
                let stored = try await store(current, for: record)
                if stored.state == .purchased { _ = try await deliver(stored, downloadNow: true) }
                report.deferredResolved += 1
            default:
                continue
            }
        }
        return report
    }

    /// Fetches every book, issue and subscription the account owns that this device does not have yet.
    /// Consumables are never restored.
    func restore() async throws -> [PaymentRecord] {
        let api = try await authorizedAPI()
        let accountId = try await database.pool.read { try Setting.value(Setting.Key.accountID, in: $0) }
        let known = Set(try await database.pool.read { db in try PaymentRecord.fetchAll(db).compactMap(\.transactionId) })
        var restored: [PaymentRecord] = []
        var restoredProducts = Set<String>()
        for transaction in try await api.allTransactions() where transaction.status == .purchased && !known.contains(transaction.transactionId) {
            guard let receipt = transaction.signedTransaction else { continue }
            let claims = try await receipts.verify(receipt, accountId: accountId, fetchKeys: { try await api.jwks() })
            guard claims.kind != .consumable, !restoredProducts.contains(claims.productId) else { continue }
            if claims.kind == .subscription, let expires = claims.expires, expires < Date() { continue }
            restoredProducts.insert(claims.productId)
            let now = Date()
            let found = PaymentRecord(
                id: nil, idempotencyKey: nil, productId: claims.productId, kind: claims.kind, quantity: claims.quantity,
                paymentMethod: "restore", state: .restored, transactionId: claims.transactionId,
                originalTransactionId: claims.originalTransactionId, receipt: receipt, lastError: nil,
                createdAt: now, updatedAt: now)
            let record = try await database.pool.write { try found.inserted($0) }
            restored.append(try await deliver(record, downloadNow: true))
        }
        return restored
    }

    // MARK: Account

    /// The API acting for this device's account, creating the account on first use.
    func authorizedAPI() async throws -> StoreAPI {
        var api = api()
        if let token = try await database.pool.read({ try Setting.value(Setting.Key.accountToken, in: $0) }) {
            api.token = token
            return api
        }
        let created = try await api.createAccount()
        try await database.pool.write { db in
            try Setting.set(Setting.Key.accountID, to: created.accountId, in: db)
            try Setting.set(Setting.Key.accountToken, to: created.token, in: db)
        }
        api.token = created.token
        return api
    }

    func api() -> StoreAPI {
        StoreAPI(server: server, http: http, token: nil)
    }

    // MARK: Helpers

    func paymentsEnabled() async throws -> Bool {
        try await database.pool.read { try Setting.value(Setting.Key.paymentsEnabled, in: $0) } != "off"
    }

    func cachedProduct(_ id: String) async throws -> Product {
        let row = try await database.pool.read { try CachedProduct.fetchOne($0, key: id) }
        guard let row else { throw ClientError.unknownProduct(id) }
        return try JSONDecoder.kiosk.decode(Product.self, from: row.json)
    }

    /// Changes one row in its own SQLite transaction.
    private func update(_ record: PaymentRecord, _ change: @Sendable (inout PaymentRecord) -> Void) async throws -> PaymentRecord {
        try await database.pool.write { db in
            var updated = record
            change(&updated)
            updated.updatedAt = Date()
            try updated.update(db)
            return updated
        }
    }
}
