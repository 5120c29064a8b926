import Foundation
import KioskCore
import KioskTransfer
import Logging

/// What sending a purchase to the store came to.
struct SentPurchase: Sendable {
    /// The purchase as stored after the store's answer.
    var record: PaymentRecord
    /// The account's credit balance after the purchase, when the store said.
    var credits: Int?
    /// The store answered that the account already owned it: nothing was charged.
    var alreadyOwned = false
    /// The store could not be reached: the purchase stays saved and is sent by a later replay.
    var savedOffline = false
    /// The store answered that it failed underneath (a 5xx, after the short waits ``StoreAPI``
    /// makes itself), with its message: the purchase stays saved and is sent again, with its key.
    var storeFailed: String?
    /// The store answered with an Ask to Buy request already waiting for the same product: the
    /// new row was dropped and `record` is the standing request.
    var alreadyPending = false
}

/// What a restore read from the store: the transactions it saved, and one line per transaction it refused.
struct RestoredReceipts: Sendable {
    var restored: [PaymentRecord] = []
    /// Why each refused transaction was left out (its receipt did not verify, say).
    var refused: [String] = []
}

/// Purchases, one of the client's two owners: this device's purchase rows, the conversation
/// with the store about them, their receipts (one check, ``ReceiptCheck``) and when each is next
/// tried (``nextDue(now:unsentRounds:)``, the one retry schedule).
///
/// Every purchase is saved before it is sent, and its receipt is verified and saved before
/// anything else happens; the store is told a purchase was delivered only once it was. It never
/// downloads anything itself: delivering a purchase is ``Flows``'s job, which calls
/// these methods in order.
struct Purchases: Sendable {
    let database: ClientDatabase
    let server: StoreServer
    let http: HTTPClient
    /// Where the account lock lives (the home's root).
    let home: KioskHome
    let configuration: KioskClient.Configuration
    let logger: Logger

    var receipts: ReceiptCheck { ReceiptCheck(database: database) }
    /// This owner's rows; nothing else writes them.
    private var rows: PurchaseRows { PurchaseRows(database: database) }

    // MARK: Buying

    /// Commits a `purchasing` row: from here on the purchase cannot be lost, and it is sent with
    /// its idempotency key until the store answers.
    /// - Throws: ``ClientError/invalidRequest(_:)`` for a quantity the product cannot be bought in.
    func begin(_ product: Product, quantity: Int, method: String, offerCode: String? = nil) throws -> PaymentRecord {
        guard quantity == 1 || product.kind == .consumable else {
            throw ClientError.invalidRequest("only credit packs can be bought in a quantity; \(product.id) is a \(product.kind.rawValue)")
        }
        return try rows.beginPurchase(productId: product.id, kind: product.kind, quantity: quantity, method: method,
                                          storeURL: try server.base(), storeKeys: try cachedKeyIDs(), offerCode: offerCode)
    }

    /// Fetches and keeps the store's keys when this home has none yet (a failure is left for later).
    func learnStoreKeys() async {
        guard (try? database.settings.value(Setting.Key.jwks)) == .some(nil), let api = try? storeAPI(),
              let keys = try? await api.jwks(), !Self.keyIDs(keys).isEmpty else { return }
        try? database.settings.set(Setting.Key.jwks, to: String(decoding: keys, as: UTF8.self))
    }

    /// The `kid`s of the store keys this home last fetched, comma-separated, when they are the keys
    /// of the store this purchase is made for (the one this home talks to and that has answered);
    /// nil otherwise: a store given now that never answered is known by its URL alone.
    private func cachedKeyIDs() throws -> String? {
        guard try database.settings.value(Setting.Key.server) == server.base(), let json = try database.settings.value(Setting.Key.jwks) else { return nil }
        let kids = Self.keyIDs(Data(json.utf8))
        return kids.isEmpty ? nil : kids.sorted().joined(separator: ",")
    }

    /// The `kid`s of a JWKS document.
    static func keyIDs(_ jwks: Data) -> Set<String> {
        let object = try? JSONSerialization.jsonObject(with: jwks) as? [String: Any]
        let keys = object?["keys"] as? [[String: Any]] ?? []
        return Set(keys.compactMap { $0["kid"] as? String })
    }

    /// Refuses to send a saved purchase to another store than the one it was made for. A store at
    /// another address is the same store when it signs with a key the purchase's store had.
    private func checkSameStore(_ record: PaymentRecord, api: StoreAPI) async throws {
        let current = try server.base()
        guard let madeFor = record.storeURL, madeFor != current else { return }
        if let known = record.storeKeys.map({ Set($0.split(separator: ",").map(String.init)) }), !known.isEmpty,
           !Self.keyIDs(try await api.jwks()).isDisjoint(with: known) {
            return
        }
        throw ClientError.otherStore(productId: record.productId, madeFor: madeFor, current: current)
    }

    /// Sends a `purchasing` row with its idempotency key and stores whatever the store decided.
    /// - Parameter whileTheReaderWaits: the purchase was just made and the reader sees its answer.
    ///   A store that will not take it now (429, rate limited, after the short waits ``StoreAPI``
    ///   makes itself) charged nothing: the purchase fails in the reader's hands rather than stay
    ///   saved and be sent later behind their back — a reader told "try again" who does would pay
    ///   twice. A purchase replayed from an earlier run was promised to be sent, so it waits instead.
    func send(_ record: PaymentRecord, whileTheReaderWaits: Bool = false) async throws -> SentPurchase {
        guard let id = record.id else { throw IllegalTransition(subject: record.subject, current: nil, target: "sent") }
        let response: PaymentResponse
        var firstSend = false
        do {
            try await checkSameStore(record, api: storeAPI())
            // Creates the account on first use; the purchase then goes under its own account only.
            var api = try await authorizedAPI()
            let sending = try rows.markSending(id)
            // Cancelled meanwhile by the reader (it had never been sent): nothing to send.
            guard sending.send else { return SentPurchase(record: try rows.payment(id) ?? record) }
            firstSend = sending.first
            api.token = sending.token
            let key = record.idempotencyKey ?? ""
            if record.paymentMethod == "credits" {
                response = try await api.redeem(RedemptionRequest(productId: record.productId, idempotencyKey: key))
            } else {
                let method = PaymentMethod(rawValue: record.paymentMethod) ?? .approve
                response = try await api.pay(PaymentRequest(productId: record.productId, quantity: record.quantity, paymentMethod: method, idempotencyKey: key,
                                                            offerCode: record.offerCode))
            }
        } catch let error as ClientError where error.isUnreachable {
            // A connection that was never made carried no request: still unsent.
            if case .serverUnreachable = error, firstSend { try? rows.unmarkSending(id) }
            return SentPurchase(record: record, savedOffline: true)
        } catch let ClientError.notAStore(url, status, what) {
            // A web page charged nothing: the purchase must not wait to be sent to the right store later.
            let error = ClientError.notAStore(url: url, status: status, what: what)
            _ = try settled(id) { try rows.recordRefusal(id, as: .failed, transactionId: nil, reason: "\(error)") }
            throw error
        } catch let ClientError.serverError(url, 401, code, message) where whileTheReaderWaits && firstSend {
            // The store refused this device's token before anything else (it was signed out
            // elsewhere), so nothing was charged. The purchase fails in the reader's hands: kept,
            // it would be sent once they signed in again, behind their back, after they bought again.
            _ = try settled(id) { try rows.recordRefusal(id, as: .failed, transactionId: nil, reason: message) }
            throw ClientError.serverError(url: url, status: 401, code: code, message: message)
        } catch let ClientError.serverError(url, 429, code, message) where whileTheReaderWaits {
            _ = try settled(id) { try rows.recordRefusal(id, as: .failed, transactionId: nil, reason: message) }
            throw ClientError.serverError(url: url, status: 429, code: code, message: message)
        } catch let ClientError.serverError(_, status, _, message) where whileTheReaderWaits && (500..<600).contains(status) {
            // The store failed underneath (its database, say): whether it charged is not known for
            // sure, so the purchase stays saved and is sent again with its key, never charged twice.
            // It was reported as failed, and a reader who bought again paid twice once the store
            // recovered and both were sent.
            return SentPurchase(record: try rows.payment(id) ?? record, storeFailed: message)
        } catch let ClientError.serverError(_, status, code, message) where Self.isRefusal(status) {
            // The store refused this purchase for good (declined, unknown product, not enough credits).
            let failed = try settled(id) { try rows.recordRefusal(id, as: .failed, transactionId: nil, reason: message) }
            if code == "payment_declined" || code == "insufficient_credits" {
                return SentPurchase(record: failed)
            }
            throw ClientError.serverError(url: try server.base(), status: status, code: code, message: message)
        }
        configuration.crashPoint?(.afterCharge)
        // A re-buy of what the account owns: the store charged nothing, and the row says so.
        let stored = try await store(response.transaction, for: record, notCharged: response.owned == true)
        if stored.state == .purchased {
            configuration.crashPoint?(.afterReceipt)
        }
        return SentPurchase(record: stored, credits: response.credits, alreadyOwned: response.owned ?? false,
                            alreadyPending: stored.id != id && stored.state == .deferred)
    }

    /// A 4xx that ``RetryRule`` does not call transient is the store's final answer: sending the
    /// same request again cannot help. A 401 is not: it refuses this device's account token, not
    /// the purchase, which stays saved (it may have been charged) until the account is sorted out.
    static func isRefusal(_ status: Int) -> Bool {
        (400..<500).contains(status) && !RetryRule.isTransient(status: status) && status != 401
    }

    /// Records the store's answer about a purchase; a receipt is verified and committed with the
    /// state `purchased`.
    func store(_ transaction: StoreTransaction, for record: PaymentRecord, notCharged: Bool = false) async throws -> PaymentRecord {
        guard let id = record.id else { return record }
        switch transaction.status {
        case .purchased:
            // An answer that comes later (an Ask to Buy approved after the product was bought)
            // says by itself that nothing was charged.
            return try await saveReceipt(transaction, for: record, notCharged: notCharged || transaction.paidBy == PaidBy.owned.rawValue)
        case .revoked where transaction.signedTransaction != nil:
            // Charged while its answer was lost, then refunded: keep the receipt and show the
            // refund, rather than call it declined.
            let saved = try await saveReceipt(transaction, for: record)
            let reason = transaction.revocationReason ?? "revoked by the store"
            return try rows.markRevoked(transactionId: transaction.transactionId, at: transaction.revocationDate ?? Date(), reason: reason)
                ?? rows.payment(id) ?? saved
        case .deferred:
            if record.state == .deferred { return record }
            // The store keeps one pending request per product and answers a second ask with it.
            if let standing = try rows.payment(transactionId: transaction.transactionId), standing.id != id {
                return try rows.dropDuplicateRequest(id, standing: transaction.transactionId)
            }
            return try settled(id) { try rows.recordDeferred(id, transactionId: transaction.transactionId, message: transaction.message) }
        case .cancelled:
            return try settled(id) { try rows.recordRefusal(id, as: .cancelled, transactionId: transaction.transactionId, reason: nil) }
        case .declined, .revoked:
            return try settled(id) {
                try rows.recordRefusal(id, as: .failed, transactionId: transaction.transactionId, reason: transaction.message ?? "declined")
            }
        }
    }

    /// Verifies the signed transaction against the store's keys and commits it with the row.
    private func saveReceipt(_ transaction: StoreTransaction, for record: PaymentRecord, notCharged: Bool = false) async throws -> PaymentRecord {
        guard let id = record.id else { return record }
        guard let receipt = transaction.signedTransaction else {
            throw ClientError.receiptRejected(transactionId: transaction.transactionId, reason: "the server sent no signed transaction")
        }
        let api = try storeAPI()
        let claims = try await receipts.verifiedReceipt(receipt, of: ReceiptSubject(transactionId: transaction.transactionId, productId: record.productId),
                                                        keysFrom: api)
        return try settled(id) {
            try rows.recordReceipt(id, transactionId: claims.transactionId, originalTransactionId: claims.originalTransactionId, receipt: receipt, notCharged: notCharged)
        }
    }

    // MARK: Delivery milestones

    /// The purchase waits in `delivering` until its content is installed.
    func markDelivering(_ record: PaymentRecord) throws -> PaymentRecord {
        guard let id = record.id else { return record }
        return try settled(id) { try rows.markDelivering(id) }
    }

    /// Reports delivery to the store; offline, the row stays as it is and a later replay finishes it.
    func finish(_ record: PaymentRecord) async throws -> PaymentRecord {
        guard let id = record.id, let transactionId = record.transactionId else { return record }
        do {
            _ = try await authorizedAPI().finish(transactionId: transactionId)
        } catch let error as ClientError where error.isUnreachable {
            return record
        }
        return try settled(id) { try rows.markFinished(id) }
    }

    // MARK: Reading

    /// The purchase that makes this device own `productId` (a book, an issue, a subscription
    /// period; never credits), if any.
    func owning(_ productId: String) throws -> PaymentRecord? {
        try rows.owningPayment(productId: productId)
    }

    /// A purchase as stored now.
    func record(_ id: Int64) throws -> PaymentRecord? {
        try rows.payment(id)
    }

    /// Every purchase of this device, newest first.
    func all() throws -> [PaymentRecord] {
        try rows.payments()
    }

    /// The purchases not yet finished (to send, to deliver, or waiting for an answer), oldest first.
    func unfinished() throws -> [PaymentRecord] {
        try rows.unfinishedPayments()
    }

    /// Cancels the purchase of `productId` saved on this device and never sent to a store.
    /// - Throws: ``ClientError/invalidRequest(_:)`` when there is none, or when it was sent and its
    ///   answer is still awaited (it may have been charged).
    func cancelUnsent(_ productId: String) throws -> PaymentRecord {
        let waiting = try rows.unsentPurchases(productId: productId)
        // The one never sent, if any: one that was sent may have been charged.
        guard let record = waiting.first(where: { $0.sentAt == nil }) ?? waiting.first, let id = record.id else {
            throw ClientError.invalidRequest("no purchase of \(productId) waits to be sent on this device; kiosk transactions lists them")
        }
        return try rows.cancelUnsent(id)
    }

    /// The purchases saved for `account` and not answered yet become due at once: the device is
    /// back on that account (signed in again, or linked), so they are sent now.
    func makeUnansweredDue(account: String) throws {
        try rows.makeUnansweredDue(account: account)
    }

    /// This device's Ask to Buy of `productId` still waiting for its answer, if any.
    func pendingRequest(_ productId: String) throws -> PaymentRecord? {
        try rows.pendingRequest(productId: productId)
    }

    /// The store's billing grace windows of the account's subscriptions, by subscription product;
    /// nil when the store cannot be asked now (then only the receipts' periods count).
    func graceWindows() async -> [String: [GraceWindow]]? {
        guard let list = try? await authorizedAPI().subscriptions() else { return nil }
        return Dictionary(list.subscriptions.map { ($0.productId, $0.graceWindows ?? []) }) { $0 + $1 }
    }

    /// Checks the receipt a purchase row holds, as when it was saved; when it no longer verifies
    /// (altered, another account's, another transaction's), the purchase fails with the reason and
    /// the failed row is returned. Nil when it verifies. An unreachable store (needed only for keys
    /// this device has not cached) is thrown: the purchase waits.
    func refuseUnverifiedReceipt(of record: PaymentRecord) async throws -> PaymentRecord? {
        guard let receipt = record.receipt, let id = record.id else { return nil }
        do {
            _ = try await receipts.verifiedReceipt(receipt, of: ReceiptSubject(transactionId: record.transactionId, productId: record.productId),
                                                   keysFrom: try? storeAPI())
            return nil
        } catch let error as ClientError where error.isUnreachable {
            throw error
        } catch {
            logger.warning("a purchase's receipt does not verify; nothing is delivered on it", metadata: ["transaction": "\(record.subject)", "error": "\(error)"])
            // One already finished (delivered, its receipt altered since) stays as it is: nothing
            // more is delivered on it, and the transaction list reports its receipt. Failing it is
            // no move its state allows, and throwing stopped a whole restore at the first such row.
            guard PaymentTransition.receiptRefused.from.contains(record.state) else { return record }
            return try rows.recordReceiptRefused(id, reason: "its receipt does not verify on this device: \(error); nothing was delivered")
        }
    }

    /// Keeps why delivering a purchase failed; it is due again at `retryAt`.
    func keepDeliveryError(_ record: PaymentRecord, _ error: any Error, retryAt: Date) throws {
        guard let id = record.id else { return }
        try rows.recordPaymentFailure(id, message: "\(error)", retryAt: retryAt)
    }

    // MARK: When to try again (the one retry schedule of purchases)

    /// Whether an unfinished purchase is due to be moved on at `now`: never tried, or its backoff
    /// has run out.
    func isDue(_ record: PaymentRecord, at now: Date) -> Bool {
        (record.nextAttemptAt ?? .distantPast) <= now
    }

    /// When the engine's backoff next lets a purchase be tried, after `attempts` failed tries.
    func retryDate(afterAttempts attempts: Int, from now: Date) -> Date {
        now.addingTimeInterval(configuration.backoff.delay(afterAttempts: attempts, retryAfter: nil))
    }

    /// When the unfinished purchases are next due, nil when none waits on a clock:
    /// - one whose try failed, when its backoff runs out;
    /// - one saved but not yet sent to this store: now, or after `unsentRounds` rounds in a row
    ///   that could not send it, when the backoff after that many runs out;
    /// - one received and not yet delivered: now.
    ///
    /// An Ask to Buy waiting for its answer is due on no clock (the answer comes with the
    /// account's changes, which wake the agent and which every replay reads), and neither is a
    /// purchase saved for another store or another account (it waits for that one).
    func nextDue(now: Date = Date(), unsentRounds: Int = 0) throws -> Date? {
        let here = try sendsHere()
        return try rows.unfinishedPayments().compactMap { record -> Date? in
            switch record.state {
            case .deferred: return nil
            case .purchasing:
                guard here(record) else { return nil }
                if let next = record.nextAttemptAt { return next }
                return unsentRounds > 0 ? retryDate(afterAttempts: unsentRounds, from: now) : now
            default: return record.nextAttemptAt ?? now
            }
        }.min()
    }

    /// Whether a saved purchase can be sent from this home as it is now: it was made for the store
    /// this home talks to and for the account it acts for. The others wait for their own, and are
    /// not waited for here.
    func sendsHere() throws -> (PaymentRecord) -> Bool {
        let store = try? server.base()
        let account = try database.account.current()?.id
        return { record in (record.storeURL == nil || record.storeURL == store) && record.belongs(to: account) }
    }

    /// Keeps why sending a purchase failed because this device was signed out of its account, and
    /// when to try again: not logged as a failure, the reader is told once (``ReplayReport/signedOut``).
    func recordSignedOut(_ record: PaymentRecord, now: Date = Date()) {
        guard let id = record.id else { return }
        let retryAt = retryDate(afterAttempts: record.attempts + 1, from: now)
        try? rows.recordPaymentFailure(id, message: "this device was signed out of its account; it is sent once this device signs in to that account again (kiosk login)", retryAt: retryAt)
    }

    /// Keeps why moving a purchase on failed, and when to try again (the engine's backoff).
    func recordFailure(_ record: PaymentRecord, _ error: any Error, now: Date = Date()) {
        guard let id = record.id else { return }
        let retryAt = retryDate(afterAttempts: record.attempts + 1, from: now)
        try? rows.recordPaymentFailure(id, message: "\(error)", retryAt: retryAt)
        logger.warning("unfinished transaction failed again", metadata: ["transaction": "\(record.subject)", "error": "\(error)"])
    }

    // MARK: The store's view

    /// Every transaction of the account as the store has it now; nil when this device has no
    /// account yet and `creatingAccount` is false (there is nothing to ask about).
    func storeTransactions(creatingAccount: Bool = false) async throws -> [StoreTransaction]? {
        guard try creatingAccount || database.account.current() != nil else { return nil }
        return try await authorizedAPI().allTransactions()
    }

    /// The account's transactions that changed since replay last applied the store's view (all of
    /// them the first time), and the cursor to save once they are applied; nil without an account.
    func storeChangesSinceReplay() async throws -> (transactions: [StoreTransaction], cursor: String?)? {
        guard try database.account.current() != nil else { return nil }
        let cursor = try database.settings.value(Setting.Key.replayCursor)
        let read = try await authorizedAPI().changes(after: cursor)
        try storeNamed(read.storeTag)
        return (read.transactions, read.cursor)
    }

    // MARK: How the store sells

    /// Notes the tag of `GET /v1/store` a change feed page named (nil from a store too old to name one).
    func storeNamed(_ tag: String?) throws {
        guard let tag else { return }
        if try database.settings.value(Setting.Key.storeTagNamed) != tag { try database.settings.set(Setting.Key.storeTagNamed, to: tag) }
    }

    /// How the store sells (`GET /v1/store`): the kept answer while the store's change feed names
    /// its tag (replay, which runs before `kiosk buy`, read the feed), otherwise asked again with
    /// `If-None-Match` and kept.
    ///
    /// Replaces asking `GET /v1/store` before every purchase: a default `kiosk buy` made two round
    /// trips before it sent the payment (the feed's replay and this), now one.
    func storeDescription() async throws -> StoreDescription {
        let kept = try database.settings.value(Setting.Key.storeDescription)
            .flatMap { try? JSONDecoder.kiosk.decode(KeptStoreDescription.self, from: Data($0.utf8)) }
        if let kept, let tag = kept.tag, try database.settings.value(Setting.Key.storeTagNamed) == tag { return kept.description }
        guard let fresh = try await storeAPI().storeDescription(unlessTagged: kept?.tag) else {
            // 304: still the kept one (a store that names no tag in its feed is asked each time).
            if let kept { return kept.description }
            throw ClientError.badResponse(url: try server.base() + "/v1/store", detail: "304 to a request that named no tag")
        }
        let json = try JSONEncoder.kiosk.encode(KeptStoreDescription(description: fresh.description, tag: fresh.tag))
        try database.settings.set(Setting.Key.storeDescription, to: String(decoding: json, as: UTF8.self))
        return fresh.description
    }

    /// Notes that every change up to `cursor` is applied.
    func replayApplied(upTo cursor: String) throws {
        try database.settings.set(Setting.Key.replayCursor, to: cursor)
    }

    /// Marks the purchases the store revoked; returns the records newly marked, whose content the
    /// caller takes out of the library.
    /// This device's revoked purchases among `transactions` (those the store reports revoked).
    func revokedRecords(_ transactions: [StoreTransaction]) throws -> [PaymentRecord] {
        try transactions.filter { $0.status == .revoked }
            .compactMap { try rows.payment(transactionId: $0.transactionId) }
            .filter { $0.state == .revoked }
    }

    func applyRevocations(_ transactions: [StoreTransaction]) throws -> [PaymentRecord] {
        var revoked: [PaymentRecord] = []
        for transaction in transactions where transaction.status == .revoked {
            let reason = transaction.revocationReason ?? "revoked by the store"
            if let record = try rows.markRevoked(transactionId: transaction.transactionId, at: transaction.revocationDate ?? Date(), reason: reason) {
                revoked.append(record)
            }
        }
        return revoked
    }

    /// Saves every book, issue and subscription period of `transactions` that this device does not
    /// have, as `restored` (to be delivered by the caller). Consumables are never restored. Expired
    /// subscriptions are restored too: the issues published while they were active still belong
    /// to the reader.
    ///
    /// Each transaction on its own: one whose receipt does not verify is refused and reported, the
    /// others are restored. A transaction this device already has whose receipt no longer verifies
    /// (its key was retired) takes the one the store hands out now, if that one verifies.
    func saveRestored(_ transactions: [StoreTransaction]) async throws -> RestoredReceipts {
        let api = try await authorizedAPI()
        let known = try rows.knownTransactionIds()
        var report = RestoredReceipts()
        var keysFetched = false
        for transaction in transactions where transaction.status == .purchased {
            guard let receipt = transaction.signedTransaction else { continue }
            if known.contains(transaction.transactionId) {
                try await refreshReceipt(transaction.transactionId, to: receipt, api: api, keysFetched: &keysFetched)
                continue
            }
            let claims: ReceiptClaims
            do {
                claims = try await receipts.verifiedReceipt(receipt, of: ReceiptSubject(transactionId: transaction.transactionId), keysFrom: api)
            } catch let error as ClientError where error.isUnreachable {
                throw error
            } catch let error as ClientError {
                guard case .unsafeProductID = error else {
                    report.refused.append("transaction \(transaction.transactionId) (\(transaction.productId)) was not restored: \(error)")
                    continue
                }
                logger.warning("a restored transaction was refused", metadata: ["error": "\(error)"])
                continue
            } catch {
                // Reported by the caller (one line each), not logged a second time here.
                report.refused.append("transaction \(transaction.transactionId) (\(transaction.productId)) was not restored: \(error)")
                continue
            }
            guard claims.kind != .consumable else { continue }
            if claims.kind == .nonConsumable, try rows.owningPayment(productId: claims.productId) != nil { continue }
            if let record = try rows.recordRestored(claims, receipt: receipt, paidBy: transaction.paidBy) {
                report.restored.append(record)
            }
        }
        return report
    }

    /// Takes the store's receipt for a transaction this device has when the one it holds no longer
    /// verifies and the store's does (the store re-signed it after retiring a key). The same
    /// receipt is checked against the store's keys when the cached ones refuse it, so a damaged
    /// cached key set heals here.
    private func refreshReceipt(_ transactionId: String, to receipt: String, api: StoreAPI, keysFetched: inout Bool) async throws {
        guard let held = try rows.payment(transactionId: transactionId)?.receipt else { return }
        guard held != receipt else {
            _ = try? await receipts.verifiedReceipt(held, of: ReceiptSubject(transactionId: transactionId), keysFrom: keysFetched ? nil : api)
            return
        }
        if !keysFetched {
            // The keys this device cached may still list the retired one: read them afresh, once.
            try database.settings.set(Setting.Key.jwks, to: String(decoding: try await api.jwks(), as: UTF8.self))
            keysFetched = true
        }
        let subject = ReceiptSubject(transactionId: transactionId)
        guard (try? await receipts.verifiedReceipt(held, of: subject, keysFrom: nil)) == nil,
              (try? await receipts.verifiedReceipt(receipt, of: subject, keysFrom: nil)) != nil else { return }
        _ = try rows.replaceReceipt(transactionId: transactionId, with: receipt)
    }

    // MARK: Account

    /// The API acting for this home's account, creating the account on first use.
    ///
    /// Creation holds a lock on `account.lock` in the home, so of several processes starting
    /// at once exactly one creates the account and the others use it.
    func authorizedAPI() async throws -> StoreAPI {
        var api = try storeAPI()
        if let account = try await accountHere() {
            api.token = account.token
            return api
        }
        let lock = try await FileLock.acquire(home.root.appendingPathComponent("account.lock"))
        defer { lock.release() }
        if let account = try await accountHere() {
            api.token = account.token
            return api
        }
        let created = try await api.createAccount()
        api.token = try database.account.save(id: created.accountId, token: created.token, replacing: false, store: try server.base()).token
        return api
    }

    /// The API with this home's account token, or nil while the home has no account (none is created).
    func existingAccountAPI() async throws -> StoreAPI? {
        guard let account = try await accountHere() else { return nil }
        var api = try storeAPI()
        api.token = account.token
        return api
    }

    /// This home's account, when the store this engine talks to is the account's: its token (for
    /// an account without a sign-in, its only credential) goes to no other store. A store at a
    /// new address is the account's when its key set names the same issuer as the keys cached
    /// from the account's store; the account then follows it there.
    /// - Throws: ``ClientError/invalidRequest(_:)`` naming both stores when the account is another's.
    private func accountHere() async throws -> (id: String, token: String)? {
        guard let account = try database.account.current() else { return nil }
        let here = try server.base()
        guard let store = try database.account.store(), store != here else { return account }
        var known: StoreIdentity?
        if let cached = try database.settings.value(Setting.Key.jwks) {
            known = try? await KioskReceiptPolicy(keySetJSON: Data(cached.utf8)).identity
        }
        var answered: StoreIdentity?
        do {
            answered = try await KioskReceiptPolicy(keySetJSON: try await storeAPI().jwks()).identity
        } catch let error as ClientError where error.isUnreachable {
            // Not known to be another store: what needs the account waits, as it does offline.
            throw error
        } catch {
            answered = nil
        }
        if let known, let answered, known == answered {
            try database.account.moveStore(to: here)
            return account
        }
        throw ClientError.invalidRequest("this home's account belongs to the store at \(store), so its token is not sent to \(here); give --server \(store) (or kiosk config set server \(store)), or run kiosk logout first to start an account at \(here)")
    }

    func storeAPI() throws -> StoreAPI {
        StoreAPI(server: try server.base(), http: http, token: nil, answered: server.answered)
    }

    func paymentsEnabled() throws -> Bool {
        try database.settings.paymentsEnabled()
    }

    /// Runs a transition; when another process already moved the row on (both replayed the same
    /// purchase), carries on with the row as it is now instead of failing.
    func settled(_ id: Int64, _ transition: () throws -> PaymentRecord) throws -> PaymentRecord {
        do {
            return try transition()
        } catch let error as IllegalTransition {
            guard let current = try rows.payment(id) else { throw error }
            logger.debug("transition already made elsewhere", metadata: ["detail": "\(error)"])
            return current
        }
    }
}

/// `GET /v1/store`'s answer as this device keeps it, with its entity tag.
struct KeptStoreDescription: Codable {
    var description: StoreDescription
    var tag: String?
}
