import Crypto
import Foundation
import KioskCore
import KioskTestSupport
import Testing

@Suite("App Store signed data verifier")
struct AppStoreSignedDataVerifierTests {
    static let bundleId = "com.example.reader"

    func verifier(for chain: AppStoreTestChain, environment: AppStoreEnvironment = .sandbox, appAppleId: Int64? = nil) -> AppStoreSignedDataVerifier {
        AppStoreSignedDataVerifier(configuration: .init(bundleId: Self.bundleId, appAppleId: appAppleId, environment: environment, roots: [chain.root]))
    }

    /// The refusal `body` throws, or nil when it succeeds.
    func refusal(_ body: () async throws -> Void) async -> AppStoreRefusal? {
        do {
            try await body()
            return nil
        } catch let refusal as AppStoreRefusal {
            return refusal
        } catch {
            Issue.record("not a refusal: \(error)")
            return nil
        }
    }

    @Test("Apple Root CA - G3 ships with the SHA-256 fingerprint Apple publishes")
    func appleRootFingerprint() throws {
        let der = try AppStoreRoot.appleRootCAG3.derEncoded()
        let fingerprint = SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(fingerprint == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79")
        #expect(try AppStoreRoot.appleRootCAG3.subject.contains("Apple Root CA - G3"))
    }

    @Test("a transaction signed by a chain to the pinned root is accepted, and its chain cached")
    func valid() async throws {
        let chain = try AppStoreTestChain()
        let verifier = verifier(for: chain)
        let jws = try chain.transaction(id: "1000", productId: "com.example.book", type: "Non-Consumable")
        let transaction = try await verifier.verifyTransaction(jws)
        #expect(transaction.transactionId == "1000")
        #expect(transaction.productId == "com.example.book")
        #expect(transaction.kind == .nonConsumable)
        // The second check of the same chain comes from the cache, and agrees.
        #expect(try await verifier.verifyTransaction(jws) == transaction)
    }

    @Test("a transaction of another app is refused: bundle")
    func wrongBundle() async throws {
        let chain = try AppStoreTestChain()
        let jws = try chain.transaction(productId: "p", bundleId: "com.other.app")
        let refused = await refusal { _ = try await verifier(for: chain).verifyTransaction(jws) }
        #expect(refused == .bundle(expected: Self.bundleId, found: "com.other.app"))
    }

    @Test("a sandbox transaction shown to a production store is refused: environment")
    func wrongEnvironment() async throws {
        let chain = try AppStoreTestChain()
        let jws = try chain.transaction(productId: "p", environment: "Sandbox")
        let refused = await refusal { _ = try await verifier(for: chain, environment: .production).verifyTransaction(jws) }
        #expect(refused == .environment(expected: "Production", found: "Sandbox"))
    }

    @Test("a notification for another app ID is refused in production: bundle")
    func wrongAppAppleId() async throws {
        let chain = try AppStoreTestChain()
        let payload = try chain.notification(type: "REFUND", signedTransaction: nil, appAppleId: 7, environment: "Production")
        let refused = await refusal { _ = try await verifier(for: chain, environment: .production, appAppleId: 8).verifyNotification(payload) }
        #expect(refused?.reason == "bundle")
        let accepted = try await verifier(for: chain, environment: .production, appAppleId: 7).verifyNotification(payload)
        #expect(accepted.notificationType == "REFUND")
    }

    @Test("an intermediate or a leaf without Apple's OID is refused: oid", arguments: [true, false])
    func missingOID(onIntermediate: Bool) async throws {
        var options = AppStoreTestChain.Options()
        if onIntermediate { options.intermediateOID = false } else { options.leafOID = false }
        let chain = try AppStoreTestChain(options)
        let refused = await refusal { _ = try await verifier(for: chain).verifyTransaction(try! chain.transaction(productId: "p")) }
        guard case .oid(let detail) = refused else {
            Issue.record("expected an OID refusal, got \(String(describing: refused))")
            return
        }
        #expect(detail.contains(onIntermediate ? "intermediate" : "leaf"))
    }

    @Test("a chain that had expired when the payload was signed is refused: expired")
    func expiredAtSignedDate() async throws {
        var options = AppStoreTestChain.Options()
        options.validity = Date(timeIntervalSinceNow: -86_400 * 400)...Date(timeIntervalSinceNow: -86_400 * 35)
        let chain = try AppStoreTestChain(options)
        let jws = try chain.transaction(productId: "p", signed: Date(timeIntervalSinceNow: -86_400 * 30))
        let refused = await refusal { _ = try await verifier(for: chain).verifyTransaction(jws) }
        #expect(refused?.reason == "expired")
        // Signed while the chain was valid, the same chain is accepted today (offline, at signedDate)…
        let cachingVerifier = verifier(for: chain)
        let earlier = try chain.transaction(productId: "p", signed: Date(timeIntervalSinceNow: -86_400 * 100))
        #expect(try await cachingVerifier.verifyTransaction(earlier).productId == "p")
        #expect(cachingVerifier.cachedChainCount() == 0, "a chain whose certificates have expired is not kept")
        // …and a payload signed after it expired is still refused.
        #expect(await refusal { _ = try await cachingVerifier.verifyTransaction(jws) }?.reason == "expired")
    }

    @Test("a cached chain still checks each payload's signedDate against the certificates' validity")
    func cachedChainChecksSignedDate() async throws {
        var options = AppStoreTestChain.Options()
        options.validity = Date(timeIntervalSinceNow: -86_400 * 10)...Date(timeIntervalSinceNow: 86_400 * 10)
        let chain = try AppStoreTestChain(options)
        let verifier = verifier(for: chain)
        _ = try await verifier.verifyTransaction(try chain.transaction(productId: "p"))
        #expect(verifier.cachedChainCount() == 1)
        let beforeValidity = try chain.transaction(productId: "p", signed: Date(timeIntervalSinceNow: -86_400 * 20))
        #expect(await refusal { _ = try await verifier.verifyTransaction(beforeValidity) }?.reason == "expired")
    }

    @Test("a chain to another root is refused: chain (the root carried in x5c is not trusted)")
    func otherRoot() async throws {
        let pinned = try AppStoreTestChain()
        var options = AppStoreTestChain.Options()
        options.rootName = "Kiosk Test Root CA"
        let other = try AppStoreTestChain(options)
        let refused = await refusal { _ = try await verifier(for: pinned).verifyTransaction(try! other.transaction(productId: "p")) }
        #expect(refused?.reason == "chain")
        // The same proof is refused against Apple's real root, the default.
        let apple = AppStoreSignedDataVerifier(configuration: .init(bundleId: Self.bundleId, environment: .sandbox, roots: [try AppStoreRoot.appleRootCAG3]))
        #expect(await refusal { _ = try await apple.verifyTransaction(try! other.transaction(productId: "p")) }?.reason == "chain")
    }

    @Test("an algorithm other than ES256 is refused: algorithm", arguments: ["none", "HS256", "ES384", "EdDSA"])
    func otherAlgorithm(alg: String) async throws {
        let chain = try AppStoreTestChain()
        let jws = try chain.sign(AppStoreTransaction(transactionId: "1", originalTransactionId: "1", bundleId: Self.bundleId, productId: "p", type: nil, purchaseDate: nil, expiresDate: nil, signedDate: AppStoreTestChain.millis(Date()), environment: "Sandbox"), alg: alg)
        #expect(await refusal { _ = try await verifier(for: chain).verifyTransaction(jws) } == .algorithm(alg))
    }

    @Test("no x5c, or two certificates only, is refused: chain", arguments: [0, 2])
    func shortChain(count: Int) async throws {
        let chain = try AppStoreTestChain()
        let jws = try chain.sign(AppStoreTransaction(transactionId: "1", originalTransactionId: "1", bundleId: Self.bundleId, productId: "p", type: nil, purchaseDate: nil, expiresDate: nil, signedDate: AppStoreTestChain.millis(Date()), environment: "Sandbox"), x5c: Array(chain.x5c.prefix(count)))
        let refused = await refusal { _ = try await verifier(for: chain).verifyTransaction(jws) }
        guard case .chain(let detail) = refused else {
            Issue.record("expected a chain refusal, got \(String(describing: refused))")
            return
        }
        #expect(detail.contains(count == 0 ? "no x5c" : "2 certificates"))
    }

    @Test("a tampered payload is refused: signature")
    func tamperedPayload() async throws {
        let chain = try AppStoreTestChain()
        let verifier = verifier(for: chain)
        let jws = try chain.transaction(productId: "com.example.cheap")
        _ = try await verifier.verifyTransaction(jws)
        let parts = jws.split(separator: ".").map(String.init)
        let forged = try chain.transaction(productId: "com.example.expensive").split(separator: ".").map(String.init)
        let tampered = [parts[0], forged[1], parts[2]].joined(separator: ".")
        #expect(await refusal { _ = try await verifier.verifyTransaction(tampered) } == .signature)
    }

    @Test("a leaf under the intermediate's name but signed with another key is refused: chain")
    func leafSignedByOtherKey() async throws {
        var options = AppStoreTestChain.Options()
        options.leafSignedByOtherKey = true
        let chain = try AppStoreTestChain(options)
        #expect(await refusal { _ = try await verifier(for: chain).verifyTransaction(try! chain.transaction(productId: "p")) }?.reason == "chain")
    }

    @Test("what is not a JWS at all is refused: format", arguments: ["", "abc", "a.b", "a.b.c", "e30.e30.AA"])
    func notAJWS(text: String) async throws {
        let chain = try AppStoreTestChain()
        let refused = await refusal { _ = try await verifier(for: chain).verifyTransaction(text) }
        #expect(refused?.reason == "format" || refused?.reason == "algorithm")
    }

    @Test("a cached chain is validated again after the configured lifetime")
    func cacheLifetime() async throws {
        let chain = try AppStoreTestChain()
        let clock = TestClock()
        var configuration = AppStoreSignedDataVerifier.Configuration(bundleId: Self.bundleId, environment: .sandbox, roots: [chain.root])
        configuration.chainCacheLifetime = 60
        configuration.now = { clock.now }
        let verifier = AppStoreSignedDataVerifier(configuration: configuration)
        _ = try await verifier.verifyTransaction(try chain.transaction(productId: "p"))
        #expect(verifier.cachedChainCount() == 1)
        clock.advance(by: 61)
        #expect(verifier.cachedChainCount(at: clock.now) == 0)
    }
}

/// A clock the test moves by hand.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date()
    var now: Date { lock.withLock { current } }
    func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}
