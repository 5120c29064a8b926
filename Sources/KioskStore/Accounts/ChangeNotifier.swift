import Foundation
import Synchronization

/// Wakes the long polls of the account change feed (`GET /v1/transactions?after=&wait=`) waiting
/// in this process when their account changes.
///
/// The store tells it of an account after a write of one of its transactions has committed
/// (``committed(_:)``); on PostgreSQL the ``ChangeFeedService`` also signals what other instances
/// committed (their `NOTIFY`, sent after their commit by ``ChangeBroadcast``). A waiter is registered *before* the poll reads the feed,
/// so a change committed between that read and the wait still wakes it. A waiting poll costs one
/// small object and the closure it wakes (a poll held on the event loop), or a suspended task (one
/// the router answers): no thread, no database connection.
public final class ChangeNotifier: Sendable {
    /// The PostgreSQL channel every instance notifies and listens on; the payload is the account ID.
    static let channel = "kiosk_account_changes"

    private let waiters = Mutex<[String: [ObjectIdentifier: Waiter]]>([:])
    /// Set once the server stops: every poll answers at once from then on.
    private let closed = Atomic<Bool>(false)
    /// PostgreSQL: tells the other instances of what this one committed.
    private let broadcast: ChangeBroadcast?

    init(broadcast: ChangeBroadcast?) {
        self.broadcast = broadcast
    }

    /// A write of the account's transactions has committed: wakes its polls waiting here and, on
    /// PostgreSQL, tells every other instance (``ChangeBroadcast``).
    func committed(_ accountId: String) {
        signal(accountId)
        broadcast?.send(accountId)
    }

    /// The payload of the notice that the catalog changed: no account ID looks like it.
    public static let catalogNotice = "catalog"

    /// The catalog served here changed: every waiting poll answers (with the new catalog's ETag)
    /// and, when `tellOthers`, every other instance hears of it and reloads its own.
    public func catalogChanged(tellOthers: Bool) {
        wakeAll()
        if tellOthers { broadcast?.send(Self.catalogNotice) }
    }

    /// What starts the notice that a device of an account was removed; the account ID follows.
    static let devicesNoticePrefix = "devices:"

    /// A device of the account was removed (the caller forgot its tokens first): wakes its polls
    /// here, which find their device gone, and tells every other instance to do the same.
    func devicesChanged(_ accountId: String) {
        signal(accountId, .devices)
        broadcast?.send(Self.devicesNoticePrefix + accountId)
    }

    /// The account a notice of removed devices names; nil for any other payload.
    static func accountOfDevicesNotice(_ payload: String) -> String? {
        payload.hasPrefix(devicesNoticePrefix) ? String(payload.dropFirst(devicesNoticePrefix.count)) : nil
    }

    /// Wakes every poll of `accountId` waiting in this process.
    /// - Parameter reason: `.devices` when a device of the account was removed (its polls must
    ///   find out at once); otherwise its transactions changed.
    public func signal(_ accountId: String, _ reason: Wake = .transactions) {
        let woken = waiters.withLock { $0.removeValue(forKey: accountId) } ?? [:]
        for waiter in woken.values { waiter.wake(reason) }
    }

    /// Why a waiting poll woke.
    public enum Wake: Sendable {
        /// The account's transactions changed (here, or on another instance): the poll reads again,
        /// and one that finds nothing after its cursor waits out the rest of its wait.
        case transactions
        /// A device of the account was removed, the catalog changed, the server is stopping, the
        /// poll's wait is over or it was cancelled: it answers what it finds.
        case devices, everyone, timeout, cancelled
    }

    /// The server is stopping: wakes every waiting poll, and those that come later do not wait.
    public func close() {
        closed.store(true, ordering: .relaxed)
        wakeAll()
    }

    /// Wakes every waiting poll; each answers what it finds.
    public func wakeAll() {
        let woken = waiters.withLock { all in
            defer { all = [:] }
            return all.values.flatMap(\.values)
        }
        for waiter in woken { waiter.wake(.everyone) }
    }

    /// How many polls are waiting, for the metrics and the tests.
    var waiting: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Registers a waiter for `accountId`; call ``Waiter/wait(upTo:)`` once the feed was read.
    func register(_ accountId: String) -> Waiter {
        let waiter = Waiter(accountId: accountId)
        if closed.load(ordering: .relaxed) {
            waiter.wake(.everyone)
            return waiter
        }
        waiters.withLock { $0[accountId, default: [:]][ObjectIdentifier(waiter)] = waiter }
        return waiter
    }

    /// Unregisters a waiter that will not wait (the feed had something to answer).
    func unregister(_ waiter: Waiter) { remove(waiter) }

    /// Ends a wait held by a closure (``Waiter/whenWoken(_:)``): unregisters it and, unless
    /// something woke it first, wakes it with `reason` (`.timeout`, `.cancelled`).
    public func endWait(_ waiter: Waiter, because reason: Wake) {
        remove(waiter)
        waiter.wake(reason)
    }

    fileprivate func remove(_ waiter: Waiter) {
        waiters.withLock { all in
            all[waiter.accountId]?[ObjectIdentifier(waiter)] = nil
            if all[waiter.accountId]?.isEmpty == true { all[waiter.accountId] = nil }
        }
    }

    /// One waiting poll: a task suspended in ``wait(upTo:in:)`` (a poll the router answers), or a
    /// closure given to ``whenWoken(_:)`` (a poll held on the event loop, ``BytesResponder``),
    /// which costs no task while it waits.
    public final class Waiter: Sendable {
        let accountId: String
        private struct State {
            var woken: Wake?
            var onWake: (@Sendable (Wake) -> Void)?
        }
        private let state = Mutex(State())

        fileprivate init(accountId: String) { self.accountId = accountId }

        /// The first wake counts; whoever waits hears it once.
        fileprivate func wake(_ reason: Wake) {
            let (onWake, first) = state.withLock { state -> ((@Sendable (Wake) -> Void)?, Wake) in
                if state.woken == nil { state.woken = reason }
                defer { state.onWake = nil }
                return (state.onWake, state.woken ?? reason)
            }
            onWake?(first)
        }

        /// Calls `onWake` once, with why it woke: when the account changes (at once if it changed
        /// since ``ChangeNotifier/register(_:)``), or the owner ends the wait
        /// (``ChangeNotifier/endWait(_:because:)``: its time is up, its connection closed). The
        /// waiter is still registered when `onWake` runs for a change; end it either way.
        public func whenWoken(_ onWake: @escaping @Sendable (Wake) -> Void) {
            let now = state.withLock { state -> Wake? in
                if let woken = state.woken { return woken }
                state.onWake = onWake
                return nil
            }
            if let now { onWake(now) }
        }

        /// Returns when the account changes (at once if it changed since ``register(_:)``), when
        /// `timeout` passes, or when the calling task is cancelled; unregisters either way.
        /// - Returns: why it woke.
        @discardableResult
        func wait(upTo timeout: Duration, in notifier: ChangeNotifier) async -> Wake {
            let timer = Task { [self] in
                try? await Task.sleep(for: timeout)
                wake(.timeout)
            }
            let reason = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Wake, Never>) in
                    whenWoken { continuation.resume(returning: $0) }
                }
            } onCancel: {
                wake(.cancelled)
            }
            timer.cancel()
            notifier.remove(self)
            return reason
        }
    }
}
