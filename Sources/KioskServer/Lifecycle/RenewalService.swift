import KioskStore
import Logging
import ServiceLifecycle

/// The renewal worker: every `interval`, takes the subscriptions that are due one step each
/// (``Subscriptions/renewDue(limit:stopping:)``). Runs on every instance; the database's claims make each step
/// happen once.
struct RenewalService: Service {
    let store: Store
    let interval: Duration
    let logger: Logger

    func run() async throws {
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
            do {
                // A backlog is worked through in rounds; a shutdown stops it between two rounds
                // (what a round claimed and did not commit lapses with its lease).
                let steps = try await store.subscriptions.renewDue(stopping: { Task.isShuttingDownGracefully })
                if steps > 0 { logger.debug("renewal steps committed", metadata: ["steps": "\(steps)"]) }
            } catch {
                // The next pass tries again: nothing of a step that failed was written.
                logger.warning("renewal pass failed; trying again at the next", metadata: ["error": "\(Store.describe(error))"])
            }
        }
    }
}
