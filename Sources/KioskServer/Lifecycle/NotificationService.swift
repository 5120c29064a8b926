import KioskStore
import Logging
import ServiceLifecycle

/// The notification delivery worker: every `configuration.interval`, sends the outbox's due
/// deliveries (``Notifications/deliverDue(_:stopping:)``). Runs on every instance; claims make each send once.
struct NotificationService: Service {
    let store: Store
    let configuration: NotificationDeliveryConfiguration
    let logger: Logger

    func run() async throws {
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: configuration.interval) }
            } catch {
                return
            }
            do {
                try await store.notifications.deliverDue(configuration, stopping: { Task.isShuttingDownGracefully })
            } catch {
                logger.warning("notification delivery pass failed; trying again at the next", metadata: ["error": "\(Store.describe(error))"])
            }
        }
    }
}
