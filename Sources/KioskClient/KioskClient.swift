import Foundation
import KioskCore
import KioskTransfer
import Logging

/// The client engine: one KIOSK_HOME, one server, long-lived.
///
/// It holds the reader's state in two owners, its purchases and its library, moves work between
/// them through its flows (buy, replay, restore, resume), and publishes what happens on ``events``. Several engines (in one process or in several)
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
        /// Update an installed zip product by fetching only the entries that changed (see
        /// `DeltaUpdate`); off, every update downloads the whole archive.
        public var updateByEntries = true
        /// When to retry a failed download or an unfinished purchase.
        public var backoff = Backoff()
        /// How long a download claim holds without renewal; the owner renews it three times as often.
        public var claimLease: TimeInterval = 15
        /// How often a running download reports progress and checks for a pause or cancel.
        public var progressPeriod: Duration = .milliseconds(500)
        /// The largest catalog accepted (after decompression); every other answer is held to 4 MiB.
        public var maxCatalogBytes = 64 << 20
        /// What the platform says of the network and power, for the agent's ``DownloadPolicy``:
        /// Linux's by default; an app gives its own platform's answer.
        public var deviceConditions: any DeviceConditionsSource = LinuxDeviceConditions()
        /// Test hook: called at the named points of a purchase, e.g. to kill the process there.
        /// Not part of the engine's API: only a test (or the CLI's test variable) imports it with
        /// `@_spi(Testing) import KioskClient`.
        @_spi(Testing) public var crashPoint: (@Sendable (CrashPoint) -> Void)?

        public init() {}
    }

    public let home: KioskHome
    public let configuration: Configuration
    let database: ClientDatabase
    let logger: Logger
    /// The store this engine talks to, fixed when it opens.
    let storeServer: StoreServer
    // The two owners (purchases, and the library with its downloads), built once and kept for the
    // engine's life. Neither calls the other: the flows take a purchase from one to the other.
    let catalog: CatalogSync
    let purchases: Purchases
    let library: Library
    let flows: Flows
    /// The keep rules and the tidy that frees old issues' files (never a purchase).
    let newsstand: Newsstand

    /// Opens the state in `home`, creating it on first use.
    /// - Parameter server: the server's base URL (http or https), remembered for next time once it
    ///   has answered as a Kiosk store; nil uses the remembered one.
    /// - Throws: ``ClientError/invalidRequest(_:)`` for a server that is not an http(s) URL.
    public init(home: KioskHome, server: String? = nil, configuration: Configuration = Configuration(), logger: Logger = Logger(label: "kiosk.client")) throws {
        try home.prepare()
        self.home = home
        self.configuration = configuration
        self.logger = logger
        let database = try ClientDatabase(url: home.database)
        self.database = database
        let remembered = try database.settings.value(Setting.Key.server)
        let store: StoreServer
        if let server, !server.isEmpty {
            let given = try StoreServer.normalized(server)
            if given == remembered {
                store = StoreServer(url: given)
            } else {
                store = StoreServer(url: given, rememberIn: database.settings)
            }
        } else {
            store = StoreServer(url: remembered)
        }
        let http = HTTPClient()
        self.storeServer = store
        self.catalog = CatalogSync(database: database, http: http, server: store, spoolFolder: home.root, maxBytes: configuration.maxCatalogBytes)
        let purchases = Purchases(database: database, server: store, http: http, home: home, configuration: configuration, logger: logger)
        self.purchases = purchases
        let library = Library(database: database, home: home, server: store, configuration: configuration, owner: ClaimOwner(), logger: logger, contentURLs: ContentURLs())
        self.library = library
        self.flows = Flows(
            catalog: catalog, purchases: purchases, library: library,
            subscriptions: SubscriptionIssues(database: database, library: library, purchases: purchases), logger: logger)
        self.newsstand = Newsstand(database: database, library: library, purchases: purchases)
    }

    deinit {
        database.events.finish()
    }

    /// Every state change and download progress from now on, in order. Each call is a new stream.
    public var events: AsyncStream<ClientEvent> { database.events.subscribe() }

    /// The same events as ``events``, in a stream the caller ends (``EventSubscription/end()``)
    /// once the work it follows is done: its reader still gets every event published before.
    public func subscribe() -> EventSubscription { database.events.subscription() }

    /// The server this client talks to.
    /// - Throws: ``ClientError/noServer`` when none was ever given.
    public func server() throws -> String {
        try storeServer.base()
    }

    /// A server URL as the engine keeps it (http or https with a host, no trailing slash).
    /// - Throws: ``ClientError/invalidRequest(_:)`` naming what is wrong with it.
    public static func checkServerURL(_ text: String) throws -> String {
        try StoreServer.normalized(text)
    }

    // MARK: Settings

    /// A setting of this home that `kiosk config` reads and writes.
    public enum SettingName: String, Sendable, CaseIterable {
        /// The store's base URL, remembered from the last `--server` that answered.
        case server
        /// `on` or `off`: purchases allowed on this device.
        case payments
        /// `any` or `unmetered`: the networks the agent downloads on by itself (``DownloadPolicy``).
        case downloadNetwork = "download-network"
        /// A percent: on battery, the agent downloads by itself only above it.
        case batteryFloor = "battery-floor"
        /// `on` or `off`: the agent downloads by itself only while charging.
        case chargingOnly = "charging-only"
        /// A size (`512M`, `2G`, bytes): what the agent's downloads leave free on the disk.
        case keepFree = "keep-free"
    }

    /// Where the settings live: the home's database file.
    public var settingsFile: String { database.path }

    /// A setting's stored value; nil when unset (payments then count as on).
    public func setting(_ name: SettingName) throws -> String? {
        try database.settings.value(name.key)
    }

    /// Stores a setting, checked first: a server must be an http(s) URL, payments `on` or `off`.
    /// - Returns: the value as stored.
    /// - Throws: ``ClientError/invalidRequest(_:)`` naming the value and what is accepted.
    @discardableResult
    public func setSetting(_ name: SettingName, to value: String) throws -> String {
        let stored: String
        switch name {
        case .server:
            stored = try StoreServer.normalized(value)
        case .payments:
            guard value == "on" || value == "off" else {
                throw ClientError.invalidRequest("payments must be on or off, not \"\(value)\"")
            }
            try database.settings.setPaymentsEnabled(value == "on")
            return value
        case .downloadNetwork, .batteryFloor, .chargingOnly, .keepFree:
            try Self.checkPolicySetting(name, value)
            try database.settings.set(name.key, to: value)
            return value
        }
        // The one way a server is remembered: the keys and the catalog's ETag cached from another store go with it.
        if try database.settings.value(Setting.Key.server) != stored { try database.settings.rememberServer(stored) }
        return stored
    }

    /// A download policy setting's value, checked: a wrong one is refused naming what is accepted.
    public static func checkPolicySetting(_ name: SettingName, _ value: String) throws {
        switch name {
        case .downloadNetwork:
            guard ["any", "unmetered"].contains(value) else { throw ClientError.invalidRequest("download-network must be any or unmetered, not \"\(value)\"") }
        case .batteryFloor:
            guard let percent = Int(value), (0...100).contains(percent) else { throw ClientError.invalidRequest("battery-floor must be a percent from 0 to 100, not \"\(value)\"") }
        case .chargingOnly:
            guard value == "on" || value == "off" else { throw ClientError.invalidRequest("charging-only must be on or off, not \"\(value)\"") }
        case .keepFree:
            guard Self.bytes(value) != nil else { throw ClientError.invalidRequest("keep-free must be a size like 512M or 2G (or bytes), not \"\(value)\"") }
        case .server, .payments:
            break
        }
    }

    /// When the agent downloads by itself, as the settings say (the defaults: any network, any charge).
    public func downloadPolicy() throws -> DownloadPolicy {
        DownloadPolicy(
            unmeteredOnly: try setting(.downloadNetwork) == "unmetered",
            batteryFloor: try setting(.batteryFloor).flatMap(Int.init),
            chargingOnly: try setting(.chargingOnly) == "on")
    }

    /// The bytes the agent's downloads leave free: the reader's `keep-free`, else 5 % of the disk,
    /// at most 1 GiB.
    public func storageFloor() throws -> Int64 {
        try setting(.keepFree).flatMap(Self.bytes) ?? library.defaultStorageFloor()
    }

    /// `512M`, `2G`, `1.5G`, `700K` or a number of bytes, in binary units; nil for anything else.
    static func bytes(_ text: String) -> Int64? {
        let units: [Character: Double] = ["K": 1_024, "M": 1_048_576, "G": 1_073_741_824, "T": 1_099_511_627_776]
        var number = text.trimmingCharacters(in: .whitespaces).uppercased()
        if number.hasSuffix("B"), number.count > 1, units[number.dropLast().last ?? " "] != nil { number.removeLast() }
        let unit = number.last.flatMap { units[$0] }
        if unit != nil { number.removeLast() }
        guard let value = Double(number), value >= 0, value.isFinite, value * (unit ?? 1) < 9e18 else { return nil }
        return Int64(value * (unit ?? 1))
    }

    /// Removes a setting (a server is then needed again with --server; payments count as on).
    public func unsetSetting(_ name: SettingName) throws {
        try database.settings.remove(name.key)
    }

    // MARK: Catalog

    /// Syncs the catalog cache with the server and queues the issues a subscription covers.
    public func sync() async throws -> SyncReport {
        var report = try await flows.refreshCatalog()
        report.queued = try await flows.subscriptions.queueCoveredIssues()
        return report
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
        try database.settings.value(Setting.Key.catalogSyncedAt).flatMap { try? Date($0, strategy: .iso8601) }
    }
}

extension KioskClient.SettingName {
    /// The key the setting is stored under in the database.
    var key: String {
        switch self {
        case .server: return Setting.Key.server
        case .payments: return Setting.Key.paymentsEnabled
        case .downloadNetwork: return "download.network"
        case .batteryFloor: return "download.batteryFloor"
        case .chargingOnly: return "download.chargingOnly"
        case .keepFree: return "download.keepFree"
        }
    }
}

/// Places in a purchase where a test can have the client killed, to prove nothing is lost or charged twice.
@_spi(Testing) public enum CrashPoint: String, Sendable, CaseIterable {
    /// The server charged and answered; the client has not stored the receipt.
    case afterCharge = "after-charge"
    /// The receipt is stored; the transaction is not finished.
    case afterReceipt = "after-receipt"
    /// A removal (the newsstand's tidy) moved an issue's folder aside; its row is not committed.
    case midRemoval = "mid-removal"
}
