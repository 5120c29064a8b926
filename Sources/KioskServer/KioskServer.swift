import Foundation
import Hummingbird
import KioskCore
import Logging
import NIOCore

/// The Kiosk server: the catalog, and (as later parts land) the store, receipts and content.
public struct KioskServer: Sendable {
    public let configuration: ServerConfiguration
    public let catalog: CatalogService
    let logger: Logger

    /// Loads the catalog and prepares every archive.
    /// - Throws: ``KioskCore/CatalogError`` for a bad catalog; the server must not start on one.
    public init(configuration: ServerConfiguration, logger: Logger = Logger(label: "kiosk.server")) throws {
        try FileManager.default.createDirectory(at: configuration.dataDirectory, withIntermediateDirectories: true)
        self.configuration = configuration
        self.logger = logger
        self.catalog = try CatalogService(configuration: configuration, logger: logger)
    }

    /// The router with every route of the wire contract.
    public func makeRouter() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: LogRequestsMiddleware(.info))
        router.get("healthz") { _, _ in "ok" }
        CatalogController(catalog: catalog).addRoutes(to: router)
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
