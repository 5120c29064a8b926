import Foundation
import JWTKit

/// Who a store is and which keys sign its receipts: the body of `/.well-known/jwks.json`.
///
/// A standard JWKS (`keys`) with three members of Kiosk's beside it, which JOSE tooling ignores
/// (RFC 7517 §5): `issuer` and `environment`, what every receipt of this store carries in `iss`
/// and `environment`, and `retired`, the `kid`s of keys the store has retired (so a receipt
/// signed by one is told apart from a forgery). The client learns them from the same answer as
/// the keys, so they are exactly as trustworthy as the keys themselves.
public struct ReceiptKeySet: Codable, Sendable {
    /// Every key that verifies receipts now.
    public var keys: [JWK]
    /// The `iss` of this store's receipts; nil in a set from a Kiosk older than this one.
    public var issuer: String?
    /// The environment of this store's receipts; nil in a set from a Kiosk older than this one.
    public var environment: StoreEnvironment?
    /// The `kid`s of retired keys.
    public var retired: [String]

    public init(keys: [JWK], identity: StoreIdentity, retired: [String]) {
        self.keys = keys
        self.issuer = identity.issuer
        self.environment = identity.environment
        self.retired = retired
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keys = try container.decode([JWK].self, forKey: .keys)
        issuer = try container.decodeIfPresent(String.self, forKey: .issuer)
        environment = try container.decodeIfPresent(StoreEnvironment.self, forKey: .environment)
        retired = try container.decodeIfPresent([String].self, forKey: .retired) ?? []
    }

    /// The store this set names, or nil when it names none (an older server).
    public var identity: StoreIdentity? {
        guard let issuer, let environment else { return nil }
        return StoreIdentity(issuer: issuer, environment: environment)
    }
}

/// What a store writes into every receipt it signs and checks in every receipt shown to it.
public struct StoreIdentity: Sendable, Equatable {
    /// The receipts' `iss`.
    public var issuer: String
    public var environment: StoreEnvironment

    public init(issuer: String, environment: StoreEnvironment) {
        self.issuer = issuer
        self.environment = environment
    }

    /// A Kiosk store of `environment`: its issuer is `kiosk-<environment>`, as every receipt
    /// Kiosk has signed since its first one carries (so none of them stops verifying).
    public static func kiosk(_ environment: StoreEnvironment) -> StoreIdentity {
        StoreIdentity(issuer: "kiosk-\(environment.rawValue)", environment: environment)
    }
}
