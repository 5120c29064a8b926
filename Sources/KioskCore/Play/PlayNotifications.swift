import Foundation
import JWTKit

/// A Real-time developer notification as Pub/Sub pushes it: the push message, whose `data` is the
/// base64 of Play's `DeveloperNotification`.
public struct PlayPushMessage: Decodable, Sendable {
    public struct Message: Decodable, Sendable {
        public var data: String?
        public var messageId: String
    }

    public var message: Message
    public var subscription: String?

    /// Play's notification inside the message.
    public func notification() throws -> PlayDeveloperNotification {
        guard let data = message.data, let bytes = Data(base64Encoded: data) else {
            throw PlayNotificationVerifier.Refusal(code: "bad_request", reason: "the push message carries no base64 data")
        }
        do {
            return try JSONDecoder().decode(PlayDeveloperNotification.self, from: bytes)
        } catch {
            throw PlayNotificationVerifier.Refusal(code: "bad_request", reason: "the message's data is not a Play developer notification (packageName, eventTimeMillis)")
        }
    }
}

/// Play's `DeveloperNotification`: one of its kinds is set.
public struct PlayDeveloperNotification: Decodable, Sendable {
    public struct Voided: Decodable, Sendable {
        public var purchaseToken: String
        public var orderId: String?
        /// 1 a one-time product, 2 a subscription.
        public var productType: Int?
        /// 1 the whole purchase, 2 a part of a quantity.
        public var refundType: Int?
    }

    public var packageName: String
    public var eventTimeMillis: String?
    public var voidedPurchaseNotification: Voided?
    public var oneTimeProductNotification: [String: JSONValue]?
    public var subscriptionNotification: [String: JSONValue]?
    public var testNotification: [String: JSONValue]?

    /// The kind, as the operator's list says it.
    public var kind: String {
        if voidedPurchaseNotification != nil { return "voidedPurchaseNotification" }
        if oneTimeProductNotification != nil { return "oneTimeProductNotification" }
        if subscriptionNotification != nil { return "subscriptionNotification" }
        if testNotification != nil { return "testNotification" }
        return "unknown"
    }
}

/// Any JSON value, for the parts of a notification Kiosk only records.
public enum JSONValue: Decodable, Sendable, Equatable {
    case string(String), number(Double), bool(Bool), null, array([JSONValue]), object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }
}

/// Checks the `Authorization: Bearer` token Pub/Sub puts on an authenticated push: a JWT (RS256)
/// signed by one of Google's keys (a JWKS the operator configures, Google's published certs),
/// issued by Google, for the configured audience, not expired, and, when configured, for the push
/// subscription's service account. Checked with jwt-kit before the body is read.
public struct PlayNotificationVerifier: Sendable {
    public struct Refusal: Error, Equatable, CustomStringConvertible, Sendable {
        public let code: String
        public let reason: String
        public var description: String { reason }
        public init(code: String, reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    private let keys: JWTKeyCollection
    public let audience: String
    public let serviceAccount: String?

    /// - Parameters:
    ///   - jwks: Google's signing keys as a JWKS document (RSA keys with their `kid`).
    ///   - audience: the audience the push subscription's token names (its push endpoint, by default).
    ///   - serviceAccount: the push subscription's service account email, when it must be that one.
    /// - Throws: ``Refusal`` `bad_key` for a document that holds no usable key.
    public init(jwks: Data, audience: String, serviceAccount: String? = nil) async throws {
        let collection = JWTKeyCollection()
        do {
            let set = try JSONDecoder().decode(JWKS.self, from: jwks)
            guard !set.keys.isEmpty else { throw Refusal(code: "bad_key", reason: "the key set holds no key") }
            try await collection.add(jwks: set)
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal(code: "bad_key", reason: "the key set is not a JWKS document of RSA keys (Google's https://www.googleapis.com/oauth2/v3/certs)")
        }
        keys = collection
        self.audience = audience
        self.serviceAccount = serviceAccount
    }

    /// The token's claims, once its signature, issuer, audience, expiry and account hold.
    /// - Parameter authorization: the `Authorization` header's value.
    public func verify(authorization: String?, now: Date) async throws -> PushClaims {
        guard let authorization, authorization.hasPrefix("Bearer ") else {
            throw Refusal(code: "unauthorized", reason: "a Pub/Sub push carries an Authorization: Bearer token; configure the subscription's authentication")
        }
        let token = String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        let claims: PushClaims
        do {
            claims = try await keys.verify(token, as: PushClaims.self)
        } catch {
            throw Refusal(code: "unauthorized", reason: "the push's token is not signed by a configured Google key, or is malformed")
        }
        guard Self.issuers.contains(claims.iss) else {
            throw Refusal(code: "unauthorized", reason: "the push's token was issued by \(claims.iss.prefix(100)), not Google")
        }
        guard claims.aud.contains(audience) else {
            throw Refusal(code: "unauthorized", reason: "the push's token is for another audience, not \(audience)")
        }
        guard Double(claims.exp) > now.timeIntervalSince1970 else {
            throw Refusal(code: "unauthorized", reason: "the push's token has expired")
        }
        if let serviceAccount, claims.email != serviceAccount || claims.emailVerified != true {
            throw Refusal(code: "unauthorized", reason: "the push's token is not the subscription's service account's")
        }
        return claims
    }

    /// The claims of a Pub/Sub push token Kiosk reads; `verify` is left to ``PlayNotificationVerifier``
    /// (which compares them with its configuration, and the expiry with the store's clock).
    public struct PushClaims: JWTPayload, Sendable {
        public var iss: String
        public var aud: [String]
        public var exp: Int64
        public var email: String?
        public var emailVerified: Bool?

        enum CodingKeys: String, CodingKey {
            case iss, aud, exp, email
            case emailVerified = "email_verified"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            iss = try container.decode(String.self, forKey: .iss)
            // `aud` is a string or an array of strings (RFC 7519).
            if let one = try? container.decode(String.self, forKey: .aud) { aud = [one] } else { aud = try container.decode([String].self, forKey: .aud) }
            exp = try container.decode(Int64.self, forKey: .exp)
            email = try container.decodeIfPresent(String.self, forKey: .email)
            emailVerified = try container.decodeIfPresent(Bool.self, forKey: .emailVerified)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(iss, forKey: .iss)
            try container.encode(aud, forKey: .aud)
            try container.encode(exp, forKey: .exp)
            try container.encodeIfPresent(email, forKey: .email)
            try container.encodeIfPresent(emailVerified, forKey: .emailVerified)
        }

        public func verify(using algorithm: some JWTAlgorithm) async throws {}
    }
}
