import Foundation
import KioskCore
import KioskTransfer
import Logging

/// How far delivering a purchase goes right now.
enum DeliveryMode: Sendable {
    /// Download and install the content, then finish.
    case now
    /// Queue the content; the purchase waits in `delivering` and finishes once it is installed.
    case queue
    /// Queue the content and finish at once (the reader downloads later).
    case finishNow
}

/// The one path from a paid purchase to the library: receipt saved → content queued → downloaded,
/// verified and installed → purchase finished on the store.
///
/// The payment queue and the download queue never call each other; this coordinator calls each
/// in turn. `buy`, `redeem`, `restore`, replay, `resume` and (later) a background agent all
/// deliver through ``deliver(_:_:)`` and ``runDownloads(only:progress:)``, so a rule of delivery
/// (the re-sync after the store refused an outdated version, finishing what was delivered) holds
/// on every path or on none.
struct DeliveryCoordinator: Sendable {
    let database: ClientDatabase
    let catalog: CatalogSync
    let payments: PaymentQueue
    let downloads: DownloadQueue
    let subscriptions: SubscriptionIssues
    let logger: Logger

    // MARK: Buying

    /// Buys a product and delivers it as `mode` says. A book already owned on this device is not
    /// sent at all: nothing is charged, and its content is reinstalled if missing.
    func buy(_ productId: String, quantity: Int, method: String, mode: DeliveryMode) async throws -> PurchaseResult {
        if method == "credits" {
            let product = try await catalogProduct(productId)
            guard product.creditPrice != nil else {
                throw ClientError.invalidRequest("\(productId) cannot be bought with credits; buy it with `kiosk buy \(productId)`")
            }
            if let owned = try database.owningPayment(productId: productId) {
                return try await alreadyOwned(owned, mode: mode)
            }
            guard product.forSale != false else { throw ClientError.offSale(productId) }
            return try await purchase(product, quantity: 1, method: method, mode: mode)
        }
        guard try payments.paymentsEnabled() else { throw ClientError.paymentsDisabled }
        let product = try await catalogProduct(productId)
        // Replay (which runs before any command) already asked the store about it: still waiting.
        if method == PaymentMethod.defer.rawValue, let pending = try database.pendingRequest(productId: productId) {
            return PurchaseResult(record: pending, alreadyPending: true)
        }
        if product.kind == .nonConsumable, let owned = try database.owningPayment(productId: productId) {
            return try await alreadyOwned(owned, mode: mode)
        }
        guard product.forSale != false else { throw ClientError.offSale(productId) }
        return try await purchase(product, quantity: quantity, method: method, mode: mode)
    }

    /// Commits the purchase, sends it, and delivers what the store granted.
    private func purchase(_ product: Product, quantity: Int, method: String, mode: DeliveryMode) async throws -> PurchaseResult {
        let record = try payments.begin(product, quantity: quantity, method: method)
        let sent = try await payments.send(record, whileTheReaderWaits: true)
        var result = PurchaseResult(record: sent.record, credits: sent.credits, savedOffline: sent.savedOffline, alreadyOwned: sent.alreadyOwned,
                                    alreadyPending: sent.alreadyPending)
        if sent.record.state == .purchased {
            (result.record, result.downloads) = try await deliver(sent.record, mode)
        }
        return try settle(result)
    }

    /// Nothing to charge: make sure the content is (or will be) in the library.
    private func alreadyOwned(_ owned: PaymentRecord, mode: DeliveryMode) async throws -> PurchaseResult {
        _ = try downloads.checkLibrary(only: [owned.productId])
        if let receipt = owned.receipt, let content = try await deliverableProduct(owned.productId)?.content {
            try database.enqueueDownload(productId: owned.productId, content: content, receipt: receipt, transactionId: owned.transactionId)
        }
        var result = PurchaseResult(record: owned, alreadyOwned: true)
        if mode == .now {
            result.downloads = try await runDownloads(only: [owned.productId])
        }
        return try settle(result)
    }

    /// Decides what a purchase came to, so no caller has to re-derive it from the states.
    private func settle(_ result: PurchaseResult) throws -> PurchaseResult {
        var result = result
        let record = result.record
        let contentState = record.kind == .nonConsumable ? try database.download(record.productId)?.state : nil
        if result.savedOffline {
            result.outcome = .pending
        } else if record.state == .failed {
            result.outcome = .failed
        } else if let downloads = result.downloads {
            result.outcome = downloads.outcome
            if result.outcome == .complete, record.kind == .nonConsumable, contentState != .installed { result.outcome = .pending }
        } else {
            result.outcome = .complete
        }
        let owning = [PaymentState.purchased, .delivering, .finished, .restored].contains(record.state)
        result.contentQueued = owning && result.downloads == nil && record.kind == .nonConsumable && record.state == .finished && contentState != .installed
        return result
    }

    // MARK: Delivering

    /// Delivers a purchased or restored transaction and finishes it once delivered.
    ///
    /// A book or an issue has its download queued and waits in `delivering` until it is
    /// installed, unless the reader asked to download later: then it finishes now and the
    /// download stays queued. Credits have nothing to download; a subscription queues the issues
    /// it covers. Delivery never depends on an earlier sync: a product missing from the cached
    /// catalog is looked up by syncing it.
    func deliver(_ record: PaymentRecord, _ mode: DeliveryMode) async throws -> (PaymentRecord, DownloadRunReport?) {
        switch record.kind {
        case .consumable:
            return (try await payments.finish(record), nil)
        case .subscription:
            // The issues it covers now are its content: with `.now` they are downloaded before
            // the purchase returns, as a book's are.
            _ = try await deliverableProduct(record.productId)
            let issues = try await subscriptions.queueCoveredIssues()
            let finished = try await payments.finish(record)
            guard mode == .now, !issues.isEmpty else { return (finished, nil) }
            return (finished, try await runDownloads(only: Set(issues)))
        case .nonConsumable:
            guard let receipt = record.receipt else { return (record, nil) }
            guard let product = try await deliverableProduct(record.productId) else {
                throw ClientError.invalidRequest("\(record.productId) is no longer in the store's catalog, so its content cannot be downloaded; the receipt is kept")
            }
            guard let content = product.content else { return (try await payments.finish(record), nil) }
            try database.enqueueDownload(productId: record.productId, content: content, receipt: receipt, transactionId: record.transactionId)
            if mode == .finishNow { return (try await payments.finish(record), nil) }
            var current = try payments.markDelivering(record)
            // Already installed (by a restore, or an earlier purchase of the same content): done.
            if try deliveryIsOver(current) { return (try await payments.finish(current), nil) }
            guard mode == .now else { return (current, nil) }
            let report = try await runDownloads(only: [record.productId])
            if let latest = try current.id.flatMap(database.payment), latest.state == .finished {
                current = latest
            }
            return (current, report)
        }
    }

    /// Runs due downloads (all, or only `products`), then finishes the purchases they delivered.
    /// A download the store refused as outdated (412: a catalog reload replaced its version) is
    /// brought up to the version the catalog now names and fetched at once. A download another
    /// process is running is waited for, not fetched twice.
    func runDownloads(only products: Set<String>? = nil, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        var report = try await downloads.run(only: products, waitForOthers: true, progress: progress)
        if !report.outdated.isEmpty, try await queueCurrentVersions(of: report.outdated) {
            let again = try await downloads.run(only: Set(report.outdated), waitForOthers: true, progress: progress)
            report.absorb(again)
        }
        if !report.installed.isEmpty || !report.installedElsewhere.isEmpty || !report.cancelled.isEmpty {
            _ = try? await finishDelivered()
        }
        return report
    }

    /// Syncs the catalog and queues the version it now names for each of `products` whose download
    /// the store refused as outdated. Returns true when any was queued.
    private func queueCurrentVersions(of products: [String]) async throws -> Bool {
        _ = try await refreshCatalog()
        return try products.contains { try database.download($0)?.state == .queued }
    }

    /// Finishes every `delivering` transaction whose delivery is over.
    func finishDelivered() async throws -> Int {
        var finished = 0
        for record in try database.unfinishedPayments() where record.state == .delivering {
            guard try deliveryIsOver(record) else { continue }
            if try await payments.finish(record).state == .finished { finished += 1 }
        }
        return finished
    }

    /// A delivery is over when its content is installed, or was cancelled by the reader (who can
    /// download it again with `kiosk buy`, which charges nothing), or there is nothing to download.
    private func deliveryIsOver(_ record: PaymentRecord) throws -> Bool {
        guard let download = try database.download(record.productId) else { return true }
        return download.state == .installed || download.state == .cancelled
    }

    // MARK: Replay and restore

    /// Moves every unfinished purchase on, each on its own: one that fails keeps its error and
    /// its next attempt and never stops the others. Revocations the store made are applied first.
    /// Then every transaction of the account this device does not hold — bought on another
    /// device, renewed or granted by the store — has its receipt saved and is delivered (queued),
    /// through the same path a purchase made here takes. An unreachable store is not an error:
    /// the work waits.
    func replay(now: Date = Date()) async -> ReplayReport {
        var report = ReplayReport()
        let unfinished: [PaymentRecord]
        do {
            unfinished = try database.unfinishedPayments()
        } catch {
            report.failed.append("\(error)")
            return report
        }
        // Only what changed on the store since the last replay applied it (the change feed's
        // `after=` cursor). The cursor moves on only once every change read here is stored, so a
        // change that could not be is read again.
        var changes: [StoreTransaction] = []
        var appliedCursor: String?
        do {
            if let read = try await payments.storeChangesSinceReplay() {
                changes = read.transactions
                let revoked = try await applyRevocations(changes)
                report.revoked = revoked.map(\.productId)
                report.revokedCredits = revoked.filter { $0.kind == .consumable }.map(\.productId)
                appliedCursor = read.cursor
            }
        } catch let error as ClientError where error.isUnreachable {
            report.offline = true
            return report
        } catch {
            logger.warning("could not read the account's transactions", metadata: ["error": "\(error)"])
        }
        let answers = Dictionary(changes.map { ($0.transactionId, $0) }, uniquingKeysWith: { $1 })
        let answered = Set(unfinished.filter { $0.state == .deferred }.compactMap { record in
            record.transactionId.flatMap { answers[$0] }.flatMap { $0.status == .deferred ? nil : $0.transactionId }
        })
        var stored = Set<String>()
        for record in unfinished where payments.isDue(record, at: now) {
            guard let id = record.id, let current = try? database.payment(id), current.state == record.state else { continue }
            do {
                switch current.state {
                case .purchasing:
                    let sent = try await payments.send(current)
                    if sent.savedOffline { report.offline = true; return report }
                    if sent.record.state == .purchased { _ = try await deliver(sent.record, .queue) }
                    if sent.record.state == .failed || sent.record.state == .cancelled {
                        report.refused.append(current.productId)
                    } else {
                        report.sent += 1
                    }
                case .purchased, .restored:
                    let (delivered, _) = try await deliver(current, .queue)
                    if delivered.state == .finished { report.finished += 1 }
                case .delivering:
                    if try deliveryIsOver(current), try await payments.finish(current).state == .finished {
                        report.finished += 1
                    }
                case .deferred:
                    guard let transactionId = current.transactionId, let answer = answers[transactionId], answer.status != .deferred else { continue }
                    let answered = try await payments.store(answer, for: current)
                    stored.insert(transactionId)
                    if answered.state == .purchased { _ = try await deliver(answered, .queue) }
                    if answered.state == .failed || answered.state == .cancelled {
                        report.refused.append(current.productId)
                        report.declined.append(current.productId)
                    }
                    report.deferredResolved += 1
                default:
                    continue
                }
            } catch let error as ClientError where error.isUnreachable {
                report.offline = true
                return report
            } catch is CancellationError {
                return report
            } catch let error as ClientError where error.isOtherStore {
                // Not a failure: it waits, untouched, for its own store (or the reader's cancel).
                report.heldForOtherStore.append("\(error)")
            } catch {
                payments.recordFailure(current, error, now: now)
                report.failed.append(current.productId)
            }
        }
        // Last, so a purchase of this device whose answer was lost is matched to its own row
        // (sent again above) rather than taken in as a second one.
        do {
            let taken = try await takeIn(changes)
            report.arrived = taken.delivered
            report.notTakenIn = taken.refused
            report.withdrawn = taken.withdrawn
        } catch let error as ClientError where error.isUnreachable {
            report.offline = true
            return report
        } catch is CancellationError {
            return report
        } catch {
            logger.warning("could not take in the account's new transactions", metadata: ["error": "\(error)"])
            return report
        }
        if let appliedCursor, answered.isSubset(of: stored) { try? payments.replayApplied(upTo: appliedCursor) }
        return report
    }

    /// Saves the receipt of every transaction in `transactions` this device does not hold (a
    /// purchase made elsewhere, a renewal, a grant) and delivers each as `.queue`. A delivery that
    /// fails keeps its error and is tried again by replay, as any purchase's; a receipt that does
    /// not verify is left out with one line in `refused`.
    private func takeIn(_ transactions: [StoreTransaction]) async throws -> (delivered: [PaymentRecord], refused: [String], withdrawn: [String]) {
        guard transactions.contains(where: { $0.status == .purchased }) else { return ([], [], []) }
        let saved = try await payments.saveRestored(transactions)
        var delivered: [PaymentRecord] = []
        var withdrawn: [String] = []
        for record in saved.restored {
            do {
                delivered.append(try await deliver(record, .queue).0)
            } catch let error as ClientError where error.isUnreachable {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if let id = record.id { try database.recordPaymentFailure(id, message: "\(error)", retryAt: Date()) }
                delivered.append(try record.id.flatMap(database.payment) ?? record)
                if record.kind == .nonConsumable, try database.cachedProduct(record.productId) == nil {
                    withdrawn.append(record.productId)
                }
            }
        }
        return (delivered, saved.refused, withdrawn)
    }

    /// Marks what the store revoked and takes its content out of the library.
    /// - Returns: the purchases newly revoked.
    private func applyRevocations(_ transactions: [StoreTransaction]) async throws -> [PaymentRecord] {
        let revoked = try payments.applyRevocations(transactions)
        for record in revoked {
            // An issue a standing subscription period still covers keeps its download and bytes.
            try await downloads.removeContent(grantedBy: record, coveredBy: { try await subscriptions.coveringReceipt(for: $0) })
        }
        return revoked
    }

    /// Brings back every book, issue and subscription period of the account, queues (and, with
    /// `mode` `.now`, downloads) what they entitle, and finishes them.
    func restore(mode: DeliveryMode) async throws -> RestoreResult {
        let all = try await payments.storeTransactions(creatingAccount: true) ?? []
        _ = try await applyRevocations(all)
        let taken = try await takeIn(all)
        var result = RestoreResult(restored: taken.delivered, refused: taken.refused, withdrawn: taken.withdrawn)
        try await requeueOwnedContent()
        _ = try downloads.checkLibrary()
        if mode == .now {
            let report = try await runDownloads()
            result.downloads = report
            result.restored = try result.restored.map { try $0.id.flatMap(database.payment) ?? $0 }
        }
        result.outcome = !result.refused.isEmpty ? .failed : (result.downloads?.outcome ?? .complete)
        return result
    }

    /// Restore also brings back what this device already knows it owns but does not have: a
    /// book or issue whose download the reader cancelled, or which failed for good, bought or
    /// covered by a subscription.
    private func requeueOwnedContent() async throws {
        _ = try await subscriptions.queueCoveredIssues(requeueStopped: true)
        let products = Set(try database.payments().filter { $0.kind == .nonConsumable && PaymentState.owning.contains($0.state) }.map(\.productId))
        for id in products.sorted() {
            let download = try database.download(id)
            guard download == nil || download?.state == .cancelled || download?.state == .failed,
                  let owning = try database.owningPayment(productId: id), let receipt = owning.receipt,
                  let content = try await deliverableProduct(id)?.content else { continue }
            try database.enqueueDownload(productId: id, content: content, receipt: receipt, transactionId: owning.transactionId)
        }
    }

    // MARK: Resuming

    /// Everything `kiosk resume` does: queues what is owed (covered issues, updates of installed
    /// products, paused downloads, library folders gone missing), runs the downloads, and with a
    /// `deadline` sleeps until the next waiting download is due and goes on, replaying unfinished
    /// purchases between rounds, until nothing is due before the deadline. Cancelling the calling
    /// Task stops it at once, transfers keeping their bytes.
    /// - Parameter step: told of each round as it ends, and of each wait as it begins.
    func resume(until deadline: Date?, progress: @escaping @Sendable (DownloadProgress) -> Void, step: (ResumeStep) -> Void) async throws -> ResumeReport {
        var result = ResumeReport()
        result.replay = await replay()
        result.queued = try await queueNewContent(includingUpdates: true)
        if !result.queued.isEmpty { step(.queued(result.queued)) }
        var updateRounds = 0
        var offlineRounds = 0
        while true {
            let round = try await runDownloads(progress: progress)
            result.downloads.absorb(round)
            step(.ran(round))
            if !round.interrupted.isEmpty { break }
            // A download that was already running when the catalog changed installed the version
            // it began with: bring it up to date now rather than at the next resume. (Only
            // updates: a pause made meanwhile from another process stands.)
            if updateRounds < 3, case let updates = try downloads.queueUpdates(), !updates.isEmpty {
                result.queued += updates
                step(.queued(updates))
                updateRounds += 1
                continue
            }
            // Saved purchases the store has not answered are waited for too: the store is tried
            // again on the engine's backoff, as a download would be.
            offlineRounds = try unsentForThisStore().isEmpty ? 0 : offlineRounds + 1
            let next = try nextDue(unsentRounds: offlineRounds)
            guard let deadline, let next, next < deadline else { break }
            step(.waiting(until: next))
            do {
                try await Task.sleep(for: .seconds(max(0.05, next.timeIntervalSinceNow)))
            } catch {
                result.interruptedWhileWaiting = true
                break
            }
            result.replay.absorb(await replay())
        }
        result.unsent = try unsentForThisStore().map(\.productId)
        let remaining = try database.downloads()
        let stillWaiting = remaining.contains { $0.state == .waiting }
        result.failedEarlier = remaining.filter { $0.state == .failed && !result.downloads.failed.contains($0.productId) }.map(\.productId)
        result.outcome = result.failedEarlier.isEmpty ? result.downloads.outcome : .failed
        if result.outcome == .complete, stillWaiting || result.interruptedWhileWaiting || !result.unsent.isEmpty { result.outcome = .pending }
        if !result.replay.refused.isEmpty { result.outcome = .failed }
        return result
    }

    /// When the next waiting work is due: a waiting download's retry or an unfinished purchase's
    /// (``PaymentQueue/nextDue(now:unsentRounds:)``); nil when nothing waits on a clock. The
    /// agent's sleep and `resume --wait`'s both end here.
    func nextDue(now: Date = Date(), unsentRounds: Int = 0) throws -> Date? {
        [try database.nextDownloadAttempt(), try payments.nextDue(now: now, unsentRounds: unsentRounds)].compactMap { $0 }.min()
    }

    /// Saved purchases waiting to be sent to the store this device talks to (one saved for another
    /// store waits for that store, not for this one's return).
    private func unsentForThisStore() throws -> [PaymentRecord] {
        let current = try? payments.server.base()
        return try database.unfinishedPayments().filter { $0.state == .purchasing && ($0.storeURL == nil || $0.storeURL == current) }
    }

    /// Queues the issues subscriptions cover and what is missing from the library, and (with
    /// `includingUpdates`) puts paused downloads back in the queue and queues the new versions of
    /// installed products. Returns the product IDs newly queued.
    func queueNewContent(includingUpdates: Bool) async throws -> [String] {
        var queued = try await subscriptions.queueCoveredIssues()
        queued += try downloads.checkLibrary()
        guard includingUpdates else { return queued }
        try database.unpauseAll()
        // A damaged product with a new version is both requeued and updated: one download, named once.
        for id in try downloads.queueUpdates() where !queued.contains(id) {
            queued.append(id)
        }
        return queued
    }

    // MARK: Catalog

    /// Syncs the catalog cache; downloads not yet started or stopped half-way switch to the
    /// version the catalog now names, rather than finish one the store has replaced.
    func refreshCatalog() async throws -> SyncReport {
        let report = try await catalog.sync()
        try downloads.retarget(report.changed)
        // The store's keys are its identity: a purchase saved while it is down names them, so it
        // is sent to this store wherever it moves, and to no other (``PaymentQueue/begin``).
        await payments.learnStoreKeys()
        return report
    }

    /// Queues `productId` with an App Store signed transaction as its proof (``PurchaseProofKind/appStore``):
    /// the store checks it as it checks a receipt, and the download resumes and retries as any other.
    /// - Returns: false when that version is installed, queued or running already.
    func queueAppStoreDownload(_ productId: String, signedTransaction: String) async throws -> Bool {
        guard let content = try await deliverableProduct(productId)?.content else { throw ClientError.unknownProduct(productId) }
        return try database.enqueueDownload(productId: productId, content: content, receipt: signedTransaction, transactionId: nil, proofKind: .appStore)
    }

    /// A product to buy: from the cached catalog, syncing once when the cache does not have it.
    private func catalogProduct(_ id: String) async throws -> Product {
        guard let product = try await deliverableProduct(id) else { throw ClientError.unknownProduct(id) }
        return product
    }

    /// The product from the cache, or from a fresh sync when the cache lacks it (restore or replay
    /// may run before the first sync); nil when the store has none.
    private func deliverableProduct(_ id: String) async throws -> Product? {
        if let product = try database.cachedProduct(id) { return product }
        _ = try await refreshCatalog()
        return try database.cachedProduct(id)
    }
}
