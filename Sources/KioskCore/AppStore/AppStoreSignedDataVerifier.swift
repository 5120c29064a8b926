import Crypto
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509

/// Checks App Store signed data (StoreKit 2 transactions, renewal info, App Store Server
/// Notifications V2) offline, as Apple documents it: format; `alg` ES256 only; an `x5c` chain of
/// exactly three certificates, leaf → intermediate → a pinned root (the root the proof carries is
/// not trusted by itself), valid under RFC 5280 at the payload's `signedDate`; Apple's OIDs on the
/// intermediate and the leaf; the signature with the leaf's key; then the app (`bundleId`, and
/// `appAppleId` in production) and the environment. Each refusal is an ``AppStoreRefusal``.
///
/// Validated chains are cached (``AppStoreChainCache``), so a repeated chain costs one signature check.
public struct AppStoreSignedDataVerifier: Sendable {
    /// The app whose signed data is accepted, and what it must chain to.
    public struct Configuration: Sendable {
        public var bundleId: String
        /// The app's Apple ID; checked on notifications in production (sandbox ones carry none).
        public var appAppleId: Int64?
        public var environment: AppStoreEnvironment
        /// The roots a chain must end in; Apple Root CA - G3 by default.
        public var roots: [AppStoreRoot]
        /// The longest a validated chain is reused without being validated again.
        public var chainCacheLifetime: TimeInterval = 15 * 60
        /// The clock the chain cache reads (tests speed it up).
        public var now: @Sendable () -> Date = { Date() }

        public init(bundleId: String, appAppleId: Int64? = nil, environment: AppStoreEnvironment, roots: [AppStoreRoot]) {
            self.bundleId = bundleId
            self.appAppleId = appAppleId
            self.environment = environment
            self.roots = roots
        }
    }

    /// The Apple OID on the intermediate certificate (Apple Worldwide Developer Relations CA).
    static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// The Apple OID on the leaf certificate (Mac App Store and iTunes Store receipt signing).
    static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    public let configuration: Configuration
    private let rootStore: CertificateStore
    private let cache: AppStoreChainCache

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.rootStore = CertificateStore(configuration.roots.map(\.certificate))
        self.cache = AppStoreChainCache()
    }

    /// The verified payload of a signed transaction.
    /// - Throws: ``AppStoreRefusal``, the first check that fails.
    public func verifyTransaction(_ jws: String) async throws(AppStoreRefusal) -> AppStoreTransaction {
        let transaction = try await verify(jws, as: AppStoreTransaction.self)
        try checkApp(bundleId: transaction.bundleId, appAppleId: nil)
        try checkEnvironment(transaction.environment)
        return transaction
    }

    /// The verified payload of a subscription's signed renewal info.
    public func verifyRenewalInfo(_ jws: String) async throws(AppStoreRefusal) -> AppStoreRenewalInfo {
        let info = try await verify(jws, as: AppStoreRenewalInfo.self)
        try checkEnvironment(info.environment)
        return info
    }

    /// The verified payload of an App Store Server Notification V2 (the `signedPayload` of its body).
    /// Its signed transaction, when it has one, is left for the caller to verify with ``verifyTransaction(_:)``.
    public func verifyNotification(_ signedPayload: String) async throws(AppStoreRefusal) -> AppStoreNotification {
        let notification = try await verify(signedPayload, as: AppStoreNotification.self)
        guard let data = notification.data else {
            throw .format("the notification carries no data (app and transaction)")
        }
        try checkApp(bundleId: data.bundleId ?? "", appAppleId: data.appAppleId)
        try checkEnvironment(data.environment ?? "")
        return notification
    }

    /// The payload of a compact JWS, decoded without any check (to show what a refused proof claims).
    public static func unverifiedPayload(of jws: String) -> Data? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return Base64URL.decode(parts[1])
    }

    // MARK: Checks

    private struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    private struct SignedDate: Decodable {
        var signedDate: Int64?
    }

    private func verify<Payload: AppStoreSignedPayload>(_ jws: String, as type: Payload.Type) async throws(AppStoreRefusal) -> Payload {
        // Split on the UTF-8 bytes: this runs for every proof presented, and Foundation's string
        // searching cost more than the signature check.
        let bytes = jws.utf8
        guard let firstDot = bytes.firstIndex(of: UInt8(ascii: ".")),
              let secondDot = bytes[bytes.index(after: firstDot)...].firstIndex(of: UInt8(ascii: ".")),
              !bytes[bytes.index(after: secondDot)...].contains(UInt8(ascii: ".")),
              firstDot != bytes.startIndex, bytes.index(after: firstDot) != secondDot
        else {
            throw .format("not three dot-separated parts of a compact JWS")
        }
        let headerPart = jws[..<firstDot]
        let payloadPart = jws[jws.index(after: firstDot)..<secondDot]
        let signaturePart = jws[jws.index(after: secondDot)...]
        let now = configuration.now()

        // The protected header carries `alg` and the certificates' DER bytes and nothing else a
        // check reads: a header seen before, byte for byte, names a chain validated before.
        let headerKey = String(headerPart)
        let cached = cache.entry(for: headerKey, now: now)
        var x5c: [String] = []
        if cached == nil {
            guard let headerData = Base64URL.decode(headerPart), let header = try? JSONDecoder().decode(Header.self, from: headerData) else {
                throw .format("the header is not base64url JSON")
            }
            guard header.alg == "ES256" else { throw .algorithm(header.alg ?? "") }
            guard let chain = header.x5c, !chain.isEmpty else { throw .chain("the header carries no x5c certificate chain") }
            guard chain.count == 3 else { throw .chain("x5c has \(chain.count) certificates, not the 3 of leaf, intermediate and root") }
            x5c = chain
        }
        guard let payloadData = Base64URL.decode(payloadPart) else { throw .format("the payload is not base64url") }
        // Decoded once, before the signature is checked, for its signedDate; nothing of it is
        // trusted or returned unless the signature verifies.
        let payload: Payload
        do {
            payload = try JSONDecoder().decode(Payload.self, from: payloadData)
        } catch {
            guard (try? JSONDecoder().decode(SignedDate.self, from: payloadData))?.signedDate != nil else {
                throw .format("the payload is not JSON with a signedDate")
            }
            throw .format("the payload lacks a field Kiosk needs (\(Self.describe(error)))")
        }
        let signedDate = Date(timeIntervalSince1970: Double(payload.signedDate) / 1000)

        let chain: AppStoreChainCache.Entry
        if let cached {
            chain = cached
        } else {
            chain = try await validatedChain(x5c, at: signedDate, now: now)
            cache.store(chain, for: headerKey, now: now)
        }
        guard chain.validFrom <= signedDate, signedDate <= chain.validUntil else {
            throw .expired("signed at \(Self.iso(signedDate)), outside \(Self.iso(chain.validFrom)) to \(Self.iso(chain.validUntil))")
        }
        guard let signature = Base64URL.decode(signaturePart), let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
            throw .signature
        }
        guard chain.leafKey.isValidSignature(ecdsa, for: Data(bytes[..<secondDot])) else { throw .signature }
        return payload
    }

    /// The leaf's key and the chain's validity span, validated now at `signedDate`.
    private func validatedChain(_ x5c: [String], at signedDate: Date, now: Date) async throws(AppStoreRefusal) -> AppStoreChainCache.Entry {
        var certificates: [Certificate] = []
        for (index, base64) in x5c.enumerated() {
            guard let der = Data(base64Encoded: base64), let certificate = try? Certificate(derEncoded: Array(der)) else {
                throw .chain("x5c certificate \(index + 1) is not a base64 DER certificate")
            }
            certificates.append(certificate)
        }
        let (leaf, intermediate) = (certificates[0], certificates[1])
        guard intermediate.extensions[oid: Self.intermediateOID] != nil else {
            throw .oid("the intermediate certificate lacks Apple's OID 1.2.840.113635.100.6.2.1")
        }
        guard leaf.extensions[oid: Self.leafOID] != nil else {
            throw .oid("the leaf certificate lacks Apple's OID 1.2.840.113635.100.6.11.1")
        }
        for (name, certificate) in [("leaf", leaf), ("intermediate", intermediate)]
        where !(certificate.notValidBefore...certificate.notValidAfter).contains(signedDate) {
            throw .expired("the \(name) certificate is valid from \(Self.iso(certificate.notValidBefore)) to \(Self.iso(certificate.notValidAfter)), and the payload was signed at \(Self.iso(signedDate))")
        }
        var verifier = Verifier(rootCertificates: rootStore) {
            RFC5280Policy(fixedExpiryValidationTime: signedDate)
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        guard case .validCertificate(let validated) = result else {
            throw .chain("the leaf and intermediate do not chain to a pinned root (\(configuration.roots.map(\.subject).joined(separator: "; ")))")
        }
        guard validated.count == 3, validated[1] == intermediate, let root = validated.last else {
            throw .chain("the chain does not run leaf → intermediate → pinned root")
        }
        guard let leafKey = P256.Signing.PublicKey(leaf.publicKey) else {
            throw .chain("the leaf certificate's key is not a P-256 key, which ES256 needs")
        }
        let validFrom = max(leaf.notValidBefore, intermediate.notValidBefore, root.notValidBefore)
        let validUntil = min(leaf.notValidAfter, intermediate.notValidAfter, root.notValidAfter)
        return AppStoreChainCache.Entry(
            leafKey: leafKey, validFrom: validFrom, validUntil: validUntil,
            cachedUntil: min(validUntil, now.addingTimeInterval(configuration.chainCacheLifetime)))
    }

    private func checkApp(bundleId: String, appAppleId: Int64?) throws(AppStoreRefusal) {
        guard bundleId == configuration.bundleId else {
            throw .bundle(expected: configuration.bundleId, found: bundleId.isEmpty ? "(none)" : bundleId)
        }
        if configuration.environment == .production, let expected = configuration.appAppleId, appAppleId != expected {
            throw .bundle(expected: "\(configuration.bundleId) (app \(expected))", found: "\(bundleId) (app \(appAppleId.map(String.init) ?? "none"))")
        }
    }

    private func checkEnvironment(_ environment: String) throws(AppStoreRefusal) {
        guard environment == configuration.environment.rawValue else {
            throw .environment(expected: configuration.environment.rawValue, found: environment.isEmpty ? "(none)" : environment)
        }
    }

    /// How many validated chains are cached and still usable at `date` (now by default).
    public func cachedChainCount(at date: Date? = nil) -> Int {
        cache.count(at: date ?? configuration.now())
    }

    private static func iso(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .keyNotFound(let key, _): return "no \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return context.codingPath.map(\.stringValue).joined(separator: ".")
        @unknown default: return "\(error)"
        }
    }
}

/// A payload of App Store signed data: every kind carries the date it was signed.
protocol AppStoreSignedPayload: Decodable {
    var signedDate: Int64 { get }
}

extension AppStoreTransaction: AppStoreSignedPayload {}
extension AppStoreNotification: AppStoreSignedPayload {}
extension AppStoreRenewalInfo: AppStoreSignedPayload {}

/// base64url without padding, as JWS uses it.
enum Base64URL {
    /// The 6-bit value of each base64url character; 0xFF for anything else.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    /// The bytes of base64url `text` (padding allowed, nothing else), decoded on its UTF-8 bytes:
    /// Foundation's string replacing cost more than a signature check per proof.
    static func decode(_ text: Substring) -> Data? {
        var utf8 = text.utf8[...]
        while utf8.last == UInt8(ascii: "=") { utf8 = utf8.dropLast() }
        guard utf8.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(utf8.count * 3 / 4)
        let valid = values.withUnsafeBufferPointer { table in
            var accumulator: UInt32 = 0
            var bits = 0
            for character in utf8 {
                let value = table[Int(character)]
                guard value != 0xFF else { return false }
                accumulator = (accumulator << 6) | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
            return true
        }
        return valid ? Data(output) : nil
    }

    static func encode(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
