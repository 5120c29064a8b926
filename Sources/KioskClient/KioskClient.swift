import Foundation
import KioskCore
import KioskTransfer
import Logging

/// The client engine: one KIOSK_HOME, one server, long-lived.
///
/// It owns the reader's state through ``ClientDatabase``, runs the payment queue and the download
/// queue, and publishes what happens on ``events``. Several engines (in one process or in several)
/// may share a home: downloads are claimed by one of them at a time, and the account is created
/// once.
public final class KioskClient: Sendable {
    /// How the engine behaves; the command-line tool maps `KIOSK_*` variables onto it.
    public struct Configuration: Sendable {
        /// A transfer below 1 KiB/s for this many seconds has stalled and is retried later.
        public var stallSeconds = 30
        /// Caps each download's receive rate, in bytes/s.
        public var maxReceiveSpeed: Int64?
        /// Downloads at once.
        public var concurrency = 3
        /// Unpack tar archives into staging while they download (installed only after the check).
        public var unpackWhileDownloading = true
        /// When to retry a failed download or an unfinished purchase.
        public var backoff = Backoff()
        /// How long a download claim holds without renewal; the owner renews it three times as often.
        public var claimLease: TimeInterval = 15
        /// How often a running download reports progress and checks for a pause or cancel.
        public var progressPeriod: Duration = .milliseconds(500)
        /// The largest catalog accepted (after decompression); every other answer is held to 4 MiB.
        public var maxCatalogBytes = 64 << 20
        /// Test hook: called at the named points of a purchase, e.g. to kill the process there.
        /// Not part of the engine's API: only a test (or the CLI's test variable) imports it with
        /// `@_spi(Testing) import KioskClient`.
        @_spi(Testing) public var crashPoint: (@Sendable (CrashPoint) -> Void)?

        public init() {}
    }

    public let home: KioskHome
    public let configuration: Configuration
    let database: ClientDatabase
    let http = HTTPClient()
    let logger: Logger
    /// This engine's name on the download claims it holds.
    let owner = ClaimOwner()
    let contentURLs = ContentURLs()

    /// Opens the state in `home`, creating it on first use.
    /// - Parameter server: the server's base URL, remembered for next time; nil uses the remembered one.
    public init(home: KioskHome, server: String? = nil, configuration: Configuration = Configuration(), logger: Logger = Logger(label: "kiosk.client")) throws {
        try home.prepare()
        self.home = home
        self.configuration = configuration
        self.logger = logger
        self.database = try ClientDatabase(url: home.database)
        if let server, !server.isEmpty {
            try database.setSetting(Setting.Key.server, to: server.hasSuffix("/") ? String(server.dropLast()) : server)
        }
    }

    deinit {
        database.events.finish()
    }

    /// Every state change and download progress from now on, in order. Each call is a new stream.
    public var events: AsyncStream<ClientEvent> { database.events.subscribe() }

    /// The server this client talks to.
    /// - Throws: ``ClientError/noServer`` when none was ever given.
    public func server() throws -> String {
        guard let server = try database.setting(Setting.Key.server) else { throw ClientError.noServer }
        return server
    }

    // MARK: Catalog

    /// Syncs the catalog cache with the server and queues the issues a subscription covers.
    public func sync() async throws -> SyncReport {
        var report = try await catalogSync().sync()
        try retargetDownloads(report.changed)
        report.queued = try await subscriptionIssues().queueCoveredIssues()
        return report
    }

    /// Downloads not yet started or stopped half-way switch to the version the catalog now names,
    /// rather than finish one the server has replaced.
    func retargetDownloads(_ changed: [String]) throws {
        for id in changed {
            if let content = try database.cachedProduct(id)?.content {
                try database.retargetDownload(id, to: content)
            }
        }
    }

    /// The cached catalog, sorted by product ID, and when it was last synced (nil: never).
    public func cachedCatalog() throws -> (products: [Product], syncedAt: Date?) {
        (try database.cachedProducts(), try catalogSyncedAt())
    }

    /// How many products the cached catalog holds, and when it was last synced (nil: never).
    public func cachedCatalogSummary() throws -> (count: Int, syncedAt: Date?) {
        (try database.cachedProductCount(), try catalogSyncedAt())
    }

    /// Calls `body` with each cached product, sorted by ID, one at a time: for a large catalog,
    /// where ``cachedCatalog()`` would hold every product at once. An error `body` throws ends it.
    public func forEachCachedProduct(_ body: (Product) throws -> Void) throws {
        try database.forEachCachedProduct(body)
    }

    private func catalogSyncedAt() throws -> Date? {
        try database.setting(Setting.Key.catalogSyncedAt).flatMap { try? Date($0, strategy: .iso8601) }
    }

    // MARK: Parts

    func storeAPI() throws -> StoreAPI {
        StoreAPI(server: try server(), http: http, token: nil)
    }

    var paymentQueue: PaymentQueue { PaymentQueue(client: self) }

    func catalogSync() throws -> CatalogSync {
        CatalogSync(database: database, http: http, server: try server(), spoolFolder: home.root, maxBytes: configuration.maxCatalogBytes)
    }

    func downloadQueue() throws -> DownloadQueue {
        DownloadQueue(database: database, home: home, server: try server(), configuration: configuration, owner: owner, logger: logger, contentURLs: contentURLs)
    }

    func subscriptionIssues() -> SubscriptionIssues {
        SubscriptionIssues(database: database)
    }
}

/// Places in a purchase where a test can have the client killed, to prove nothing is lost or charged twice.
@_spi(Testing) public enum CrashPoint: String, Sendable, CaseIterable {
    /// The server charged and answered; the client has not stored the receipt.
    case afterCharge = "after-charge"
    /// The receipt is stored; the transaction is not finished.
    case afterReceipt = "after-receipt"
}
