import Foundation
import JWTKit
import KioskCore
import KioskTransfer

/// A Google Cloud service account's key file (`--play-service-account`), as the Cloud console
/// downloads it: the account's email, its RSA key and the address that exchanges an assertion
/// for an access token. The key is never logged or shown; this value's description leaves it out.
public struct PlayServiceAccount: Sendable, CustomStringConvertible {
    public let clientEmail: String
    let privateKeyId: String?
    let tokenURI: String
    let key: Insecure.RSA.PrivateKey

    /// - Throws: ``StoreError`` `invalid_request` naming what the file lacks.
    public init(json: Data) throws {
        struct File: Decodable {
            var type: String?
            var client_email: String?
            var private_key: String?
            var private_key_id: String?
            var token_uri: String?
        }
        guard let file = try? JSONDecoder().decode(File.self, from: json) else {
            throw StoreError.invalidRequest("the Play service account file is not a service account's JSON key (download one in the Google Cloud console, IAM, Service accounts, Keys)")
        }
        guard file.type == nil || file.type == "service_account", let email = file.client_email, !email.isEmpty,
              let pem = file.private_key, let tokenURI = file.token_uri, let url = URL(string: tokenURI), ["http", "https"].contains(url.scheme ?? "") else {
            throw StoreError.invalidRequest("the Play service account file needs type service_account, client_email, private_key and token_uri")
        }
        guard let key = try? Insecure.RSA.PrivateKey(pem: pem) else {
            throw StoreError.invalidRequest("the Play service account's private_key is not an RSA key in PEM")
        }
        clientEmail = email
        privateKeyId = file.private_key_id
        self.tokenURI = tokenURI
        self.key = key
    }

    public var description: String { "PlayServiceAccount(\(clientEmail), key not shown)" }
}

/// A subscription as the Android Publisher API's `purchases.subscriptionsv2.get` answers it: the
/// fields Kiosk reads (https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2).
public struct PlaySubscriptionPurchase: Decodable, Sendable, Equatable {
    /// `SUBSCRIPTION_STATE_ACTIVE`, `_CANCELED`, `_IN_GRACE_PERIOD`, `_ON_HOLD`, `_PAUSED`, `_EXPIRED`, `_PENDING`, …
    public var subscriptionState: String?
    public var startTime: String?
    public var lineItems: [LineItem]?

    public struct LineItem: Decodable, Sendable, Equatable {
        public var expiryTime: String?
        public var autoRenewingPlan: AutoRenewingPlan?
    }

    public struct AutoRenewingPlan: Decodable, Sendable, Equatable {
        public var autoRenewEnabled: Bool?
    }

    /// The end of what is paid for: the latest expiry of its line items (one outside 2000 to 2200
    /// is none Google sends, and is not read).
    public var expiry: Date? { (lineItems ?? []).compactMap { $0.expiryTime.flatMap(Self.date) }.filter(Self.plausible).max() }
    public var started: Date? { startTime.flatMap(Self.date).flatMap { Self.plausible($0) ? $0 : nil } }

    /// Within the dates a channel's period may take (``StripeEvent/StripeObject/earliest``, ``StripeEvent/StripeObject/latest``).
    static func plausible(_ date: Date) -> Bool {
        let seconds = date.timeIntervalSince1970
        return seconds >= Double(StripeEvent.StripeObject.earliest) && seconds <= Double(StripeEvent.StripeObject.latest)
    }
    /// Whether it renews at the expiry (absent: it does not say; Kiosk keeps what it had).
    public var autoRenewing: Bool? { lineItems?.lazy.compactMap { $0.autoRenewingPlan?.autoRenewEnabled }.first }

    /// RFC 3339, with or without fractions of a second, as Google writes times.
    static func date(_ text: String) -> Date? {
        let whole = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text) ?? whole.date(from: text)
    }
}

/// Google's Android Publisher API as Kiosk calls it: a subscription's state, read with an access
/// token the service account's signed assertion (an RS256 JWT, RFC 7523) is exchanged for at its
/// `token_uri`. The token is kept until a minute before it expires, on a monotonic clock, and
/// asked again when the API refuses it. Play's notifications carry no dates, so every one of a
/// subscription's is followed by this read (``PlayChannel``).
public actor PlayDeveloperAPI {
    /// `https://androidpublisher.googleapis.com`, or a stand-in's address in tests (`--play-api-url`).
    public let baseURL: String
    let account: PlayServiceAccount
    let packageName: String
    private var token: (value: String, until: ContinuousClock.Instant)?

    static let scope = "https://www.googleapis.com/auth/androidpublisher"

    /// - Throws: ``StoreError`` `invalid_request` for a base URL that is not http(s).
    public init(account: PlayServiceAccount, packageName: String, baseURL: String = "https://androidpublisher.googleapis.com") throws {
        guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw StoreError.invalidRequest("the Play API URL \(baseURL.prefix(200)) is not an http(s) URL")
        }
        self.account = account
        self.packageName = packageName
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
    }

    /// `purchases.subscriptionsv2.get` of `purchaseToken`.
    /// - Throws: ``StoreError`` `play_unknown_purchase` when Google knows no such purchase (404 or
    ///   410); `payment_service` when it could not be reached, refused the service account, or
    ///   answered something else (try again: nothing was decided).
    public func subscription(_ purchaseToken: String) async throws -> PlaySubscriptionPurchase {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let path = "/androidpublisher/v3/applications/\(packageName.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
            + "/purchases/subscriptionsv2/tokens/\(purchaseToken.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
        for attempt in 0..<2 {
            let bearer = try await accessToken(renew: attempt > 0)
            let response = try await send(HTTPRequest(method: "GET", url: baseURL + path, headers: [("Authorization", "Bearer \(bearer)")],
                                                      timeout: 30, maxResponseBytes: 1 << 20), doing: "read the subscription")
            switch response.status {
            case 200..<300:
                guard let purchase = try? JSONDecoder().decode(PlaySubscriptionPurchase.self, from: response.body) else {
                    throw StoreError.paymentService("Google Play's answer is not a subscription purchase; nothing was decided")
                }
                return purchase
            case 401 where attempt == 0:
                token = nil
                continue
            case 404, 410:
                throw StoreError(.wrongState, code: "play_unknown_purchase", message: "Google Play knows no subscription with this purchase token for \(packageName)")
            default:
                throw StoreError.paymentService("Google Play answered HTTP \(response.status) to reading the subscription; try again in a moment", retryAfter: 10)
            }
        }
        throw StoreError.paymentService("Google Play refused the service account's access token; check --play-service-account's access in the Play Console", retryAfter: 60)
    }

    /// An access token for the Android Publisher scope, kept until a minute before it expires.
    private func accessToken(renew: Bool) async throws -> String {
        if !renew, let token, ContinuousClock.now < token.until { return token.value }
        let assertion = try await signedAssertion(now: Date())
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let response = try await send(HTTPRequest(method: "POST", url: account.tokenURI, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                  body: Data(body.utf8), timeout: 30, maxResponseBytes: 64 << 10), doing: "sign in as the service account")
        struct Granted: Decodable { var access_token: String; var expires_in: Int? }
        guard (200..<300).contains(response.status), let granted = try? JSONDecoder().decode(Granted.self, from: response.body), !granted.access_token.isEmpty else {
            throw StoreError.paymentService("Google refused the Play service account's sign-in (HTTP \(response.status)); check --play-service-account", retryAfter: 60)
        }
        let lifetime = max(0, (granted.expires_in ?? 3600) - 60)
        token = (granted.access_token, ContinuousClock.now.advanced(by: .seconds(lifetime)))
        return granted.access_token
    }

    /// The service account's assertion: RS256, issued by its email for the Android Publisher scope,
    /// to its token URI, valid an hour (Google's limit).
    func signedAssertion(now: Date) async throws -> String {
        struct Assertion: JWTPayload {
            var iss: IssuerClaim
            var scope: String
            var aud: AudienceClaim
            var iat: IssuedAtClaim
            var exp: ExpirationClaim
            func verify(using algorithm: some JWTAlgorithm) throws { try exp.verifyNotExpired() }
        }
        // Whole seconds: Google reads iat and exp as integers.
        let now = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let keys = JWTKeyCollection()
        let kid = account.privateKeyId.map { JWKIdentifier(string: $0) }
        await keys.add(rsa: account.key, digestAlgorithm: .sha256, kid: kid)
        let claims = Assertion(iss: IssuerClaim(value: account.clientEmail), scope: Self.scope, aud: AudienceClaim(value: account.tokenURI),
                               iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(3600)))
        return try await keys.sign(claims, kid: kid)
    }

    private func send(_ request: HTTPRequest, doing what: String) async throws -> HTTPResponse {
        do {
            return try await HTTPClient().send(request)
        } catch {
            throw StoreError.paymentService("Google Play could not be reached to \(what); try again in a moment", retryAfter: 10)
        }
    }
}
