import Foundation
import KioskCore
import KioskTransfer
import Logging

// Resume: running what is queued, and waiting for what is due, until a deadline.
extension Flows {
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
            if updateRounds < 3, case let updates = try library.queueUpdates(), !updates.isEmpty {
                result.queued += updates
                step(.queued(updates))
                updateRounds += 1
                continue
            }
            // Saved purchases the store has not answered are waited for too: the store is tried
            // again on the engine's backoff, as a download would be.
            offlineRounds = try unsentForThisStore().isEmpty ? 0 : offlineRounds + 1
            // Signed out, the saved purchases wait for the reader to sign in, not for a clock.
            let next = result.replay.signedOut == nil ? try nextDue(unsentRounds: offlineRounds) : try library.nextAttempt()
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
        let remaining = try library.downloads()
        let stillWaiting = remaining.contains { $0.state == .waiting }
        result.failedEarlier = remaining.filter { $0.state == .failed && !result.downloads.failed.contains($0.productId) }.map(\.productId)
        result.outcome = result.failedEarlier.isEmpty ? result.downloads.outcome : .failed
        // A purchase held for its own store or account waits too: partly done, not done.
        let held = !result.replay.heldForOtherStore.isEmpty || !result.replay.heldForOtherAccount.isEmpty
        if result.outcome == .complete, stillWaiting || result.interruptedWhileWaiting || !result.unsent.isEmpty || held { result.outcome = .pending }
        if !result.replay.refused.isEmpty { result.outcome = .failed }
        // Nothing will send them until the reader signs in again: not work under way, but stopped.
        if result.replay.signedOut != nil, !result.unsent.isEmpty { result.outcome = .failed }
        return result
    }

    /// When the next waiting work is due: a waiting download's retry or an unfinished purchase's
    /// (``Purchases/nextDue(now:unsentRounds:)``); nil when nothing waits on a clock. The
    /// agent's sleep and `resume --wait`'s both end here.
    func nextDue(now: Date = Date(), unsentRounds: Int = 0) throws -> Date? {
        [try library.nextAttempt(), try purchases.nextDue(now: now, unsentRounds: unsentRounds)].compactMap { $0 }.min()
    }

    /// Saved purchases waiting to be sent to the store this device talks to, for its account (one
    /// saved for another store or account waits for that one, not for this one's return).
    func unsentForThisStore() throws -> [PaymentRecord] {
        let here = try purchases.sendsHere()
        return try purchases.unfinished().filter { $0.state == .purchasing && here($0) }
    }

    /// Queues the issues subscriptions cover and what is missing from the library, and (with
    /// `includingUpdates`) puts paused downloads back in the queue and queues the new versions of
    /// installed products. Returns the product IDs newly queued.
    func queueNewContent(includingUpdates: Bool) async throws -> [String] {
        var queued = try await subscriptions.queueCoveredIssues()
        queued += try library.checkLibrary()
        guard includingUpdates else { return queued }
        try library.unpauseAll()
        // A damaged product with a new version is both requeued and updated: one download, named once.
        for id in try library.queueUpdates() where !queued.contains(id) {
            queued.append(id)
        }
        return queued
    }
}
