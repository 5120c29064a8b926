import Foundation
import KioskCore
import Logging
import Synchronization

/// What the background loop of ``KioskClient/run(syncInterval:once:step:)`` is doing, as it happens.
public enum AgentStep: Sendable {
    /// The catalog was synced (a 304 when nothing changed).
    case synced(SyncReport)
    /// Unfinished purchases were moved on, revocations applied, Ask to Buy answers picked up.
    case replayed(ReplayReport)
    /// Content newly owed (covered issues, updates of installed products) was queued.
    case queued([String])
    /// A round of downloads ended.
    case ran(DownloadRunReport)
    /// The keep rules freed these issues' files (``KioskClient/tidy(now:)``); they stay owned.
    case removed([String])
    /// The storage floor freed these issues' files, oldest first, to make room for due downloads; they stay owned.
    case removedForRoom([String])
    /// Automatic downloads wait, for the reason given (``DownloadPolicy``): said when it starts
    /// holding, not at every look; the loop looks again within a minute.
    case deferred(String)
    /// The store cannot be reached (told once per outage); the next try is in `retryIn`, then
    /// more rarely up to 5 s apart (nothing is counted against the downloads). A single round
    /// (`once`) that could not reach it ends with this step and a `retryIn` of zero.
    case offline(retryIn: Duration)
    /// The account changed on the store (a purchase, an approval, a refund…): a round starts now.
    case accountChanged
    /// Nothing is due: the loop sleeps until `until` (the next retry or sync) or a change of the account.
    case sleeping(until: Date)
}

/// The engine on its own: the loop of ``KioskClient/run(syncInterval:once:step:)``.
///
/// It is a loop over the paths the commands take (replay, the flows' downloads,
/// the catalog sync), never a second path. Between rounds it sleeps until the earliest of the
/// next due download retry, the next due purchase replay and the next sync, while a child task
/// long-polls the account's change feed (`GET /v1/transactions?after=&wait=`) and wakes it when
/// the account changes. A store that cannot be reached is probed with a backoff of its own (1 s
/// doubling to ``longestOfflineWait``) and the downloads are not run meanwhile, so an outage
/// costs them no attempts and the store is used within seconds of its return.
struct BackgroundAgent: Sendable {
    let client: KioskClient
    let syncInterval: Duration
    let step: @Sendable (AgentStep) -> Void
    let logger: Logger

    /// Seconds the agent's long poll asks the store to hold it: each poll costs the store CPU, so a
    /// long wait is what lets one instance keep many devices waiting (the store holds at most
    /// 300 s; its nginx location waits 330 s). A change answers it at once, whatever the wait.
    static let feedWait = 280
    /// The longest wait between two probes of a store that cannot be reached.
    static let longestOfflineWait: Duration = .seconds(5)
    /// How often a download policy that holds the downloads is looked at again.
    static let policyLook: Duration = .seconds(30)

    func run(once: Bool) async throws {
        let wakeup = Wakeup()
        let catalogChanged = Flag()
        try await withThrowingTaskGroup(of: Void.self) { group in
            if !once {
                group.addTask { await watchFeed(wake: wakeup, catalogChanged: catalogChanged) }
            }
            defer { group.cancelAll() }
            try await loop(once: once, wakeup: wakeup, catalogChanged: catalogChanged)
        }
    }

    // MARK: The loop

    private func loop(once: Bool, wakeup: Wakeup, catalogChanged: Flag) async throws {
        var nextSync = ContinuousClock.now
        var offlineWait: Duration = .seconds(1)
        var checkLibrary = true
        // The keep rules are applied at the start and after every round that installed something.
        var tidy = true
        var deferred: String?
        while !Task.isCancelled {
            var offline = false
            // The feed said the store serves another catalog (a reload, a publish): sync now.
            if catalogChanged.take() { nextSync = .now }
            if ContinuousClock.now >= nextSync {
                do {
                    let report = try await client.sync()
                    step(.synced(report))
                    nextSync = .now + syncInterval
                    checkLibrary = true
                } catch let error as ClientError where error.isUnreachable {
                    offline = true
                } catch {
                    logger.warning("the catalog could not be synced", metadata: ["error": "\(error)"])
                    nextSync = .now + syncInterval
                }
            }
            if !offline {
                let replayed = await client.replay()
                if !replayed.isEmpty { step(.replayed(replayed)) }
                offline = replayed.offline
            }
            if !offline {
                var queued = try await client.flows.subscriptions.queueCoveredIssues()
                if checkLibrary {
                    queued += try client.library.checkLibrary()
                    checkLibrary = false
                }
                queued += try client.library.queueUpdates()
                if !queued.isEmpty { step(.queued(queued)) }
                // The reader's policy for downloads nobody asked for now (a metered network, a low
                // battery): they wait, bytes kept, and the loop looks again soon.
                if let reason = try client.downloadPolicy().deferral(await client.configuration.deviceConditions.current()) {
                    if deferred != reason { step(.deferred(reason)) }
                    deferred = reason
                    if once { return }
                    _ = await wakeup.wait(upTo: Self.policyLook)
                    continue
                }
                deferred = nil
                // The storage floor: old issues make room first (oldest first, never a pin, a single
                // purchase or a title's newest); what still does not fit waits, saying why.
                let floor = try client.storageFloor()
                let room = try client.library.roomNeeded()
                if room.needed > 0 {
                    let freed = try client.newsstand.makeRoom(for: room.needed, keepingFree: floor)
                    if !freed.isEmpty { step(.removedForRoom(freed)) }
                }
                let round = try await runDownloads(replayingChanges: wakeup, keepingFree: floor)
                if round.bytesReceived > 0 || !(round.installed + round.waiting + round.failed + round.cancelled + round.installedElsewhere).isEmpty { step(.ran(round)) }
                if !round.interrupted.isEmpty || Task.isCancelled { return }
                if tidy || !round.installed.isEmpty {
                    let removed = try client.newsstand.tidy()
                    if !removed.isEmpty { step(.removed(removed)) }
                    tidy = false
                }
                // Every due download met an unreachable store: wait for its return, not for the backoff.
                if !round.waiting.isEmpty, round.installed.isEmpty {
                    offline = await !client.storeIsReachable()
                }
            }
            if once {
                if offline { step(.offline(retryIn: .zero)) }
                return
            }
            if offline {
                // Said once per outage, not at every probe.
                if offlineWait == .seconds(1) { step(.offline(retryIn: offlineWait)) }
                _ = await wakeup.wait(upTo: offlineWait)
                offlineWait = min(offlineWait * 2, Self.longestOfflineWait)
                continue
            }
            offlineWait = .seconds(1)
            let due = try nextDue(syncAt: nextSync)
            step(.sleeping(until: Date().addingTimeInterval(Self.seconds(due - .now))))
            if await wakeup.wait(until: due) { step(.accountChanged) }
        }
    }

    /// Runs the due downloads; a change of the account meanwhile (a refund above all) is replayed
    /// at once rather than after the round, so a revoked purchase's transfer stops at its next
    /// progress write (its download is forgotten) instead of installing first.
    private func runDownloads(replayingChanges wakeup: Wakeup, keepingFree floor: Int64) async throws -> DownloadRunReport {
        try await withThrowingTaskGroup(of: DownloadRunReport?.self) { group in
            group.addTask { try await client.flows.runDownloads(keepingFree: floor) }
            group.addTask {
                while !Task.isCancelled {
                    guard await wakeup.wait(upTo: .seconds(3600)) else { continue }
                    let replayed = await client.replay()
                    if !replayed.isEmpty { step(.replayed(replayed)) }
                }
                return nil
            }
            defer { group.cancelAll() }
            while let finished = try await group.next() {
                if let round = finished { return round }
            }
            return DownloadRunReport()
        }
    }

    /// The earliest of the next sync, the next waiting download's retry and the next purchase's replay.
    private func nextDue(syncAt nextSync: ContinuousClock.Instant) throws -> ContinuousClock.Instant {
        guard let date = try client.flows.nextDue() else { return nextSync }
        return min(nextSync, ContinuousClock.now + .milliseconds(Int64(max(0, date.timeIntervalSinceNow) * 1000)))
    }

    // MARK: The change feed

    /// Long-polls the account's change feed and wakes the loop when it answers anything; the
    /// cursor is kept in the home's settings. An account not yet created is looked for again at
    /// the loop's pace; an unreachable store is tried again after a backoff.
    private func watchFeed(wake: Wakeup, catalogChanged: Flag) async {
        var failures = 0
        // The served catalog the loop was last told of: asked about instead of the cached one
        // until a sync catches up, so a poll does not answer at once again and again meanwhile.
        var announced: String?
        while !Task.isCancelled {
            do {
                guard let api = try await client.purchases.existingAccountAPI() else {
                    try await Task.sleep(for: .seconds(5))
                    continue
                }
                let cursor = try client.database.settings.value(Setting.Key.feedCursor)
                let cached = try client.database.settings.value(Setting.Key.catalogETag)
                let held = announced ?? cached
                let page = try await abandoningOnCancel { try await api.transactions(after: cursor, wait: Self.feedWait, catalog: held) }
                if failures > 0 { wake.signal() }
                failures = 0
                if let next = page.cursor, next != cursor {
                    try client.database.settings.set(Setting.Key.feedCursor, to: next)
                }
                try client.purchases.storeNamed(page.store)
                if let served = page.catalog {
                    let synced = try client.database.settings.value(Setting.Key.catalogETag)
                    if synced.map({ TransactionPage.sameCatalog($0, served) }) == true {
                        announced = nil
                    } else if held.map({ TransactionPage.sameCatalog($0, served) }) != true {
                        announced = served
                        catalogChanged.raise()
                        wake.signal()
                    }
                }
                if !page.transactions.isEmpty { wake.signal() }
            } catch is CancellationError {
                return
            } catch {
                failures += 1
                if failures == 1 { logger.info("the change feed cannot be read; trying again", metadata: ["error": "\(error)"]) }
                let seconds = min(30, 1 << min(failures, 5))
                do { try await Task.sleep(for: .seconds(seconds)) } catch { return }
            }
        }
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        TimeInterval(duration.components.seconds) + TimeInterval(duration.components.attoseconds) / 1e18
    }
}

/// A flag one task raises and another takes down.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func raise() { value.store(true, ordering: .relaxed) }
    /// Whether it was raised since the last take.
    func take() -> Bool { value.exchange(false, ordering: .relaxed) }
}

/// The loop's wake-up: set by the change feed's watcher, waited for with a deadline. A signal
/// given while the loop is busy is kept for its next wait.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var continuation: CheckedContinuation<Bool, Never>?
        /// The wait in progress, and whether its deadline or cancellation already came.
        var waitID = 0
        var ended = false
    }
    private let state = Mutex(State())

    func signal() {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let continuation = state.continuation else {
                state.pending = true
                return nil
            }
            state.continuation = nil
            return continuation
        }
        continuation?.resume(returning: true)
    }

    /// Waits until `deadline` or a wake-up; true for a wake-up.
    func wait(until deadline: ContinuousClock.Instant) async -> Bool {
        await wait(upTo: max(.zero, deadline - .now))
    }

    /// Waits `duration` or until a wake-up (or the task's cancellation); true for a wake-up.
    func wait(upTo duration: Duration) async -> Bool {
        let id = state.withLock { state in
            state.waitID += 1
            state.ended = false
            return state.waitID
        }
        let timer = Task {
            try? await Task.sleep(for: duration)
            end(id)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    if state.ended || Task.isCancelled { return false }
                    state.continuation = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            end(id)
        }
    }

    private func end(_ id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.waitID == id else { return nil }
            state.ended = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: false)
    }
}

/// Runs `work` (a blocking transfer on a thread of its own) and returns its result, or throws
/// `CancellationError` as soon as the calling task is cancelled: the transfer then ends unseen
/// in the background, at the latest when its own timeout passes.
func abandoningOnCancel<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
    let answer = OneAnswer<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            answer.await(continuation)
            Task {
                do {
                    answer.give(.success(try await work()))
                } catch {
                    answer.give(.failure(error))
                }
            }
            if Task.isCancelled { answer.give(.failure(CancellationError())) }
        }
    } onCancel: {
        answer.give(.failure(CancellationError()))
    }
}

/// A continuation resumed by whichever answer comes first; later ones are dropped.
private final class OneAnswer<T: Sendable>: Sendable {
    private let slot = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func await(_ continuation: CheckedContinuation<T, any Error>) {
        slot.withLock { $0 = continuation }
    }

    func give(_ result: Result<T, any Error>) {
        slot.withLock { $0.take() }?.resume(with: result)
    }
}
