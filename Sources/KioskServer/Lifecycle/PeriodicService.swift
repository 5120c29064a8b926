import KioskStore
import Logging
import ServiceLifecycle

/// A worker that runs one pass every `interval` on every instance (the database's claims make
/// each piece of work happen once): the renewals, the notification deliveries and the clean-up.
/// A graceful shutdown ends it while it waits, or after the pass under way; a pass that fails is
/// logged and the next one tries again (nothing of a failed step was written).
struct PeriodicService: Service {
    /// What the pass does, in the log's words ("renewal", "notification delivery", "clean-up").
    let name: String
    let interval: Duration
    let logger: Logger
    let pass: @Sendable () async throws -> Void

    func run() async throws {
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                // Shut down (or cancelled) while waiting: nothing is half done.
                return
            }
            do {
                try await pass()
            } catch {
                logger.warning("\(name) pass failed; trying again at the next", metadata: ["error": "\(Store.describe(error))"])
            }
        }
    }
}

extension PeriodicService {
    /// Takes the subscriptions that are due one step each (``Subscriptions/renewDue(limit:stopping:)``).
    /// A backlog is worked through in rounds; a shutdown stops it between two rounds (what a
    /// round claimed and did not commit lapses with its lease).
    static func renewals(_ store: Store, every interval: Duration, logger: Logger) -> PeriodicService {
        PeriodicService(name: "renewal", interval: interval, logger: logger) {
            let steps = try await store.subscriptions.renewDue(stopping: { Task.isShuttingDownGracefully })
            if steps > 0 { logger.debug("renewal steps committed", metadata: ["steps": "\(steps)"]) }
        }
    }

    /// Sends the outbox's due deliveries (``Notifications/deliverDue(_:stopping:)``).
    static func notifications(_ store: Store, _ configuration: NotificationDeliveryConfiguration, logger: Logger) -> PeriodicService {
        PeriodicService(name: "notification delivery", interval: configuration.interval, logger: logger) {
            try await store.notifications.deliverDue(configuration, stopping: { Task.isShuttingDownGracefully })
        }
    }

    /// The backlog gauges of `/metrics` (deliveries, events to act on, mail, failed reloads),
    /// read from the database every few seconds rather than on each scrape.
    static func backlog(_ store: Store, _ catalog: CatalogService, _ metrics: ServerMetrics, every interval: Duration, logger: Logger) -> PeriodicService {
        PeriodicService(name: "metrics", interval: interval, logger: logger) {
            metrics.setBacklog(try await store.reports.backlog(), failedReloads: await catalog.failedReloads)
        }
    }

    /// Idle rate-limit buckets are forgotten, and archives that a reload replaced are deleted once
    /// no resume can still need them: off the request path, every minute.
    static func cleanup(_ limiter: RateLimiter, _ catalog: CatalogService, logger: Logger) -> PeriodicService {
        PeriodicService(name: "clean-up", interval: .seconds(60), logger: logger) {
            await limiter.forgetIdleBuckets()
            await catalog.forgetExpiredArchives()
        }
    }
}
