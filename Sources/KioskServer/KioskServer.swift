import Foundation
import Hummingbird
import KioskCore
import Logging
import NIOCore

/// The Kiosk server: the catalog, and (as later parts land) the store, receipts and content.
public struct KioskServer: Sendable {
    public let configuration: ServerConfiguration
    public let catalog: CatalogService
    public let store: Store
    public let signer: ReceiptSigner
    /// What admin calls must carry; also written to `<data>/admin-token`.
    public let adminToken: String
    public let metrics = ServerMetrics()
    let logger: Logger

    /// Loads the catalog, prepares every archive, opens the database and the signing key.
    /// - Throws: ``KioskCore/CatalogError`` for a bad catalog; the server must not start on one.
    public init(configuration: ServerConfiguration, logger: Logger = Logger(label: "kiosk.server")) async throws {
        let data = configuration.dataDirectory
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        self.configuration = configuration
        self.logger = logger
        self.catalog = try CatalogService(configuration: configuration, logger: logger)
        self.signer = try await ReceiptSigner(dataDirectory: data)
        self.adminToken = try AdminToken.loadOrCreate(in: data)
        let database = try ServerDatabase(url: data.appendingPathComponent("kiosk-server.sqlite"))
        self.store = try await Store(
            database: database, signer: signer, catalog: catalog, environment: configuration.environment,
            metrics: metrics, logger: logger)
    }

    /// The router with every route of the wire contract.
    public func makeRouter() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        // One log line per request, with Hummingbird's request id in its metadata.
        router.add(middleware: LogRequestsMiddleware(.info))
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.get("healthz") { _, _ in "ok" }
        router.get("metrics") { [metrics] _, _ in metrics.exposition() }
        CatalogController(catalog: catalog).addRoutes(to: router)
        StoreController(store: store, signer: signer, adminToken: adminToken).addRoutes(to: router)
        ContentController(catalog: catalog, store: store, metrics: metrics).addRoutes(to: router)
        return router
    }

    /// The Hummingbird application, listening on the configured host and port.
    /// - Parameter onListening: called with the bound port once the server accepts connections.
    public func makeApplication(
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: makeRouter(),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "kiosk"),
            onServerRunning: { channel in
                await onListening(channel.localAddress?.port ?? 0)
            },
            logger: logger
        )
    }
}
