import ArgumentParser
import Foundation
import Synchronization
import KioskCommandLine
import KioskCore
import KioskServer
import KioskStore
import Logging

extension KioskServerTool {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the store's server over a catalog and its content.",
            discussion: """
                Prints `listening on http://HOST:PORT` once it accepts connections. SIGHUP reloads the \
                catalog (a bad one is logged and the last good one keeps serving); SIGINT or SIGTERM stop \
                it gracefully.

                Example: kiosk serve --catalog Catalog --content Content --port 0
                """
        )

        // Every flag can also be set by a KIOSK_* variable; the flag wins.
        @Option(help: ArgumentHelp("The folder of catalog .json files ($KIOSK_CATALOG).", valueName: "dir"))
        var catalog = Self.environment("KIOSK_CATALOG") ?? "Catalog"

        @Option(help: ArgumentHelp("The folder of content folders and archives ($KIOSK_CONTENT).", valueName: "dir"))
        var content = Self.environment("KIOSK_CONTENT") ?? "Content"

        @Option(help: ArgumentHelp("Where the server keeps packed archives, keys and its database ($KIOSK_DATA).", valueName: "dir"))
        var data = Self.environment("KIOSK_DATA") ?? ".kiosk-server"

        @Option(help: "The address to listen on ($KIOSK_HOST).")
        var host = Self.environment("KIOSK_HOST") ?? "127.0.0.1"

        @Option(help: "The port to listen on; 0 picks a free one ($KIOSK_PORT).")
        var port = Self.environment("KIOSK_PORT").flatMap(Int.init) ?? 8080

        @Option(help: "Which receipts this store signs and honours: sandbox or production ($KIOSK_ENVIRONMENT).")
        var environment = Self.environment("KIOSK_ENVIRONMENT").flatMap(StoreEnvironment.init(rawValue:)) ?? .sandbox

        @Option(help: ArgumentHelp("Serve /metrics on this port of --metrics-host only, not on the main address ($KIOSK_METRICS_PORT).", valueName: "port"))
        var metricsPort = Self.environment("KIOSK_METRICS_PORT").flatMap(Int.init)

        @Option(help: "The address of --metrics-port ($KIOSK_METRICS_HOST).")
        var metricsHost = Self.environment("KIOSK_METRICS_HOST") ?? "127.0.0.1"

        @Option(help: ArgumentHelp("Send traces (each request, its database work, each notification's delivery) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 ($KIOSK_OTLP_ENDPOINT).", valueName: "url"))
        var otlpEndpoint = Self.environment("KIOSK_OTLP_ENDPOINT")

        @Option(help: ArgumentHelp("Serve the publisher's console (a web page; the admin token logs in) on this port of --console-host ($KIOSK_CONSOLE_PORT).", valueName: "port"))
        var consolePort = Self.environment("KIOSK_CONSOLE_PORT").flatMap(Int.init)

        @Option(help: "The address of --console-port ($KIOSK_CONSOLE_HOST); keep it private, like --metrics-host.")
        var consoleHost = Self.environment("KIOSK_CONSOLE_HOST") ?? "127.0.0.1"

        @Option(help: "Seconds a connection may take to send a whole request before it is closed ($KIOSK_REQUEST_TIMEOUT).")
        var requestTimeout = Self.environment("KIOSK_REQUEST_TIMEOUT").flatMap(Int.init) ?? 30

        @OptionGroup var store: StoreDatabaseOptions

        @Option(help: ArgumentHelp("Serve a folder made by kiosk publish as it is, instead of packing --catalog and --content ($KIOSK_PUBLISHED).", valueName: "dir"))
        var published = Self.environment("KIOSK_PUBLISHED")

        @Option(help: ArgumentHelp("Who sends content bytes: stream (Kiosk), x-accel (the nginx in front, via X-Accel-Redirect) or signed-redirect (a secure_link URL for nginx or a CDN) ($KIOSK_CONTENT_DELIVERY).", valueName: "mode"))
        var contentDelivery = Self.environment("KIOSK_CONTENT_DELIVERY") ?? "stream"

        @Option(help: ArgumentHelp("x-accel: the internal nginx location the archives are under ($KIOSK_ACCEL_PREFIX).", valueName: "path"))
        var accelPrefix = Self.environment("KIOSK_ACCEL_PREFIX") ?? "/_kiosk/archives/"

        @Option(help: ArgumentHelp("signed-redirect: the URL the archives are under at the edge, e.g. https://cdn.example.com/archives/ ($KIOSK_CONTENT_URL).", valueName: "url"))
        var contentURL = Self.environment("KIOSK_CONTENT_URL")

        @Option(help: ArgumentHelp("signed-redirect: a file holding the secret shared with nginx's secure_link_md5 ($KIOSK_SECURE_LINK_SECRET_FILE).", valueName: "file"))
        var secureLinkSecretFile = Self.environment("KIOSK_SECURE_LINK_SECRET_FILE")

        @Option(help: "signed-redirect: seconds a signed URL stays valid ($KIOSK_SIGNED_URL_LIFETIME).")
        var signedURLLifetime = Self.environment("KIOSK_SIGNED_URL_LIFETIME").flatMap(Int.init) ?? 300

        @Option(help: ArgumentHelp("Accounts one client address may create: N/second, N/minute, N/hour or N/day (a burst of N, refilled over that time), or off; default 30/hour ($KIOSK_RATE_LIMIT_ACCOUNTS_PER_ADDRESS).", valueName: "rate"))
        var rateLimitAccountsPerAddress: String? = Self.environment("KIOSK_RATE_LIMIT_ACCOUNTS_PER_ADDRESS")

        @Option(help: ArgumentHelp("Purchases and redemptions from one client address, as above; default 600/minute ($KIOSK_RATE_LIMIT_PURCHASES_PER_ADDRESS).", valueName: "rate"))
        var rateLimitPurchasesPerAddress: String? = Self.environment("KIOSK_RATE_LIMIT_PURCHASES_PER_ADDRESS")

        @Option(help: ArgumentHelp("Purchases and redemptions of one account, as above; default 120/minute ($KIOSK_RATE_LIMIT_PURCHASES_PER_ACCOUNT).", valueName: "rate"))
        var rateLimitPurchasesPerAccount: String? = Self.environment("KIOSK_RATE_LIMIT_PURCHASES_PER_ACCOUNT")

        @Option(help: ArgumentHelp("The web channel: a Stripe webhook endpoint's signing secret (whsec_…); repeat while rotating one ($KIOSK_STRIPE_WEBHOOK_SECRETS, comma-separated).", valueName: "secret"))
        var stripeWebhookSecret: [String] = []

        @Option(help: ArgumentHelp("Seconds a Stripe event's signature may be old (or ahead) before it is refused as a replay ($KIOSK_STRIPE_TOLERANCE).", valueName: "seconds"))
        var stripeTolerance = Self.environment("KIOSK_STRIPE_TOLERANCE").flatMap(Int.init) ?? 300

        @Option(help: ArgumentHelp("The web shop's checkout page kiosk buy sends readers to, with {product}, {account}, {intent} and {quantity} filled in ($KIOSK_CHECKOUT_URL).", valueName: "url"))
        var checkoutURL = Self.environment("KIOSK_CHECKOUT_URL")

        @Option(help: ArgumentHelp("The web channel: Kiosk creates Stripe's Checkout Sessions with this secret key (sk_… or a restricted rk_…), so the shop and kiosk buy need no shop of the publisher's; prefer the variable, which ps does not show ($KIOSK_STRIPE_SECRET_KEY).", valueName: "key"))
        var stripeSecretKey: String?

        @Option(name: .customLong("stripe-api-url"), help: ArgumentHelp("Where Stripe's API is (default https://api.stripe.com; a stand-in's address in tests) ($KIOSK_STRIPE_API_URL).", valueName: "url"))
        var stripeAPIURL = Self.environment("KIOSK_STRIPE_API_URL") ?? "https://api.stripe.com"

        @Option(help: ArgumentHelp("Google Play: the Android app's package name, e.g. com.example.kiosk ($KIOSK_PLAY_PACKAGE_NAME).", valueName: "name"))
        var playPackageName = Self.environment("KIOSK_PLAY_PACKAGE_NAME")

        @Option(help: ArgumentHelp("Google Play: a file holding the app's base64 licensing key from the Play Console (Monetization setup) ($KIOSK_PLAY_PUBLIC_KEY_FILE).", valueName: "file"))
        var playPublicKey = Self.environment("KIOSK_PLAY_PUBLIC_KEY_FILE")

        @Option(help: ArgumentHelp("Google Play subscriptions: a service account's JSON key file with access to the app in the Play Console; Kiosk reads each subscription's state from the Android Publisher API with it ($KIOSK_PLAY_SERVICE_ACCOUNT).", valueName: "file"))
        var playServiceAccount = Self.environment("KIOSK_PLAY_SERVICE_ACCOUNT")

        @Option(name: .customLong("play-api-url"), help: ArgumentHelp("Where the Android Publisher API is (default https://androidpublisher.googleapis.com; a stand-in's address in tests) ($KIOSK_PLAY_API_URL).", valueName: "url"))
        var playAPIURL = Self.environment("KIOSK_PLAY_API_URL") ?? "https://androidpublisher.googleapis.com"

        @Option(help: ArgumentHelp("Google Play notifications: a JWKS file of the keys Pub/Sub's push tokens are signed with (Google's oauth2/v3/certs) ($KIOSK_PLAY_NOTIFICATION_JWKS).", valueName: "file"))
        var playNotificationJwks = Self.environment("KIOSK_PLAY_NOTIFICATION_JWKS")

        @Option(help: ArgumentHelp("Google Play notifications: the audience the push subscription's token names ($KIOSK_PLAY_NOTIFICATION_AUDIENCE).", valueName: "audience"))
        var playNotificationAudience = Self.environment("KIOSK_PLAY_NOTIFICATION_AUDIENCE")

        @Option(help: ArgumentHelp("Google Play notifications: the push subscription's service account, when its tokens must be that account's ($KIOSK_PLAY_NOTIFICATION_SERVICE_ACCOUNT).", valueName: "email"))
        var playNotificationServiceAccount = Self.environment("KIOSK_PLAY_NOTIFICATION_SERVICE_ACCOUNT")

        @Option(help: ArgumentHelp("Sign-in attempts naming one email, as above; default 10 at once, then one each 90 s ($KIOSK_RATE_LIMIT_SIGN_INS_PER_EMAIL).", valueName: "rate"))
        var rateLimitSignInsPerEmail: String? = Self.environment("KIOSK_RATE_LIMIT_SIGN_INS_PER_EMAIL")

        @Option(help: ArgumentHelp("Sign-in attempts naming one email in a day, as above; default 100/day, NIST SP 800-63B's ceiling ($KIOSK_RATE_LIMIT_SIGN_INS_PER_EMAIL_PER_DAY).", valueName: "rate"))
        var rateLimitSignInsPerEmailPerDay: String? = Self.environment("KIOSK_RATE_LIMIT_SIGN_INS_PER_EMAIL_PER_DAY")

        @Option(help: ArgumentHelp("Sign-in attempts and device codes from one client address, as above; default 60/hour ($KIOSK_RATE_LIMIT_SIGN_INS_PER_ADDRESS).", valueName: "rate"))
        var rateLimitSignInsPerAddress: String? = Self.environment("KIOSK_RATE_LIMIT_SIGN_INS_PER_ADDRESS")

        @Option(help: ArgumentHelp("Devices one account may have signed in at once ($KIOSK_MAX_DEVICES).", valueName: "n"))
        var maxDevices = Self.environment("KIOSK_MAX_DEVICES").flatMap(Int.init) ?? 10

        @Option(help: ArgumentHelp("bcrypt's cost (log2 rounds) for new passwords: 12 takes about 0.25 s a hash here; at least 10 in production ($KIOSK_PASSWORD_COST).", valueName: "n"))
        var passwordCost = Self.environment("KIOSK_PASSWORD_COST").flatMap(Int.init) ?? 12

        @Option(help: ArgumentHelp("Seconds a device code (kiosk login --code) waits for its approval ($KIOSK_DEVICE_CODE_LIFETIME).", valueName: "seconds"))
        var deviceCodeLifetime = Self.environment("KIOSK_DEVICE_CODE_LIFETIME").flatMap(Int.init) ?? 600

        @Option(help: ArgumentHelp("A proxy (its IP address) whose X-Forwarded-For names the client, for the rate limits; repeat for several ($KIOSK_TRUSTED_PROXIES, comma-separated).", valueName: "address"))
        var trustedProxy: [String] = Self.environment("KIOSK_TRUSTED_PROXIES").map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []

        @Option(help: ArgumentHelp("Take App Store signed transactions of this iOS app as proof of purchase (Authorization: AppStore <JWS>), and its Server Notifications at /v1/appstore/notifications ($KIOSK_APP_STORE_BUNDLE_ID).", valueName: "bundle-id"))
        var appStoreBundleId = Self.environment("KIOSK_APP_STORE_BUNDLE_ID")

        @Option(help: ArgumentHelp("The app's Apple ID, which production notifications must name ($KIOSK_APP_STORE_APP_ID).", valueName: "n"))
        var appStoreAppId = Self.environment("KIOSK_APP_STORE_APP_ID").flatMap(Int64.init)

        @Option(help: ArgumentHelp("A root certificate (DER) App Store chains must end in, instead of Apple Root CA - G3; repeat for several.", valueName: "cert.der"))
        var appStoreRoot: [String] = []

        @Option(help: ArgumentHelp("Which App Store environment's proofs to take: sandbox or production; default the store's --environment ($KIOSK_APP_STORE_ENVIRONMENT).", valueName: "environment"))
        var appStoreEnvironment = Self.environment("KIOSK_APP_STORE_ENVIRONMENT").flatMap(StoreEnvironment.init(rawValue:))

        @Option(help: ArgumentHelp("Sandbox only: seconds of store time per real second, so renewals, grace and expiry come sooner (8640: a day in 10 s, a month in 5 min) ($KIOSK_SANDBOX_TIME_SCALE).", valueName: "N"))
        var sandboxTimeScale = Self.environment("KIOSK_SANDBOX_TIME_SCALE").flatMap(Double.init) ?? 1

        @Option(help: ArgumentHelp("Seconds between a notification's failed delivery attempts, comma-separated, the last repeating; default 5,30,120,600,3600,21600 ($KIOSK_NOTIFICATION_RETRY).", valueName: "seconds"))
        var notificationRetry = Self.environment("KIOSK_NOTIFICATION_RETRY")

        @Option(help: ArgumentHelp("Seconds between two passes of the renewal worker; 0 runs none on this instance ($KIOSK_RENEWAL_INTERVAL).", valueName: "seconds"))
        var renewalInterval = Self.environment("KIOSK_RENEWAL_INTERVAL").flatMap(Double.init) ?? 1

        @Option(help: ArgumentHelp("Seconds between two passes of the notification delivery worker; 0 runs none on this instance ($KIOSK_NOTIFICATION_INTERVAL).", valueName: "seconds"))
        var notificationInterval = Self.environment("KIOSK_NOTIFICATION_INTERVAL").flatMap(Double.init) ?? 0.5

        @Flag(help: "The web channel: ask Stripe to compute the tax on each Checkout Session (automatic_tax, prices holding it) and record the tax it charged, instead of --tax-rates ($KIOSK_STRIPE_AUTOMATIC_TAX=1).")
        var stripeAutomaticTax = Self.environment("KIOSK_STRIPE_AUTOMATIC_TAX") == "1"

        @Option(help: ArgumentHelp("A JSON file of tax rates per country and class (a sample: deploy/tax/eu-epublications.json); each sale records its country, rate and tax ($KIOSK_TAX_RATES).", valueName: "file"))
        var taxRates: String? = Self.environment("KIOSK_TAX_RATES")

        @Option(help: ArgumentHelp("Send the store's mail (reset links, address confirmations, receipts, reminders, new issues) through this SMTP server: smtp://HOST[:PORT] (STARTTLS) or smtps://HOST[:PORT] ($KIOSK_SMTP_URL).", valueName: "url"))
        var smtpURL = Self.environment("KIOSK_SMTP_URL")

        @Option(help: ArgumentHelp("The SMTP user ($KIOSK_SMTP_USER).", valueName: "user"))
        var smtpUser = Self.environment("KIOSK_SMTP_USER")

        @Option(help: ArgumentHelp("A file holding the SMTP password (else $KIOSK_SMTP_PASSWORD); never on the command line.", valueName: "file"))
        var smtpPasswordFile = Self.environment("KIOSK_SMTP_PASSWORD_FILE")

        @Option(help: ArgumentHelp("The address the store's mail comes from, e.g. store@example.com ($KIOSK_MAIL_FROM).", valueName: "address"))
        var mailFrom = Self.environment("KIOSK_MAIL_FROM")

        @Option(help: ArgumentHelp("The store's address as readers reach it, for the links its mail carries, e.g. https://books.example.com (default: http://HOST:PORT) ($KIOSK_PUBLIC_URL).", valueName: "url"))
        var publicURL = Self.environment("KIOSK_PUBLIC_URL")

        @Option(help: ArgumentHelp("Seconds between two passes of the mail worker ($KIOSK_MAIL_INTERVAL).", valueName: "seconds"))
        var mailInterval = Self.environment("KIOSK_MAIL_INTERVAL").flatMap(Double.init) ?? 5

        @Option(help: ArgumentHelp("Seconds before a message that could not be sent is tried again, doubling up to an hour ($KIOSK_MAIL_RETRY).", valueName: "seconds"))
        var mailRetry = Self.environment("KIOSK_MAIL_RETRY").flatMap(Double.init) ?? 30

        static func environment(_ name: String) -> String? {
            ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }

        /// The variables read as a number or a closed set, and what each must be: one that is set
        /// but cannot be read is refused, never replaced by the default (a mistyped
        /// KIOSK_ENVIRONMENT=Production must not start a sandbox store that takes pretend payments).
        static let typedVariables: [(name: String, expected: String, valid: @Sendable (String) -> Bool)] = [
            ("KIOSK_ENVIRONMENT", "sandbox or production", { StoreEnvironment(rawValue: $0) != nil }),
            ("KIOSK_APP_STORE_ENVIRONMENT", "sandbox or production", { StoreEnvironment(rawValue: $0) != nil }),
            ("KIOSK_PORT", "a whole number", { Int($0) != nil }),
            ("KIOSK_METRICS_PORT", "a whole number", { Int($0) != nil }),
            ("KIOSK_CONSOLE_PORT", "a whole number", { Int($0) != nil }),
            ("KIOSK_REQUEST_TIMEOUT", "a whole number of seconds", { Int($0) != nil }),
            ("KIOSK_SIGNED_URL_LIFETIME", "a whole number of seconds", { Int($0) != nil }),
            ("KIOSK_APP_STORE_APP_ID", "a whole number", { Int($0) != nil }),
            ("KIOSK_SANDBOX_TIME_SCALE", "a number", { Double($0) != nil }),
            ("KIOSK_RENEWAL_INTERVAL", "a number of seconds", { Double($0) != nil }),
            ("KIOSK_NOTIFICATION_INTERVAL", "a number of seconds", { Double($0) != nil }),
            ("KIOSK_MAX_DEVICES", "a whole number", { Int($0) != nil }),
            ("KIOSK_STRIPE_TOLERANCE", "a whole number of seconds", { Int($0) != nil }),
            ("KIOSK_PASSWORD_COST", "a whole number", { Int($0) != nil }),
            ("KIOSK_DEVICE_CODE_LIFETIME", "a whole number of seconds", { Int($0) != nil }),
        ]

        func validate() throws {
            _ = try mailSettings()
            if let otlpEndpoint, case .failure(let problem) = TraceExport.tracesURL(otlpEndpoint) { throw ValidationError(problem.message) }
            for variable in Self.typedVariables {
                if let value = Self.environment(variable.name), !variable.valid(value) {
                    throw ValidationError("$\(variable.name) is \"\(value.prefix(64))\", which is not \(variable.expected); fix or unset it")
                }
            }
            guard (0...65535).contains(port) else {
                throw ValidationError("--port must be between 0 and 65535, not \(port)")
            }
            if let metricsPort, !(0...65535).contains(metricsPort) {
                throw ValidationError("--metrics-port must be between 0 and 65535, not \(metricsPort)")
            }
            if let consolePort, !(0...65535).contains(consolePort) {
                throw ValidationError("--console-port must be between 0 and 65535, not \(consolePort)")
            }
            if let consolePort, consolePort != 0, consolePort == port, consoleHost == host {
                throw ValidationError("--console-port must not be the store's --port: the console is never served on the public address")
            }
            guard requestTimeout > 0 else { throw ValidationError("--request-timeout must be at least 1 second") }
            _ = try rateLimits()
            _ = try accountPolicy()
            _ = try appStore()
            _ = try stripe()
            if checkoutURL != nil, stripeKey != nil {
                throw ValidationError("give --stripe-secret-key (Kiosk creates the checkout on Stripe) or --checkout-url (the publisher's own shop creates it), not both")
            }
            if let stripeKey {
                guard !webhookSecrets.isEmpty else {
                    throw ValidationError("--stripe-secret-key needs --stripe-webhook-secret: the payments come back as Stripe's signed events")
                }
                do { _ = try StripeAPI(secretKey: stripeKey, baseURL: stripeAPIURL) } catch let error as StoreError { throw ValidationError("--stripe-secret-key: \(error.message)") }
                if environment == .production, stripeKey.hasPrefix("sk_test_") || stripeKey.hasPrefix("rk_test_") {
                    throw ValidationError("--stripe-secret-key is a test-mode key; a production store takes live payments only (sk_live_… or rk_live_…)")
                }
                // The key travels in every request: never in the clear, but to a stand-in on this machine.
                if let url = URL(string: stripeAPIURL), url.scheme?.lowercased() != "https", !["127.0.0.1", "localhost", "::1"].contains(url.host ?? "") {
                    throw ValidationError("--stripe-api-url must be https:// (the secret key goes with every request); http:// only for 127.0.0.1")
                }
            }
            if let checkoutURL {
                guard !webhookSecrets.isEmpty else {
                    throw ValidationError("--checkout-url needs --stripe-webhook-secret: the web shop's payments come back as its signed events")
                }
                do { _ = try CheckoutURLTemplate(checkoutURL) } catch let error as StoreError { throw ValidationError("--checkout-url: \(error.message)") }
            }
            if playServiceAccount != nil {
                guard playPackageName != nil else {
                    throw ValidationError("--play-service-account needs Google Play configured (--play-package-name, --play-public-key)")
                }
                // The access token travels in every request: never in the clear, but to a stand-in on this machine.
                if let url = URL(string: playAPIURL), url.scheme?.lowercased() != "https", !["127.0.0.1", "localhost", "::1"].contains(url.host ?? "") {
                    throw ValidationError("--play-api-url must be https:// (an access token goes with every request); http:// only for 127.0.0.1")
                }
            }
            if (playPackageName == nil) != (playPublicKey == nil) {
                throw ValidationError("Google Play needs both --play-package-name and --play-public-key")
            }
            if (playNotificationJwks == nil) != (playNotificationAudience == nil) {
                throw ValidationError("Play notifications need both --play-notification-jwks and --play-notification-audience")
            }
            if playPackageName?.isEmpty == true || playNotificationAudience?.isEmpty == true || playNotificationServiceAccount?.isEmpty == true {
                throw ValidationError("--play-package-name, --play-notification-audience and --play-notification-service-account cannot be empty")
            }
            if playNotificationServiceAccount != nil, playNotificationJwks == nil {
                throw ValidationError("--play-notification-service-account pins the pushes' account: give it with --play-notification-jwks and --play-notification-audience")
            }
            // Google signs an ID token for any audience a Google account asks for, so a production
            // store takes pushes only from its own subscription's service account.
            if environment == .production, playNotificationJwks != nil, playNotificationServiceAccount == nil {
                throw ValidationError("a production store takes Play notifications only from the push subscription's service account: give --play-notification-service-account")
            }
            _ = try retryDelays()
            guard renewalInterval >= 0, notificationInterval >= 0 else {
                throw ValidationError("--renewal-interval and --notification-interval must be 0 (off) or more seconds")
            }
            guard sandboxTimeScale > 0, sandboxTimeScale.isFinite else {
                throw ValidationError("--sandbox-time-scale must be a number greater than zero, not \(sandboxTimeScale)")
            }
            if environment == .production, sandboxTimeScale != 1 {
                throw ValidationError("--sandbox-time-scale is for the sandbox; a production store keeps real time")
            }
            guard ["stream", "x-accel", "signed-redirect"].contains(contentDelivery) else {
                throw ValidationError("--content-delivery must be stream, x-accel or signed-redirect, not \(contentDelivery)")
            }
            if contentDelivery == "signed-redirect" {
                guard contentURL != nil, secureLinkSecretFile != nil else {
                    throw ValidationError("--content-delivery signed-redirect needs --content-url and --secure-link-secret-file")
                }
                guard signedURLLifetime > 0 else { throw ValidationError("--signed-url-lifetime must be at least 1 second") }
            }
            if environment == .production, channels.isEmpty {
                throw ValidationError("a production store grants only for real payment and none is configured: give --stripe-webhook-secret (the web), --play-package-name with --play-public-key (Android) or --app-store-bundle-id (iOS)")
            }
        }

        func run() async throws {
            LogSetup.bootstrap()
            try await reportingErrors {
                var configuration = ServerConfiguration(
                    catalogDirectory: URL(fileURLWithPath: catalog),
                    contentDirectory: URL(fileURLWithPath: content),
                    dataDirectory: URL(fileURLWithPath: data),
                    host: host, port: port, environment: environment)
                configuration.requestHeaderTimeout = requestTimeout
                configuration.metricsHost = metricsHost
                configuration.metricsPort = metricsPort
                configuration.consoleHost = consoleHost
                configuration.consolePort = consolePort
                configuration.database = try store.location()
                configuration.publishedDirectory = published.map { URL(fileURLWithPath: $0) }
                configuration.contentDelivery = try delivery()
                configuration.rateLimits = try rateLimits()
                configuration.accounts = try accountPolicy()
                configuration.mail = try mailSettings()
                configuration.traceExport = otlpEndpoint.map(TraceExport.init(endpoint:))
                configuration.accounts.sendsMail = configuration.mail != nil
                configuration.stripe = try stripe()
                configuration.channels = try await channelSettings()
                if stripeAutomaticTax {
                    guard configuration.channels.stripeAPI != nil else { throw ValidationError("--stripe-automatic-tax asks Stripe for the tax on the sessions Kiosk creates: give --stripe-secret-key too") }
                    configuration.channels.stripeAutomaticTax = true
                }
                if let taxRates {
                    do { configuration.taxes = try TaxTable.load(URL(fileURLWithPath: taxRates)) } catch let error as TaxTableError { throw ValidationError("--tax-rates \(error.description)") }
                }
                configuration.appStore = try appStore()
                configuration.sandboxTimeScale = sandboxTimeScale
                if let delays = try retryDelays() { configuration.notificationDelivery?.retryDelays = delays }
                configuration.renewalInterval = renewalInterval > 0 ? .milliseconds(Int64(renewalInterval * 1000)) : nil
                if notificationInterval > 0 {
                    configuration.notificationDelivery?.interval = .milliseconds(Int64(notificationInterval * 1000))
                } else {
                    configuration.notificationDelivery = nil
                }
                let logger = Logger(label: "kiosk.server")
                // The catalog is read and checked before anything else is opened or bound: a bad
                // one is the one thing a failed start says. Packing waits until the port is bound.
                let catalogService = CatalogService(configuration: configuration, logger: logger)
                try await catalogService.check()
                let traceExporter = try configuration.traceExport?.bootstrap(logger: logger)
                let server = try await KioskServer(configuration: configuration, catalog: catalogService, logger: logger)
                let (host, metricsHost, consoleHost) = (host, metricsHost, consoleHost)
                // Nothing says "listening" until every listener is bound: a console port that is
                // busy stops the start with its error alone.
                let ready = StartAnnouncement(expecting: 1 + (metricsPort == nil ? 0 : 1) + (consolePort == nil ? 0 : 1))
                let environment = environment
                let services = server.makeServiceGroup(
                    onServing: { port in
                        ready.say(first: true, [
                            (FileHandle.standardOutput, "listening on http://\(host):\(port)\n"),
                            (FileHandle.standardError, Self.environmentLine(environment, channels: channels)),
                        ])
                    },
                    onMetricsListening: { port in
                        ready.say([(FileHandle.standardError, "kiosk: metrics on http://\(metricsHost):\(port)/metrics\n")])
                    },
                    onConsoleListening: { port in
                        var lines = [(FileHandle.standardError, "kiosk: console on http://\(consoleHost):\(port)/\n")]
                        if !["127.0.0.1", "::1", "localhost"].contains(consoleHost) {
                            lines.append((FileHandle.standardError, "kiosk: warning: the console is reachable from other machines over plain HTTP (--console-host \(consoleHost)); put it behind TLS or keep it on 127.0.0.1\n"))
                        }
                        ready.say(lines)
                    },
                    traceExporter: traceExporter)
                let deadline = StopDeadline(after: KioskServer.stopGrace + .seconds(10))
                defer { withExtendedLifetime(deadline) {} }
                do {
                    try await services.run()
                } catch {
                    await server.shutdown()
                    throw Self.explained(error)
                }
                await server.shutdown()
            }
        }

        /// What the environment means for a reader's purchases, said once at start.
        static func environmentLine(_ environment: StoreEnvironment, channels: [String]) -> String {
            let paid = channels.isEmpty ? "" : "; real payments through \(channels.joined(separator: " and "))"
            return switch environment {
            case .sandbox:
                "kiosk: a sandbox store: purchases are pretend (payment methods approve, decline, cancel, defer) and no money moves\(paid); --environment production sells for real\n"
            case .production:
                "kiosk: a production store: the sandbox's pretend payments and clock are refused; purchases are granted only for a real proof of payment, through \(channels.joined(separator: " and "))\n"
            }
        }

        /// A start that failed on an address, said with the flags that choose it.
        static func explained(_ error: any Error) -> any Error {
            guard let error = error as? ListenError else { return error }
            let flags = switch error.listener {
            case .store: ("--host", "--port")
            case .metrics: ("--metrics-host", "--metrics-port")
            case .console: ("--console-host", "--console-port")
            }
            let action = error.isAddressInUse
                ? "stop the other server or choose another \(flags.1)"
                : "check \(flags.0) and \(flags.1)"
            return StartFailure(message: "\(error); \(action)")
        }

        /// Why the server could not start, in one line.
        struct StartFailure: Error, CustomStringConvertible {
            var message: String
            var description: String { message }
        }
    }
}

extension StoreEnvironment: ExpressibleByArgument {}
