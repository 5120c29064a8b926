import Foundation
import KioskCore
import KioskTransfer
import Logging

/// The store: its owners, each holding its own rows and the SQL that reads and writes them.
///
/// `Store` only builds and holds them; what the store does is each owner's: ``accounts``,
/// ``payments``, ``subscriptions``, ``notifications``, ``appStore``, ``receipts``, ``reports``,
/// ``keys`` and ``rateLimiter``. No database handle leaves the module.
public struct Store: Sendable {
    let base: StoreBase

    /// Accounts, their tokens, what each holds and each account's change feed.
    public var accounts: Accounts { Accounts(base: base) }
    /// Payments, redemptions, Ask to Buy, finishing, revoking and refunding.
    public var payments: Payments { Payments(base: base) }
    /// Subscriptions: their state, auto-renew, sandbox settings and the renewals worker.
    public var subscriptions: Subscriptions { Subscriptions(base: base) }
    /// The notification outbox, the publisher's webhook endpoints and their delivery.
    public var notifications: Notifications { Notifications(base: base) }
    /// The web shop's channel: Stripe's signed events, granted and revoked.
    public var stripe: StripeChannel { StripeChannel(base: base) }
    /// Google Play's purchases and notifications.
    public var play: PlayChannel { PlayChannel(base: base) }
    /// The App Store's transactions and server notifications, in Kiosk's terms.
    public var appStore: AppStoreBridge { AppStoreBridge(base: base) }
    /// Receipts: what a proof of purchase entitles, `verifyReceipt`, receipts signed again.
    public var receipts: Receipts { Receipts(base: base) }
    /// Where each reader is in each book (KOReader's progress sync).
    public var reading: ReadingProgress { ReadingProgress(base: base) }
    /// Offer codes: made by the operator, redeemed by readers.
    public var codes: OfferCodes { OfferCodes(base: base) }
    /// Every product the store published, which carries withdrawn products to their owners.
    public var publishedProducts: PublishedProducts { PublishedProducts(base: base) }
    /// The store's mail: the outbox, and what turns notifications and new issues into messages.
    public var mail: Mail { Mail(base: base) }
    /// Receipts presented for transactions a restore lost: written again, or listed.
    public var reinstatements: Reinstatements { Reinstatements(base: base) }
    /// `kiosk admin check`'s look at the rows: receipts, balances, each day's sales.
    public var audit: StoreAudit { StoreAudit(base: base) }
    /// The operator's lists and figures: accounts, transactions, sales, downloads, owners.
    public var reports: Reports { Reports(base: base) }
    /// Signs receipts and holds the keys Kiosk's own receipts are checked against.
    public var keys: SigningKeys { base.keys }
    /// The rate limits' buckets (shared rows on PostgreSQL).
    public let rateLimiter: RateLimiter
    /// Wakes the account change feed's long polls waiting in this process.
    public var changes: ChangeNotifier { base.changes }
    /// Checks every proof of purchase presented, one verifier per kind of proof.
    public var proofs: PurchaseProofVerifiers { base.proofs }
    public var environment: StoreEnvironment { base.environment }
    /// The operator's tax table (``TaxTable``), which the shop shows prices by.
    public var taxes: TaxTable { base.taxes }
    /// The time renewals, grace and expiry read (the sandbox may speed it up).
    public var clock: StoreClock { base.clock }
    /// The database, for this module and its tests only.
    var database: ServerDatabase { base.database }

    init(
        database: ServerDatabase, keys: SigningKeys, catalog: any StoreCatalog, environment: StoreEnvironment,
        metrics: any StoreMetrics = NoStoreMetrics(), logger: Logger, appStore: AppStoreSignedDataVerifier? = nil, clock: StoreClock = .wallClock,
        accountPolicy: AccountPolicy = AccountPolicy(), channels: StoreChannels = StoreChannels(), renewalLease: TimeInterval = 30,
        taxes: TaxTable = .none, beforeRenewalCommit: (@Sendable (String) async throws -> Void)? = nil
    ) {
        base = StoreBase(
            database: database, keys: keys, catalog: catalog, environment: environment, metrics: metrics, logger: logger,
            appStore: appStore, clock: clock, accountPolicy: accountPolicy, channels: channels, renewalLease: renewalLease,
            taxes: taxes, beforeRenewalCommit: beforeRenewalCommit)
        rateLimiter = RateLimiter(database: database, logger: logger)
    }

    /// Opens the store's database (migrating it), its signing keys and its clock.
    /// - Parameters:
    ///   - legacyKeyFile: a signing key file of an older store, imported once.
    ///   - timeScale: how fast the sandbox's store time runs (1 in production).
    /// - Throws: ``ServerSetupError`` for a setting the store refuses; the database's own errors.
    public static func open(
        _ location: DatabaseLocation, environment: StoreEnvironment, legacyKeyFile: URL?, timeScale: Double,
        catalog: any StoreCatalog, metrics: any StoreMetrics, appStore: AppStoreSignedDataVerifier?, logger: Logger,
        accountPolicy: AccountPolicy = AccountPolicy(), channels: StoreChannels = StoreChannels(), pool: DatabasePool = DatabasePool(),
        taxes: TaxTable = .none
    ) async throws -> Store {
        let database = try await ServerDatabase.open(location, pool: pool, logger: logger)
        do {
            try await StoreEnvironmentMark.check(environment, database: database, now: Date())
            let keys = try await SigningKeys(database: database, identity: .kiosk(environment), legacyKeyFile: legacyKeyFile, logger: logger)
            let clock = try await StoreClock.load(scale: timeScale, environment: environment, database: database)
            return Store(database: database, keys: keys, catalog: catalog, environment: environment, metrics: metrics,
                         logger: logger, appStore: appStore, clock: clock, accountPolicy: accountPolicy, channels: channels, taxes: taxes)
        } catch {
            await database.close()
            throw error
        }
    }

    /// Closes the database's connections; call it once nothing uses the store any more.
    public func close() async {
        await base.database.close()
    }

    /// An error of the database's, in one line for a log.
    public static func describe(_ error: any Error) -> String {
        ServerDatabase.describe(error)
    }

    /// Whether an error is the database's failing underneath (a connection gone, a disk error),
    /// which a client may meet by sending its request again.
    public static func isDatabaseFailure(_ error: any Error) -> Bool {
        ServerDatabase.isDatabaseFailure(error)
    }

    /// Whether a database failure is one its operator must mend (a right taken away, a database
    /// made read-only, a full disk, a table gone), which sending the request again cannot outlast.
    public static func needsOperator(_ error: any Error) -> Bool {
        ServerDatabase.needsOperator(error)
    }
}

/// What every owner shares: the database, the keys, the catalog, the clock, and this process's
/// caches and turns. Built once by ``Store``; owners are cheap views over it.
final class StoreBase: Sendable {
    let database: ServerDatabase
    let keys: SigningKeys
    let proofs: PurchaseProofVerifiers
    /// App Store signed data (transactions and notifications), when the store takes it.
    let appStore: AppStoreProofVerifier?
    /// Payments of one account that read its holdings decide one at a time in this process, and its
    /// credit packs share a turn among themselves (see ``AccountTurns``).
    let turns = AccountTurns()
    /// PostgreSQL: one account's purchase statements share commits (see ``AccountCommits``).
    let accountCommits: AccountCommits
    /// Wakes the account change feed's long polls waiting in this process.
    let changes: ChangeNotifier
    /// Bearer tokens this process has already looked up (see ``AccountTokens``).
    let tokens = AccountTokens()
    let catalog: any StoreCatalog
    let environment: StoreEnvironment
    let metrics: any StoreMetrics
    let logger: Logger
    let clock: StoreClock
    /// How accounts sign in: the device limit, the codes' lifetime, the password hash's cost.
    let accountPolicy: AccountPolicy
    /// The payment channels besides the App Store: Google Play's key, the web shop's checkout.
    let channels: StoreChannels
    /// Checks and hashes passwords (``Passwords``).
    let passwords: Passwords
    /// Basic credentials this process has checked (see ``VerifiedPasswords``).
    let verifiedPasswords = VerifiedPasswords()
    /// The publisher's endpoints' open connections, kept between notifications (see ``ConnectionCache``).
    let webhookConnections = ConnectionCache(capacity: 64)
    /// This instance's name in the claims it takes on due renewals and deliveries.
    let instance = "instance-" + Store.randomHex(bytes: 6)
    /// How long a claim on a due subscription holds before another instance may take it.
    let renewalLease: TimeInterval
    /// Called with the subscription's ID after a renewal step is decided and signed, just before
    /// its commit: the tests' crash point (an error thrown here leaves the claim and nothing else).
    let beforeRenewalCommit: (@Sendable (String) async throws -> Void)?
    /// The operator's tax rates per country and class (``TaxTable``); `.none` charges no tax.
    let taxes: TaxTable

    init(
        database: ServerDatabase, keys: SigningKeys, catalog: any StoreCatalog, environment: StoreEnvironment, metrics: any StoreMetrics,
        logger: Logger, appStore: AppStoreSignedDataVerifier?, clock: StoreClock, accountPolicy: AccountPolicy, channels: StoreChannels,
        renewalLease: TimeInterval, taxes: TaxTable = .none,
        beforeRenewalCommit: (@Sendable (String) async throws -> Void)?
    ) {
        self.taxes = taxes
        self.accountPolicy = accountPolicy
        self.channels = channels
        passwords = Passwords(cost: accountPolicy.passwordCost)
        self.database = database
        accountCommits = AccountCommits(database: database, logger: logger)
        self.keys = keys
        self.catalog = catalog
        self.environment = environment
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        self.renewalLease = renewalLease
        self.beforeRenewalCommit = beforeRenewalCommit
        changes = ChangeNotifier(broadcast: database.engine == .postgres ? ChangeBroadcast(database: database, logger: logger) : nil)
        let appStoreProofs = appStore.map { AppStoreProofVerifier(signedData: $0, catalog: catalog) }
        self.appStore = appStoreProofs
        // One verifier per kind of proof; the routes that take proofs never name one.
        proofs = PurchaseProofVerifiers([KioskReceiptVerifier(keys: keys)] + (appStoreProofs.map { [$0] } ?? []))
    }
}

/// One of the store's owners: a view over the shared ``StoreBase``, with the module's SQL behind
/// its methods. Owners reach one another through ``StoreOwner`` (``payments`` from ``accounts``…).
protocol StoreOwner: Sendable {
    var base: StoreBase { get }
}

extension StoreOwner {
    var database: ServerDatabase { base.database }
    var keys: SigningKeys { base.keys }
    var catalog: any StoreCatalog { base.catalog }
    var environment: StoreEnvironment { base.environment }
    var metrics: any StoreMetrics { base.metrics }
    var logger: Logger { base.logger }
    var clock: StoreClock { base.clock }
    var changes: ChangeNotifier { base.changes }
    var turns: AccountTurns { base.turns }
    var accountCommits: AccountCommits { base.accountCommits }
    var tokens: AccountTokens { base.tokens }
    var appStore: AppStoreProofVerifier? { base.appStore }
    var proofs: PurchaseProofVerifiers { base.proofs }
    var webhookConnections: ConnectionCache { base.webhookConnections }
    var instance: String { base.instance }
    var renewalLease: TimeInterval { base.renewalLease }
    var beforeRenewalCommit: (@Sendable (String) async throws -> Void)? { base.beforeRenewalCommit }

    var accounts: Accounts { Accounts(base: base) }
    var payments: Payments { Payments(base: base) }
    var subscriptions: Subscriptions { Subscriptions(base: base) }
    var notifications: Notifications { Notifications(base: base) }
    var receipts: Receipts { Receipts(base: base) }
    var codes: OfferCodes { OfferCodes(base: base) }
    var channelRecords: ChannelRecords { ChannelRecords(base: base) }
}

/// What the store needs of the catalog it sells from (KioskServer's `CatalogService` is one).
public protocol StoreCatalog: Sendable {
    /// The catalog served now.
    /// - Throws: ``StoreError`` `starting` while the first catalog is still being loaded.
    func storeProducts() async throws -> CatalogProducts
    /// Removes a withdrawn product's last traces (its archives and records) from the catalog's folders.
    func removeWithdrawn(_ productId: String) async throws
}

/// The products of the catalog served now, as the store reads them.
public struct CatalogProducts: Sendable {
    public var products: [String: Product]
    /// Kiosk's product ID by the App Store product ID its catalog entry names.
    public var productsByAppStoreID: [String: String]
    /// Kiosk's product ID by the Play product ID its catalog entry names.
    public var productsByPlayID: [String: String]
    /// The catalog's strong entity tag (its document's digest, quoted).
    public var etag: String

    public init(products: [String: Product], productsByAppStoreID: [String: String], productsByPlayID: [String: String] = [:], etag: String) {
        self.products = products
        self.productsByAppStoreID = productsByAppStoreID
        self.productsByPlayID = productsByPlayID
        self.etag = etag
    }
}

/// Where the store counts what it decides (KioskServer's metrics are one).
public protocol StoreMetrics: Sendable {
    /// One payment decided, by outcome (`purchased`, `owned`, `declined`, `redeemed`…).
    func payment(outcome: String)
}

/// Counts nothing: a store without metrics (the tests').
public struct NoStoreMetrics: StoreMetrics {
    public init() {}
    public func payment(outcome: String) {}
}
