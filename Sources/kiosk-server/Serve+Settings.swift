import ArgumentParser
import Foundation
import KioskTransfer
import Synchronization
import KioskCommandLine
import KioskCore
import KioskServer
import KioskStore
import Logging

// What `kiosk serve`'s flags and environment make of the store: its channels, account and
// rate-limit policies, retries and content delivery, each checked (`validate` names the flag at
// fault) before the server starts.
extension KioskServerTool.Serve {
    /// Google Play and the web shop's checkout page, as the flags name them.
    func channelSettings() async throws -> StoreChannels {
        var channels = StoreChannels()
        if let checkoutURL {
            do {
                channels.checkout = try CheckoutURLTemplate(checkoutURL)
            } catch let error as StoreError {
                throw ValidationError("--checkout-url: \(error.message)")
            }
        }
        if let stripeKey {
            do {
                channels.stripeAPI = try StripeAPI(secretKey: stripeKey, baseURL: stripeAPIURL)
            } catch let error as StoreError {
                throw ValidationError("--stripe-secret-key: \(error.message)")
            }
        }
        switch (playPackageName, playPublicKey) {
        case (nil, nil): break
        case (let name?, let file?):
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ValidationError("\(file): cannot be read; put the app's base64 licensing key from the Play Console in it")
            }
            do {
                channels.play = try PlayPurchaseVerifier(publicKey: text, packageName: name)
            } catch let refusal as PlayPurchaseVerifier.Refusal {
                throw ValidationError("\(file): \(refusal.reason)")
            }
        default:
            throw ValidationError("Google Play needs both --play-package-name and --play-public-key")
        }
        if let file = playServiceAccount {
            guard let name = playPackageName, channels.play != nil else {
                throw ValidationError("--play-service-account needs Google Play configured (--play-package-name, --play-public-key)")
            }
            guard let json = FileManager.default.contents(atPath: file) else {
                throw ValidationError("\(file): cannot be read; save the service account's JSON key (Google Cloud console, IAM, Service accounts, Keys) in it")
            }
            do {
                channels.playAPI = try PlayDeveloperAPI(account: try PlayServiceAccount(json: json), packageName: name, baseURL: playAPIURL)
            } catch let error as StoreError {
                throw ValidationError("\(file): \(error.message)")
            }
        }
        switch (playNotificationJwks, playNotificationAudience) {
        case (nil, nil): break
        case (let file?, let audience?):
            guard channels.play != nil else { throw ValidationError("--play-notification-jwks needs Google Play configured (--play-package-name, --play-public-key)") }
            guard let jwks = FileManager.default.contents(atPath: file) else {
                throw ValidationError("\(file): cannot be read; save Google's keys (https://www.googleapis.com/oauth2/v3/certs) in it")
            }
            do {
                channels.playNotifications = try await PlayNotificationVerifier(jwks: jwks, audience: audience, serviceAccount: playNotificationServiceAccount)
            } catch let refusal as PlayNotificationVerifier.Refusal {
                throw ValidationError("\(file): \(refusal.reason)")
            }
        default:
            throw ValidationError("Play notifications need both --play-notification-jwks and --play-notification-audience")
        }
        return channels
    }

    /// Stripe's webhook signing secrets: the flags', else `KIOSK_STRIPE_WEBHOOK_SECRETS`. Read here,
    /// not as the option's default, so that `--help` never prints a secret from the environment.
    var webhookSecrets: [String] {
        let given = stripeWebhookSecret.isEmpty
            ? (Self.environment("KIOSK_STRIPE_WEBHOOK_SECRETS").map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? [])
            : stripeWebhookSecret
        return given.filter { !$0.isEmpty }
    }

    /// Stripe's secret key: the flag's, else `KIOSK_STRIPE_SECRET_KEY` (never a default `--help` shows).
    var stripeKey: String? { stripeSecretKey ?? Self.environment("KIOSK_STRIPE_SECRET_KEY") }

    /// The web channel the flags name; nil without a secret.
    func stripe() throws -> StripeSignature? {
        let secrets = webhookSecrets
        guard !secrets.isEmpty else { return nil }
        guard stripeTolerance > 0 else { throw ValidationError("--stripe-tolerance must be at least 1 second, not \(stripeTolerance)") }
        return StripeSignature(secrets: secrets, tolerance: TimeInterval(stripeTolerance))
    }

    /// The real channels configured, as the start says them.
    var channels: [String] {
        (!webhookSecrets.isEmpty ? ["the web (Stripe events at /v1/stripe/webhook\(stripeKey != nil ? ", Checkout Sessions created on Stripe" : checkoutURL != nil ? ", checkout pages for kiosk buy" : ""))"] : [])
            + (playPackageName != nil ? ["Google Play (\(playPackageName ?? "")\(playNotificationJwks != nil ? ", notifications at /v1/play/notifications" : ""))"] : [])
            + (appStoreBundleId != nil ? ["the App Store (\(appStoreBundleId ?? ""))"] : [])
    }

    /// The accounts' policy the flags name.
    func accountPolicy() throws -> AccountPolicy {
        guard (1...1000).contains(maxDevices) else { throw ValidationError("--max-devices must be between 1 and 1000, not \(maxDevices)") }
        guard (4...20).contains(passwordCost) else { throw ValidationError("--password-cost must be between 4 and 20, not \(passwordCost)") }
        if environment == .production, passwordCost < 10 {
            throw ValidationError("--password-cost \(passwordCost) is for tests; a production store hashes passwords at 10 or more (default 12)")
        }
        guard (10...3600).contains(deviceCodeLifetime) else {
            throw ValidationError("--device-code-lifetime must be between 10 and 3600 seconds, not \(deviceCodeLifetime)")
        }
        var policy = AccountPolicy()
        policy.maxDevices = maxDevices
        policy.passwordCost = UInt8(passwordCost)
        policy.deviceCodeLifetime = TimeInterval(deviceCodeLifetime)
        return policy
    }

    /// The mail the flags name; nil without --smtp-url. The password comes from a file or
    /// $KIOSK_SMTP_PASSWORD, never from the command line (where `ps` shows it).
    func mailSettings() throws -> MailSettings? {
        guard let smtpURL else {
            guard mailFrom == nil, smtpUser == nil, smtpPasswordFile == nil else {
                throw ValidationError("--mail-from, --smtp-user and --smtp-password-file need --smtp-url, the server to send through")
            }
            return nil
        }
        guard let from = mailFrom, (try? EmailAddress.normalized(from)) != nil else {
            throw ValidationError("--smtp-url needs --mail-from, the address the store's mail comes from (like store@example.com)")
        }
        var password = Self.environment("KIOSK_SMTP_PASSWORD")
        if let file = smtpPasswordFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty else {
                throw ValidationError("--smtp-password-file \(file): cannot be read or is empty; put the SMTP password in it")
            }
            password = text
        }
        guard mailInterval > 0, mailRetry > 0 else { throw ValidationError("--mail-interval and --mail-retry must be more than 0 seconds") }
        let server: SMTPServer
        do {
            server = try SMTPServer(url: smtpURL, username: smtpUser, password: password)
        } catch let error as TransferError {
            throw ValidationError("--smtp-url \(error.message)")
        }
        // A free port is known only once bound: mail written before would link to port 0.
        if publicURL == nil, port == 0 {
            throw ValidationError("--smtp-url with --port 0 needs --public-url: the store's mail links to its address, which a free port does not know yet")
        }
        let base = publicURL ?? "http://\(host):\(port)"
        guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ValidationError("--public-url must be an http(s) URL like https://books.example.com, not \(base)")
        }
        var settings = MailSettings(server: server, from: from, publicURL: base)
        settings.interval = .milliseconds(Int64(mailInterval * 1000))
        settings.schedule.firstRetry = mailRetry
        return settings
    }

    /// The App Store app the flags name, with its roots read; nil without --app-store-bundle-id.
    func appStore() throws -> AppStoreSignedDataVerifier.Configuration? {
        guard let bundleId = appStoreBundleId else {
            guard appStoreRoot.isEmpty, appStoreAppId == nil, appStoreEnvironment == nil else {
                throw ValidationError("--app-store-root, --app-store-app-id and --app-store-environment need --app-store-bundle-id, the app whose proofs to take")
            }
            return nil
        }
        let roots: [AppStoreRoot]
        if appStoreRoot.isEmpty {
            roots = [try AppStoreRoot.appleRootCAG3]
        } else {
            roots = try appStoreRoot.map { path in
                guard let bytes = FileManager.default.contents(atPath: path) else {
                    throw ValidationError("--app-store-root \(path): cannot be read; give a DER certificate file such as Apple's AppleRootCA-G3.cer")
                }
                do {
                    return try AppStoreRoot(derEncoded: bytes, source: "--app-store-root \(path)")
                } catch {
                    throw ValidationError("\(error)")
                }
            }
        }
        let environment = appStoreEnvironment ?? self.environment
        if environment == .production, appStoreAppId == nil {
            throw ValidationError("--app-store-environment production needs --app-store-app-id, the app's Apple ID (App Store Connect, App Information)")
        }
        return AppStoreSignedDataVerifier.Configuration(
            bundleId: bundleId, appAppleId: appStoreAppId, environment: AppStoreEnvironment(environment), roots: roots)
    }

    /// The rate limits the flags name.
    func rateLimits() throws -> RateLimits {
        var limits = RateLimits()
        // A flag not given keeps the library's default.
        func parse(_ value: String?, _ flag: String, default: RateLimit?) throws -> RateLimit? {
            guard let value else { return `default` }
            if value == "off" { return nil }
            guard let limit = RateLimit(parsing: value) else {
                throw ValidationError("\(flag) must be N/second, N/minute, N/hour, N/day or off, not \(value)")
            }
            return limit
        }
        limits.accountsPerAddress = try parse(rateLimitAccountsPerAddress, "--rate-limit-accounts-per-address", default: limits.accountsPerAddress)
        limits.purchasesPerAddress = try parse(rateLimitPurchasesPerAddress, "--rate-limit-purchases-per-address", default: limits.purchasesPerAddress)
        limits.purchasesPerAccount = try parse(rateLimitPurchasesPerAccount, "--rate-limit-purchases-per-account", default: limits.purchasesPerAccount)
        limits.signInsPerEmail = try parse(rateLimitSignInsPerEmail, "--rate-limit-sign-ins-per-email", default: limits.signInsPerEmail)
        limits.signInsPerAddress = try parse(rateLimitSignInsPerAddress, "--rate-limit-sign-ins-per-address", default: limits.signInsPerAddress)
        limits.signInsPerEmailPerDay = try parse(rateLimitSignInsPerEmailPerDay, "--rate-limit-sign-ins-per-email-per-day", default: limits.signInsPerEmailPerDay)
        limits.trustedProxies = trustedProxy.filter { !$0.isEmpty }
        for proxy in limits.trustedProxies where RateLimits.canonical(proxy) == nil {
            throw ValidationError("--trusted-proxy \(proxy) is not an IP address; name the proxy in front of kiosk serve by its address, e.g. 127.0.0.1")
        }
        return limits
    }

    /// The delays `--notification-retry` names, or nil for the default.
    func retryDelays() throws -> [TimeInterval]? {
        guard let notificationRetry else { return nil }
        let delays = notificationRetry.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard !delays.isEmpty, delays.allSatisfy({ ($0 ?? -1) > 0 }) else {
            throw ValidationError("--notification-retry must be seconds greater than zero, comma-separated, like 5,30,120; not \(notificationRetry)")
        }
        return delays.compactMap { $0 }
    }

    /// The delivery mode the flags name, with the secure_link secret read from its file.
    func delivery() throws -> ContentDelivery {
        switch contentDelivery {
        case "x-accel":
            return .xAccel(internalPrefix: accelPrefix.hasSuffix("/") ? accelPrefix : accelPrefix + "/")
        case "signed-redirect":
            let file = secureLinkSecretFile ?? ""
            guard let secret = try? String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !secret.isEmpty else {
                throw ValidationError("\(file): cannot be read or is empty; put the secret of nginx's secure_link_md5 in it")
            }
            let base = contentURL ?? ""
            return .signedRedirect(baseURL: base.hasSuffix("/") ? base : base + "/", secret: secret, lifetime: signedURLLifetime)
        default:
            return .stream
        }
    }
}
