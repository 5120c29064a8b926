import KioskStore
import Logging
import ServiceLifecycle

/// The store's periodic clean-up, off the request path: idle rate-limit buckets are forgotten, and
/// archives that a reload replaced are deleted once no resume can still need them.
struct CleanupService: Service {
    let limiter: RateLimiter
    let catalog: CatalogService
    /// Time between two passes.
    var interval: Duration = .seconds(60)

    func run() async throws {
        let interval = self.interval
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                // Shut down (or cancelled) while waiting: nothing is half done.
                return
            }
            await limiter.forgetIdleBuckets()
            await catalog.forgetExpiredArchives()
        }
    }
}
