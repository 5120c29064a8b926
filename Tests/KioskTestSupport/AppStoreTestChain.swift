import Crypto
import Foundation
import KioskCore
import SwiftASN1
import X509

/// A root, an intermediate and a leaf made the way Apple's App Store signing chain is (P-256 keys,
/// Apple's OIDs on the intermediate and the leaf), and JWS signed with the leaf, for tests.
public struct AppStoreTestChain: Sendable {
    public struct Options: Sendable {
        public var intermediateOID = true
        public var leafOID = true
        public var validity: ClosedRange<Date> = Date(timeIntervalSinceNow: -86_400 * 30)...Date(timeIntervalSinceNow: 86_400 * 365)
        /// Signs the leaf with a key other than the intermediate's, under the intermediate's name.
        public var leafSignedByOtherKey = false
        public var rootName = "Kiosk Test Root CA"
        public init() {}
    }

    public let root: AppStoreRoot
    public let rootDER: Data
    public let x5c: [String]
    private let leafKey: P256.Signing.PrivateKey

    public init(_ options: Options = Options()) throws {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName(options.rootName); OrganizationName("Kiosk Tests") }
        let intermediateName = try DistinguishedName { CommonName("Kiosk Test Intermediate"); OrganizationName("Kiosk Tests") }
        let leafName = try DistinguishedName { CommonName("Kiosk Test StoreKit Signing"); OrganizationName("Kiosk Tests") }
        let appleNull: ArraySlice<UInt8> = [0x05, 0x00]
        let (from, until) = (options.validity.lowerBound, options.validity.upperBound)

        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: Date(timeIntervalSinceNow: -86_400 * 3650), notValidAfter: Date(timeIntervalSinceNow: 86_400 * 3650),
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
            notValidBefore: from, notValidAfter: until,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
                if options.intermediateOID {
                    Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: appleNull)
                }
            },
            issuerPrivateKey: .init(rootKey))
        let leafIssuerKey = options.leafSignedByOtherKey ? P256.Signing.PrivateKey() : intermediateKey
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: from, notValidAfter: until,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                if options.leafOID {
                    Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: appleNull)
                }
            },
            issuerPrivateKey: .init(leafIssuerKey))

        func der(_ certificate: Certificate) throws -> Data {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes)
        }
        self.rootDER = try der(root)
        self.root = try AppStoreRoot(derEncoded: rootDER)
        self.x5c = try [leaf, intermediate, root].map { try der($0).base64EncodedString() }
        self.leafKey = leafKey
    }

    /// A compact JWS of `payload` signed by the leaf, with this chain (or `x5c`) in its header.
    public func sign(_ payload: some Encodable, alg: String = "ES256", x5c: [String]? = nil) throws -> String {
        var header: [String: AnyEncodableValue] = ["alg": .string(alg)]
        let chain = x5c ?? self.x5c
        if !chain.isEmpty { header["x5c"] = .strings(chain) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let signingInput = Self.base64URL(try encoder.encode(header)) + "." + Self.base64URL(try encoder.encode(payload))
        let signature = try leafKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// A signed transaction for `productId`.
    public func transaction(
        id: String = "2000000\(Int.random(in: 100_000...999_999))", originalId: String? = nil, productId: String,
        bundleId: String = "com.example.reader", environment: String = "Sandbox", type: String = "Non-Consumable",
        purchased: Date = Date(), expires: Date? = nil, signed: Date = Date(), revoked: Date? = nil, appAccountToken: String? = nil,
        quantity: Int = 1, offer: (type: Int, discount: String?, period: String?)? = nil
    ) throws -> String {
        var transaction = AppStoreTransaction(
            transactionId: id, originalTransactionId: originalId ?? id, bundleId: bundleId, productId: productId, type: type,
            purchaseDate: Self.millis(purchased), expiresDate: expires.map(Self.millis), signedDate: Self.millis(signed),
            environment: environment, quantity: quantity, revocationDate: revoked.map(Self.millis), revocationReason: revoked == nil ? nil : 0)
        transaction.appAccountToken = appAccountToken
        (transaction.offerType, transaction.offerDiscountType, transaction.offerPeriod) = (offer?.type, offer?.discount, offer?.period)
        return try sign(transaction)
    }

    /// A notification's `signedPayload` about `signedTransaction`.
    public func notification(
        type: String, subtype: String? = nil, uuid: String = UUID().uuidString, signedTransaction: String?,
        bundleId: String = "com.example.reader", appAppleId: Int64? = nil, environment: String = "Sandbox", signed: Date = Date()
    ) throws -> String {
        try sign(AppStoreNotification(
            notificationType: type, subtype: subtype, notificationUUID: uuid, signedDate: Self.millis(signed),
            data: .init(appAppleId: appAppleId, bundleId: bundleId, environment: environment, signedTransactionInfo: signedTransaction)))
    }

    public static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// A JWS header value: a string or a list of them.
    enum AnyEncodableValue: Encodable {
        case string(String)
        case strings([String])
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let value): try container.encode(value)
            case .strings(let values): try container.encode(values)
            }
        }
    }
}
