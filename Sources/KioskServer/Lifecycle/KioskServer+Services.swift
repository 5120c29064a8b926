import Foundation
import KioskStore
import Logging
import ServiceLifecycle

extension KioskServer {
    /// Everything a running server does, as one group of services that start together and stop
    /// together: the store's HTTP application, `/metrics` on its own address (when
    /// `metricsPort` is set), the catalog (loaded once the port is bound, reloaded on SIGHUP) and
    /// the periodic clean-up.
    ///
    /// SIGTERM and SIGINT shut the group down gracefully: the applications stop accepting,
    /// finish the requests in flight and return; nothing is cancelled, so a normal stop logs no
    /// error. Requests still running after ``stopGrace`` are cancelled. A service that fails (a port that cannot be bound, a bad catalog) shuts the others
    /// down the same way, and ``ServiceGroup/run()`` throws its error: a ``ListenError``, a
    /// ``KioskCore/CatalogError``…
    /// - Parameters:
    ///   - onServing: called with the store's port once it serves the catalog.
    ///   - onMetricsListening: called with the metrics port once it accepts connections.
    ///   - onConsoleListening: called with the console's port once it accepts connections.
    ///   - traceExporter: the service that exports spans (``TraceExport/bootstrap(logger:)``): first, so it stops last, with every span.
    public func makeServiceGroup(
        onServing: @escaping @Sendable (Int) async -> Void = { _ in },
        onMetricsListening: @escaping @Sendable (Int) async -> Void = { _ in },
        onConsoleListening: @escaping @Sendable (Int) async -> Void = { _ in },
        traceExporter: (any Service)? = nil
    ) -> ServiceGroup {
        let (listening, bound) = AsyncStream<Int>.makeStream()
        let http = ListeningService(
            application: makeApplication { port in bound.yield(port) }, listener: .store,
            host: configuration.host, port: configuration.port, bound: bound)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = traceExporter.map { [Self.stopsTheGroup($0)] } ?? []
        services.append(Self.stopsTheGroup(http))
        if let metricsPort = configuration.metricsPort {
            let metrics = ListeningService(
                application: makeMetricsApplication(onListening: onMetricsListening), listener: .metrics,
                host: configuration.metricsHost, port: metricsPort, bound: nil)
            services.append(Self.stopsTheGroup(metrics))
        }
        if let consolePort = configuration.consolePort {
            let console = ListeningService(
                application: makeConsoleApplication(onListening: onConsoleListening), listener: .console,
                host: configuration.consoleHost, port: consolePort, bound: nil)
            services.append(Self.stopsTheGroup(console))
        }
        services.append(Self.stopsTheGroup(CatalogReloadService(catalog: catalog, listening: listening, onServing: onServing, changes: store.changes,
                                                                   reading: store.reading, logger: logger)))
        services.append(Self.stopsTheGroup(PeriodicService.cleanup(limits.limiter, catalog, logger: logger)))
        // The renewal worker charges the sandbox's pretend renewals; a production store's
        // subscriptions renew where they were paid for (the App Store), never here.
        if let interval = configuration.renewalInterval, configuration.environment == .sandbox {
            services.append(Self.stopsTheGroup(PeriodicService.renewals(store, every: interval, logger: logger)))
        }
        if let delivery = configuration.notificationDelivery {
            services.append(Self.stopsTheGroup(PeriodicService.notifications(store, delivery, logger: logger)))
        }
        if let mail = configuration.mail {
            services.append(Self.stopsTheGroup(PeriodicService.mail(
                MailSender(store: store, catalog: catalog, settings: mail, templates: mailTemplates, metrics: metrics, logger: logger),
                every: mail.interval, logger: logger)))
        }
        services.append(Self.stopsTheGroup(PeriodicService.backlog(store, catalog, metrics, every: configuration.backlogInterval, logger: logger)))
        // Last, so it hears of a shutdown first: waiting long polls answer before the HTTP service waits for them.
        services.append(Self.stopsTheGroup(ChangeFeedService(store: store, listens: false, logger: logger)))
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
        // A stop waits for the requests in flight, but not for ever: with PostgreSQL connections
        // killed under load, a request could wait on a connection that never answers, and the
        // server ignored SIGTERM (three runs in three). After the grace the services are
        // cancelled; a download cut then is resumed by its client. (No cancellation deadline
        // here: ServiceLifecycle's ends in a fatal error. `kiosk serve` has its own.)
        group.maximumGracefulShutdownDuration = Self.stopGrace
        return ServiceGroup(configuration: group)
    }

    /// How long a stop waits for the requests in flight before it cancels them.
    public static let stopGrace: Duration = .seconds(30)

    /// However a service ends, the others are shut down gracefully, never cancelled: a cancelled
    /// Hummingbird server logs `Waiting on child channel: CancellationError()` and
    /// `Server shutdown error: Already closed` at error level.
    private static func stopsTheGroup(_ service: some Service) -> ServiceGroupConfiguration.ServiceConfiguration {
        .init(service: service, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
    }
}
