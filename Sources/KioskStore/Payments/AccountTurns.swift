import Synchronization

/// Payments of one account that decide on what it holds take turns within this process; the
/// account's credit packs, which decide on nothing it holds, share a turn among themselves.
///
/// A deciding payment is decided on a snapshot of its account and committed only if the account
/// did not move (``Store`` `settle`). Without turns, N concurrent payments of one account all decide
/// on the same snapshot and N − 1 of them decide again, round after round: 32 at once on one
/// account collapsed to a few purchases per second. With turns they queue and each decides once.
/// Other instances still race through the database, where the compare-and-set keeps them correct.
///
/// A credit pack's charge moves the account too, so a stream of them from one account (no rate
/// limit between) undid every snapshot a book purchase of the same account took: it decided 64
/// times and gave up, "the account is busy" (on both engines, 2026-11-28). So packs take a shared
/// turn: any number run at once, as before, unless a deciding payment holds the account or waits
/// for it; then new packs wait, the decider runs once the packs already running have committed,
/// and every pack that waited starts together when it is done, before the next decider. Neither
/// kind can starve the other.
final class AccountTurns: Sendable {
    private typealias Waiter = CheckedContinuation<Void, Never>

    /// One account's turn: who holds it and who waits, in order.
    private struct Turn {
        var sharing = 0
        var deciding = false
        var waitingDeciders: [Waiter] = []
        var waitingSharers: [Waiter] = []

        var isIdle: Bool { sharing == 0 && !deciding && waitingDeciders.isEmpty && waitingSharers.isEmpty }

        /// Takes the turn at once if it is free for this kind.
        mutating func take(shared: Bool) -> Bool {
            if shared {
                guard !deciding, waitingDeciders.isEmpty else { return false }
                sharing += 1
            } else {
                guard !deciding, sharing == 0, waitingDeciders.isEmpty else { return false }
                deciding = true
            }
            return true
        }

        /// Gives the turn up and returns the waiters it passes to (already counted as holding it).
        mutating func give(shared: Bool) -> [Waiter] {
            if shared {
                sharing -= 1
                guard sharing == 0, !waitingDeciders.isEmpty else { return [] }
                deciding = true
                return [waitingDeciders.removeFirst()]
            }
            deciding = false
            if !waitingSharers.isEmpty {
                let admitted = waitingSharers
                waitingSharers = []
                sharing += admitted.count
                return admitted
            }
            guard !waitingDeciders.isEmpty else { return [] }
            deciding = true
            return [waitingDeciders.removeFirst()]
        }
    }

    private let turns = Mutex<[String: Turn]>([:])

    /// Runs `body` in `account`'s turn: alone among the account's payments in this process, or,
    /// when `shared`, alongside the account's other shared ones.
    func run<T: Sendable>(_ account: String, shared: Bool = false, _ body: @Sendable () async throws -> T) async throws -> T {
        await take(account, shared: shared)
        defer { give(account, shared: shared) }
        return try await body()
    }

    private func take(_ account: String, shared: Bool) async {
        let taken = turns.withLock { turns in turns[account, default: Turn()].take(shared: shared) }
        if taken { return }
        await withCheckedContinuation { (waiter: Waiter) in
            // Free since the look above (its holder gave it up): take it now; else wait to be handed it.
            let taken = turns.withLock { turns in
                if turns[account, default: Turn()].take(shared: shared) { return true }
                if shared { turns[account]?.waitingSharers.append(waiter) } else { turns[account]?.waitingDeciders.append(waiter) }
                return false
            }
            if taken { waiter.resume() }
        }
    }

    private func give(_ account: String, shared: Bool) {
        let next = turns.withLock { turns -> [Waiter] in
            guard var turn = turns[account] else { return [] }
            let next = turn.give(shared: shared)
            turns[account] = turn.isIdle ? nil : turn
            return next
        }
        for waiter in next { waiter.resume() }
    }
}
