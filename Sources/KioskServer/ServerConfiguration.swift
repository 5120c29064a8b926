import Foundation
import KioskCore
import KioskStore

/// Where the server finds its products and keeps its state, and where it listens.
public struct ServerConfiguration: Sendable {
    public var catalogDirectory: URL
    public var contentDirectory: URL
    /// Packed archives, keys and the server's database.
    public var dataDirectory: URL
    public var host: String
    /// 0 picks a free port.
    public var port: Int
    /// Which receipts this server honours: a production server refuses sandbox receipts.
    public var environment: StoreEnvironment
    /// Seconds a connection may take to send a whole request before it is closed.
    public var requestHeaderTimeout = 30
    /// Where `/metrics` is served instead of the main address; nil serves it on the main one.
    public var metricsHost = "127.0.0.1"
    public var metricsPort: Int?
    /// Where the publisher's console is served (``ConsoleRoutes``); nil serves no console. Never
    /// on the store's own address.
    public var consoleHost = "127.0.0.1"
    public var consolePort: Int?
    /// A folder made by `kiosk publish`, served as it is instead of packing the catalog and
    /// content folders.
    public var publishedDirectory: URL?
    /// How content bytes reach the reader: from Kiosk itself, or from nginx or a CDN.
    public var contentDelivery: ContentDelivery = .stream
    /// The store's database; nil is SQLite in the data folder (`kiosk-server.sqlite`).
    public var database: DatabaseLocation?
    /// PostgreSQL's connections per instance, and how long a request waits for one (503 after).
    public var databasePool = DatabasePool()
    /// How many accounts and purchases one client address or account may ask for (429 beyond).
    public var rateLimits = RateLimits()
    /// The web channel: Stripe's webhook secrets and tolerance; nil takes no Stripe events.
    public var stripe: StripeSignature?
    /// Google Play and the web shop's checkout page (``StoreChannels``).
    public var channels = StoreChannels()
    /// Accounts' sign-ins: the device limit, the password hash's cost, device codes.
    public var accounts = AccountPolicy()
    /// The operator's tax rates per country and class (`--tax-rates`); `.none` charges no tax.
    public var taxes = TaxTable.none
    /// The iOS app whose App Store signed transactions are proof of purchase
    /// (`Authorization: AppStore <JWS>`); nil takes none.
    public var appStore: AppStoreSignedDataVerifier.Configuration?
    /// Seconds of store time per real second (sandbox only): renewals, grace and expiry follow it.
    public var sandboxTimeScale: Double = 1
    /// How often each instance looks for renewals due; nil runs no renewal worker.
    public var renewalInterval: Duration? = .seconds(1)
    /// How notifications are delivered to the publisher's endpoints; nil runs no delivery worker.
    public var notificationDelivery: NotificationDeliveryConfiguration? = NotificationDeliveryConfiguration()
    /// The store's mail (`--smtp-url`); nil: no mail is sent (nothing is queued either).
    public var mail: MailSettings?
    /// Where spans go over OTLP (`--otlp-endpoint`); nil: no request is traced.
    public var traceExport: TraceExport?
    /// How often `/metrics`' backlog gauges are read from the database.
    public var backlogInterval: Duration = .seconds(15)

    /// How a client learns to buy here (`GET /v1/store`).
    public var storeDescription: StoreDescription {
        let channels = (environment == .sandbox ? ["sandbox"] : []) + (stripe != nil ? ["web"] : [])
            + (self.channels.play != nil ? ["play"] : []) + (appStore != nil ? ["appstore"] : [])
        return StoreDescription(environment: environment.rawValue, channels: channels, webCheckout: self.channels.checkout != nil || self.channels.stripeAPI != nil)
    }

    /// Where the store's database is.
    public var databaseLocation: DatabaseLocation {
        database ?? .sqlite(path: dataDirectory.appendingPathComponent("kiosk-server.sqlite").path)
    }

    public init(
        catalogDirectory: URL = URL(fileURLWithPath: "Catalog"),
        contentDirectory: URL = URL(fileURLWithPath: "Content"),
        dataDirectory: URL = URL(fileURLWithPath: ".kiosk-server"),
        host: String = "127.0.0.1",
        port: Int = 8080,
        environment: StoreEnvironment = .sandbox
    ) {
        self.environment = environment
        self.catalogDirectory = catalogDirectory
        self.contentDirectory = contentDirectory
        self.dataDirectory = dataDirectory
        self.host = host
        self.port = port
    }
}

/// How `GET /v1/content/{id}` hands over the bytes once the receipt is checked.
public enum ContentDelivery: Sendable, Equatable {
    /// Kiosk sends the archive itself, with ranges.
    case stream
    /// Kiosk answers with `X-Accel-Redirect: <internalPrefix><sha256>.<ext>`, and the nginx in
    /// front of it serves that file from an internal location (sendfile, ranges, If-Range).
    case xAccel(internalPrefix: String)
    /// Kiosk answers 307 with a URL in nginx's `secure_link` form, good for `lifetime` seconds:
    /// `<baseURL><sha256>.<ext>?md5=<md5>&expires=<unix time>`, where md5 is the base64url MD5 of
    /// `"<expires><uri path> <secret>"`. Any nginx edge or CDN with the secret checks it alone.
    case signedRedirect(baseURL: String, secret: String, lifetime: Int)
}
