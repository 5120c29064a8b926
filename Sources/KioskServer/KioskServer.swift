import Foundation
import Hummingbird
import KioskCore
import KioskStore
import Logging
import Mustache
import NIOCore

/// The Kiosk server: the catalog, and (as later parts land) the store, receipts and content.
public struct KioskServer: Sendable {
    public let configuration: ServerConfiguration
    public let catalog: CatalogService
    public let store: Store
    public var keys: SigningKeys { store.keys }
    /// What admin calls must carry; also written to `<data>/admin-token`.
    public let adminToken: String
    public let metrics = ServerMetrics()
    /// Request log lines waiting for the end of a file sent with `sendfile`.
    let sendfileEnds = SendfileEnds()
    /// The rate limits of account creation and purchases (one per server value, shared by its routers).
    let limits: RateLimitGate
    /// The reader's account page (`/account`), its templates parsed once.
    let accountPage: AccountPage
    /// The shop at the store's own address.
    let shopPages: ShopPages
    /// Every page's templates (the shop's, `/account`'s, the console's), parsed once.
    let templates: MustacheLibrary
    /// The mail's templates (``MailTemplates``), parsed once.
    let mailTemplates: MustacheLibrary
    let logger: Logger

    /// Opens the database, the signing key and the admin token; the catalog is loaded by
    /// ``loadCatalog()``, after the server has bound its port.
    /// - Parameter catalog: the catalog service, when the caller made it to ``CatalogService/check()``
    ///   the catalog before anything else; by default one over the configured folders.
    /// - Throws: ``ServerSetupError`` for a secret file that exists but cannot be read.
    public init(configuration: ServerConfiguration, catalog: CatalogService? = nil, logger: Logger = Logger(label: "kiosk.server")) async throws {
        let data = configuration.dataDirectory
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        self.configuration = configuration
        self.logger = logger
        self.catalog = catalog ?? CatalogService(configuration: configuration, logger: logger)
        self.adminToken = try AdminToken.loadOrCreate(in: data)
        self.store = try await Store.open(
            configuration.databaseLocation, environment: configuration.environment,
            legacyKeyFile: data.appendingPathComponent("signing-key.json"), timeScale: configuration.sandboxTimeScale,
            catalog: self.catalog, metrics: metrics, appStore: configuration.appStore.map(AppStoreSignedDataVerifier.init(configuration:)),
            logger: logger, accountPolicy: configuration.accounts, channels: configuration.channels, pool: configuration.databasePool,
            taxes: configuration.taxes)
        self.limits = RateLimitGate(limits: configuration.rateLimits, limiter: store.rateLimiter)
        let templates = try PageTemplates.parsed()
        self.templates = templates
        self.mailTemplates = try MailTemplates.parsed()
        let content = ContentRoutes(catalog: self.catalog, store: store, delivery: configuration.contentDelivery, limits: limits)
        self.accountPage = AccountPage(store: store, limits: limits, templates: templates, content: content)
        self.shopPages = ShopPages(catalog: self.catalog, templates: templates)
        await self.catalog.keep(publishedProducts: store.publishedProducts)
    }


    /// Closes the database's connections; call it once the applications have stopped.
    public func shutdown() async {
        await store.close()
    }

    /// Loads the catalog and packs what needs packing.
    /// - Throws: ``KioskCore/CatalogError`` for a bad catalog; the server must not start on one.
    public func loadCatalog() async throws {
        try await catalog.load()
    }

    /// The router with every route of the wire contract.
    public func makeRouter() -> Router<KioskRequestContext> {
        // HEAD answers every GET route with its headers and no body, as curl -I expects (the
        // content route answers its own HEAD, without counting a download).
        let router = Router(context: KioskRequestContext.self, options: .autoGenerateHeadEndpoints)
        if configuration.traceExport != nil {
            // A span per request, holding what the request log holds: never a secret.
            router.add(middleware: RequestSpanMiddleware())
        }
        router.add(middleware: UnknownAddressMiddleware(templates: templates))
        router.add(middleware: AccountMiddleware(store: store))
        router.add(middleware: ForwardedProtoMiddleware(rateLimits: configuration.rateLimits))
        // One log line per request once its last byte is sent: status, duration, bytes, route,
        // account, client address and agent; the same duration goes to the latency histogram.
        router.add(middleware: RequestLogMiddleware(
            logger: logger, metrics: metrics, ends: sendfileEnds, rateLimits: configuration.rateLimits))
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        // Alive: the process answers. Ready (healthz): it can serve (database, catalog, keys).
        router.get("livez") { _, _ in "ok" }
        router.get("healthz") { [readiness = Readiness(store: store, catalog: catalog)] _, _ in await readiness.respond() }
        if configuration.metricsPort == nil {
            router.get("metrics") { [metrics] _, _ in metrics.exposition() }
        }
        router.addRoutes(CatalogRoutes(catalog: catalog).collection())
        router.addRoutes(AccountRoutes(store: store, limits: limits, storeTag: configuration.storeDescription.entityTag).collection())
        router.addRoutes(SignInRoutes(store: store, limits: limits).collection())
        router.addRoutes(accountPage.collection())
        router.addRoutes(shopPages.collection())
        router.addRoutes(ReceiptRoutes(store: store, keys: keys).collection())
        router.addRoutes(KOSyncRoutes(store: store, catalog: catalog, limits: limits).collection())
        router.addRoutes(OPDSProgressionRoutes(store: store, catalog: catalog, limits: limits).collection())
        router.addRoutes(AppStoreRoutes(store: store).collection())
        router.addRoutes(StripeRoutes(store: store, signature: configuration.stripe).collection())
        router.addRoutes(ChannelRoutes(store: store, limits: limits, description: configuration.storeDescription,
                                       playNotifications: configuration.channels.playNotifications).collection())
        router.addRoutes(accountPage.content.collection())
        router.addRoutes(OPDSRoutes(catalog: catalog, store: store, limits: limits).collection())
        for admin in AdminRoutes.collections(store: store, adminToken: adminToken) { router.addRoutes(admin, atPath: "v1/admin") }
        return router
    }

    /// The Hummingbird application, listening on the configured host and port.
    /// - Parameter onListening: called with the bound port once the server accepts connections.
    public func makeApplication(
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: makeRouter(),
            // A connection that has not sent a whole request in this time is closed; one that is
            // being answered is never cut by it.
            server: .http1WithSendfile(configuration: .init(idleTimeout: .seconds(Int64(configuration.requestHeaderTimeout))), metrics: metrics, ends: sendfileEnds,
                                       catalog: catalog, rateLimits: configuration.rateLimits, shopPages: shopPages.rendered,
                                       // With traces exported, polls go through the stack, which gives each its span.
                                       feed: configuration.traceExport == nil ? HeldFeed(store: store, storeTag: configuration.storeDescription.entityTag) : nil,
                                       logger: logger),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "kiosk"),
            services: [ChangeFeedService(store: store, catalog: catalog, listens: true, logger: logger)],
            onServerRunning: { channel in
                await onListening(channel.localAddress?.port ?? 0)
            },
            logger: logger
        )
    }

    /// The publisher's console, alone on its own address (`--console-port`).
    public func makeConsoleApplication(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let routes = ConsoleRoutes(store: store, catalog: catalog, keys: keys, metrics: metrics,
                                   adminToken: adminToken, sessions: ConsoleSessions(), pages: ConsolePages(templates: templates))
        return Application(
            router: routes.router(),
            configuration: .init(address: .hostname(configuration.consoleHost, port: configuration.consolePort ?? 0), serverName: "kiosk-console"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    /// `/metrics` alone, on the admin address (`--metrics-port`), so it need not be public.
    public func makeMetricsApplication(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        router.get("metrics") { [metrics] _, _ in metrics.exposition() }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.metricsHost, port: configuration.metricsPort ?? 0), serverName: "kiosk-metrics"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }
}
