import Foundation
import KioskCore

extension KioskClient {
    /// Runs the engine on its own until the calling Task is cancelled: retries each waiting
    /// download when it is due (sleeping until then, not polling), syncs the catalog every
    /// `syncInterval` (an unchanged catalog costs one 304), queues and downloads newly published
    /// issues of subscriptions and new versions of installed products, replays unfinished
    /// purchases, and learns of changes to the account (an approval, a refund, a purchase on
    /// another device) within about two seconds through the store's change feed.
    ///
    /// Cancelling the calling Task ends it at once, transfers keeping their bytes (`waiting`, due at
    /// once). The events of ``events`` are published as for any command; `step` is told what the
    /// loop does.
    /// - Parameter once: one round (sync, replay, due downloads), then return.
    public func run(
        syncInterval: Duration = .seconds(300), once: Bool = false, step: @escaping @Sendable (AgentStep) -> Void = { _ in }
    ) async throws {
        try await BackgroundAgent(client: self, syncInterval: syncInterval, step: step, logger: logger).run(once: once)
    }

    /// Whether the store answers at all right now.
    public func storeIsReachable() async -> Bool {
        guard let api = try? purchases.storeAPI() else { return false }
        return await api.isReachable()
    }
}
