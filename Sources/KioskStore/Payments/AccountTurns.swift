/// Payments of one account that decide on what it holds take turns within this process.
///
/// Each such payment is decided on a snapshot of its account and committed only if the account did not
/// move (``Store`` `settle`). Without turns, N concurrent payments of one account all decide on the
/// same snapshot and N − 1 of them decide again, round after round: 32 at once on one account
/// collapsed to a few purchases per second. With turns they queue and each decides once. Other
/// instances still race through the database, where the compare-and-set keeps them correct. A
/// consumable's charge decides on nothing the account holds, so it takes no turn (``Store`` `settle`).
actor AccountTurns {
    private var busy: Set<String> = []
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// Runs `body` when no other payment of `account` in this process is running.
    func run<T: Sendable>(_ account: String, _ body: @Sendable () async throws -> T) async throws -> T {
        await acquire(account)
        do {
            let result = try await body()
            release(account)
            return result
        } catch {
            release(account)
            throw error
        }
    }

    private func acquire(_ account: String) async {
        guard busy.contains(account) else {
            busy.insert(account)
            return
        }
        // The turn is handed over directly by `release`, so `busy` stays set meanwhile.
        await withCheckedContinuation { waiting[account, default: []].append($0) }
    }

    private func release(_ account: String) {
        guard var queue = waiting[account], !queue.isEmpty else {
            busy.remove(account)
            return
        }
        let next = queue.removeFirst()
        waiting[account] = queue.isEmpty ? nil : queue
        next.resume()
    }
}
