import Foundation
import KioskCore
import KioskTransfer
import Logging

// Replay: moving unfinished purchases on and taking in what the account got elsewhere.
extension Flows {
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
            unfinished = try purchases.unfinished()
        } catch {
            report.failed.append("\(error)")
            return report
        }
        guard let (changes, appliedCursor) = await changesSinceReplay(&report) else { return report }
        let answers = Dictionary(changes.map { ($0.transactionId, $0) }, uniquingKeysWith: { $1 })
        let answered = Set(unfinished.filter { $0.state == .deferred }.compactMap { record in
            record.transactionId.flatMap { answers[$0] }.flatMap { $0.status == .deferred ? nil : $0.transactionId }
        })
        var stored = Set<String>()
        for record in unfinished where purchases.isDue(record, at: now) {
            guard let id = record.id, let current = try? purchases.record(id), current.state == record.state else { continue }
            do {
                guard try await moveOn(current, answers: answers, stored: &stored, report: &report) else { return report }
            } catch {
                guard keep(error, of: current, now: now, report: &report) else { return report }
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
        } catch let error as ClientError where error.isSignedOut {
            report.signedOut = try? purchases.database.account.current()?.id
            return report
        } catch {
            logger.warning("could not take in the account's new transactions", metadata: ["error": "\(error)"])
            return report
        }
        if let appliedCursor, answered.isSubset(of: stored) { try? purchases.replayApplied(upTo: appliedCursor) }
        return report
    }

    /// Only what changed on the store since the last replay applied it (the change feed's
    /// `after=` cursor), with its revocations applied, and the cursor to move on to. The cursor
    /// moves on only once every change read here is stored, so a change that could not be is read
    /// again. Nil when the store cannot be reached (the report says so): replay stops there.
    private func changesSinceReplay(_ report: inout ReplayReport) async -> (changes: [StoreTransaction], cursor: String?)? {
        do {
            guard let read = try await purchases.storeChangesSinceReplay() else { return ([], nil) }
            let (revoked, kept) = try await applyRevocations(read.transactions)
            report.revoked = revoked.map(\.productId)
            report.revokedKept = kept
            report.revokedCredits = revoked.filter { $0.kind == .consumable }.map(\.productId)
            report.revokedPeriods = revoked.filter { $0.kind == .subscription }.map(\.productId)
            return (read.transactions, read.cursor)
        } catch let error as ClientError where error.isUnreachable {
            report.offline = true
            return nil
        } catch let error as ClientError where error.isSignedOut {
            // Not a failure to log: the reader is told, and signs in again.
            report.signedOut = try? purchases.database.account.current()?.id
        } catch {
            logger.warning("could not read the account's transactions", metadata: ["error": "\(error)"])
        }
        return ([], nil)
    }

    /// Moves one unfinished purchase on by its state: sent, delivered, finished, or (an Ask to
    /// Buy) answered from the store's changes. False when the store could not be reached.
    private func moveOn(_ current: PaymentRecord, answers: [String: StoreTransaction], stored: inout Set<String>, report: inout ReplayReport) async throws -> Bool {
        switch current.state {
        case .purchasing:
            let sent = try await purchases.send(current)
            if sent.savedOffline { report.offline = true; return false }
            if sent.record.state == .purchased { _ = try await deliver(sent.record, .queue, receiptVerified: true) }
            if sent.record.state == .failed || sent.record.state == .cancelled {
                report.refused.append(current.productId)
            } else {
                report.sent += 1
            }
        case .purchased, .restored:
            let (delivered, _) = try await deliver(current, .queue)
            if delivered.state == .finished { report.finished += 1 }
        case .delivering:
            if try deliveryIsOver(current), try await purchases.finish(current).state == .finished {
                report.finished += 1
            }
        case .deferred:
            guard let transactionId = current.transactionId, let answer = answers[transactionId], answer.status != .deferred else { return true }
            let answered = try await purchases.store(answer, for: current)
            stored.insert(transactionId)
            if answered.state == .purchased { _ = try await deliver(answered, .queue) }
            if answered.state == .failed || answered.state == .cancelled {
                report.refused.append(current.productId)
                report.declined.append(current.productId)
            }
            report.deferredResolved += 1
        default:
            break
        }
        return true
    }

    /// What moving a purchase on failed with, kept with it (each purchase on its own: one that
    /// fails never stops the others). False when replay stops: the store cannot be reached, or
    /// the work was cancelled.
    private func keep(_ error: any Error, of current: PaymentRecord, now: Date, report: inout ReplayReport) -> Bool {
        switch error {
        case let error as ClientError where error.isUnreachable:
            report.offline = true
            return false
        case is CancellationError:
            return false
        case let error as ClientError where error.isOtherStore:
            // Not a failure: it waits, untouched, for its own store (or the reader's cancel).
            report.heldForOtherStore.append("\(error)")
        case let error as ClientError where error.isOtherAccount:
            // Nor is this: it waits, untouched, for its own account (or the reader's cancel).
            report.heldForOtherAccount.append("\(error)")
        case let error as ClientError where error.isSignedOut:
            // It waits for the reader to sign in again, on the backoff (the agent would ask again and again).
            purchases.recordSignedOut(current, now: now)
            report.signedOut = try? purchases.database.account.current()?.id
        default:
            purchases.recordFailure(current, error, now: now)
            report.failed.append(current.productId)
        }
        return true
    }

    /// Saves the receipt of every transaction in `transactions` this device does not hold (a
    /// purchase made elsewhere, a renewal, a grant) and delivers each as `.queue`. A delivery that
    /// fails keeps its error and is tried again by replay, as any purchase's; a receipt that does
    /// not verify is left out with one line in `refused`.
    func takeIn(_ transactions: [StoreTransaction]) async throws -> (delivered: [PaymentRecord], refused: [String], withdrawn: [String]) {
        guard transactions.contains(where: { $0.status == .purchased }) else { return ([], [], []) }
        let saved = try await purchases.saveRestored(transactions)
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
                try purchases.keepDeliveryError(record, error, retryAt: Date())
                delivered.append(try record.id.flatMap(purchases.record) ?? record)
                if record.kind == .nonConsumable, try catalog.cachedProduct(record.productId) == nil {
                    withdrawn.append(record.productId)
                }
            }
        }
        return (delivered, saved.refused, withdrawn)
    }

    /// Marks what the store revoked and takes its content out of the library.
    /// - Returns: the purchases newly revoked, and the products among them whose content stays,
    ///   under another proof that still covers it.
    func applyRevocations(_ transactions: [StoreTransaction]) async throws -> (revoked: [PaymentRecord], kept: [String]) {
        let revoked = try purchases.applyRevocations(transactions)
        // The content of every revoked transaction read, not only of those revoked just now: one
        // this device learnt of another way (its finish answered "revoked", in a race with the
        // refund) or whose removal failed (the change is then read again) is taken out now.
        let standing = try purchases.revokedRecords(transactions)
        var kept: [String] = []
        for record in standing {
            for download in try library.downloads(grantedBy: record) {
                // Another standing purchase of the product, or (for an issue) a standing
                // subscription period covering it, keeps the download, bytes and all, under its proof.
                if let other = try purchases.owning(download.productId), let receipt = other.receipt {
                    try library.represent(download.productId, receipt: receipt, transactionId: other.transactionId)
                    kept.append(download.productId)
                } else if let covering = try await subscriptions.coveringReceipt(for: download.productId) {
                    try library.represent(download.productId, receipt: covering.receipt, transactionId: covering.transactionId)
                    kept.append(download.productId)
                } else {
                    try library.removeContent(download.productId)
                }
            }
        }
        return (revoked, kept)
    }

    /// Brings back every book, issue and subscription period of the account, queues (and, with
    /// `mode` `.now`, downloads) what they entitle, and finishes them.
}
