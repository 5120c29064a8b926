import Foundation
import JWTKit
import KioskCore
import Testing

/// The receipt policy on its own: one refusal per reason, and the one refetch of keys.
@Suite("The receipt policy")
struct ReceiptPolicyTests {
    /// A store's signing key and the receipts it signs, made by the test.
    struct Signer {
        let kid: String
        let key: EdDSA.PrivateKey

        init(kid: String) throws {
            self.kid = kid
            self.key = try EdDSA.PrivateKey()
        }

        var jwk: JWK {
            let x = key.publicKey.rawRepresentation.base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            return .octetKeyPair(.eddsa, identifier: JWKIdentifier(string: kid), x: x, y: nil, curve: .ed25519)
        }

        func sign(_ payload: some JWTPayload) async throws -> String {
            let keys = JWTKeyCollection()
            await keys.add(eddsa: key, kid: JWKIdentifier(string: kid))
            return try await keys.sign(payload, kid: JWKIdentifier(string: kid))
        }
    }

    static func claims(account: String = "acct_reader", environment: StoreEnvironment = .sandbox, issuer: String = "kiosk-sandbox") -> ReceiptClaims {
        ReceiptClaims(
            transactionId: "txn_1", originalTransactionId: "txn_1", productId: "com.kiosk.books.river-of-maps", kind: .nonConsumable,
            quantity: 1, accountId: account, purchaseDate: Date(timeIntervalSince1970: 1_800_000_000), expiresDate: nil,
            environment: environment, issuer: issuer)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The refusal `check` throws, or nil when it accepts.
    static func refusal(_ policy: KioskReceiptPolicy, _ receipt: String, account: String? = nil) async -> ReceiptRefusal? {
        do {
            _ = try await policy.check(receipt, presentedBy: account)
            return nil
        } catch {
            return error
        }
    }

    let store: Signer
    let retiredKey: Signer
    let sandbox: KioskReceiptPolicy
    let production: KioskReceiptPolicy

    init() async throws {
        store = try Signer(kid: "ed25519-current")
        retiredKey = try Signer(kid: "ed25519-retired")
        sandbox = try await KioskReceiptPolicy(keySet: ReceiptKeySet(keys: [store.jwk], identity: .kiosk(.sandbox), retired: [retiredKey.kid]))
        production = try await KioskReceiptPolicy(keySet: ReceiptKeySet(keys: [store.jwk], identity: .kiosk(.production), retired: [retiredKey.kid]))
    }

    @Test("a receipt signed by the store's key, for its environment, issuer and account, gives its claims")
    func valid() async throws {
        let receipt = try await store.sign(Self.claims())
        #expect(try await sandbox.check(receipt, presentedBy: "acct_reader") == Self.claims())
        #expect(try await sandbox.check(receipt) == Self.claims())
    }

    @Test("not a JWS, or a JWS whose header is not JSON: malformed")
    func malformed() async throws {
        #expect(await Self.refusal(sandbox, "hello") == .malformed)
        #expect(await Self.refusal(sandbox, "a.b") == .malformed)
        #expect(await Self.refusal(sandbox, "bm90IGpzb24.e30.c2ln") == .malformed)
    }

    @Test("a signature changed or made with another key under the store's kid: not authentic")
    func forged() async throws {
        let receipt = try await store.sign(Self.claims())
        let parts = receipt.split(separator: ".").map(String.init)
        let flipped = (parts[2].hasPrefix("AAAA") ? "BBBB" : "AAAA") + parts[2].dropFirst(4)
        #expect(await Self.refusal(sandbox, [parts[0], parts[1], flipped].joined(separator: ".")) == .notAuthentic)
        let impostor = Signer(kid: store.kid, key: try EdDSA.PrivateKey())
        #expect(await Self.refusal(sandbox, try await impostor.sign(Self.claims())) == .notAuthentic)
        // Claims altered under the original signature.
        let other = Self.base64URL(try JSONEncoder().encode(Self.claims(account: "acct_thief")))
        #expect(await Self.refusal(sandbox, [parts[0], other, parts[2]].joined(separator: ".")) == .notAuthentic)
    }

    @Test("alg none, with or without a signature: refused by name")
    func algorithmNone() async throws {
        let receipt = try await store.sign(Self.claims())
        let header = Self.base64URL(Data(#"{"alg":"none","kid":"ed25519-current"}"#.utf8))
        let parts = receipt.split(separator: ".").map(String.init)
        #expect(await Self.refusal(sandbox, header + "." + parts[1] + ".") == .algorithmNotAllowed("none"))
        #expect(await Self.refusal(sandbox, [header, parts[1], parts[2]].joined(separator: ".")) == .algorithmNotAllowed("none"))
    }

    @Test("a kid the store never listed: unknown key; a retired one: retired, naming it")
    func keys() async throws {
        let stranger = try Signer(kid: "ed25519-stranger")
        #expect(await Self.refusal(sandbox, try await stranger.sign(Self.claims())) == .unknownKey("ed25519-stranger"))
        #expect(await Self.refusal(sandbox, try await retiredKey.sign(Self.claims())) == .keyRetired("ed25519-retired"))
        #expect(ReceiptRefusal.keyRetired("ed25519-retired").description.contains("kiosk restore"))
    }

    @Test("a receipt of the other environment is refused both ways, before its issuer is looked at")
    func environment() async throws {
        let production = try await store.sign(Self.claims(environment: .production, issuer: "kiosk-production"))
        #expect(await Self.refusal(sandbox, production) == .wrongEnvironment(receipt: .production, store: .sandbox))
        let sandboxReceipt = try await store.sign(Self.claims())
        #expect(await Self.refusal(self.production, sandboxReceipt) == .wrongEnvironment(receipt: .sandbox, store: .production))
    }

    /// The claims of a receipt from before `iss` (Kiosk never made one; a forger might).
    struct NoIssuer: JWTPayload {
        var transactionId = "txn_1", originalTransactionId = "txn_1", productId = "com.kiosk.books.river-of-maps"
        var kind = ProductKind.nonConsumable, quantity = 1, accountId = "acct_reader", purchaseDate: Int64 = 1_800_000_000_000
        var environment = StoreEnvironment.sandbox
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test("another issuer, or none at all, is refused even under the store's own key")
    func issuer() async throws {
        #expect(await Self.refusal(sandbox, try await store.sign(Self.claims(issuer: "kiosk-elsewhere"))) == .wrongIssuer(receipt: "kiosk-elsewhere", store: "kiosk-sandbox"))
        #expect(await Self.refusal(sandbox, try await store.sign(NoIssuer())) == .wrongIssuer(receipt: nil, store: "kiosk-sandbox"))
    }

    @Test("another account's receipt is refused when an account presents it")
    func otherAccount() async throws {
        let receipt = try await store.sign(Self.claims(account: "acct_someone"))
        #expect(await Self.refusal(sandbox, receipt, account: "acct_reader")
            == .otherAccount(transactionId: "txn_1", receiptAccount: "acct_someone", presentedBy: "acct_reader"))
    }

    @Test("a key set that does not name its store cannot be used")
    func unnamedKeySet() async throws {
        await #expect(throws: ReceiptRefusal.self) {
            _ = try await KioskReceiptPolicy(keySetJSON: Data(#"{"keys":[]}"#.utf8))
        }
    }

    /// A key source with a stale set and a fresh one, counting the fetches.
    final class Source: ReceiptKeySource, @unchecked Sendable {
        let stale: KioskReceiptPolicy?
        let fresh: KioskReceiptPolicy
        var fetches = 0

        init(stale: KioskReceiptPolicy?, fresh: KioskReceiptPolicy) {
            self.stale = stale
            self.fresh = fresh
        }

        func currentPolicy() async throws -> KioskReceiptPolicy? { stale }

        func freshPolicy(after refusal: ReceiptRefusal, receipt: String) async throws -> KioskReceiptPolicy? {
            fetches += 1
            return fresh
        }
    }

    @Test("keys are fetched again once for a key not seen yet, never for a forgery under a known key")
    func refetch() async throws {
        let rotated = try Signer(kid: "ed25519-rotated")
        let fresh = try await KioskReceiptPolicy(keySet: ReceiptKeySet(keys: [store.jwk, rotated.jwk], identity: .kiosk(.sandbox), retired: []))
        let source = Source(stale: sandbox, fresh: fresh)
        let verifier = KioskReceiptVerifier(keys: source)
        #expect(try await verifier.verify(try await rotated.sign(Self.claims()), presentedBy: nil).claims == Self.claims())
        #expect(source.fetches == 1)

        let impostor = Signer(kid: store.kid, key: try EdDSA.PrivateKey())
        await #expect(throws: ReceiptRefusal.notAuthentic) {
            _ = try await verifier.verify(try await impostor.sign(Self.claims()), presentedBy: nil)
        }
        #expect(source.fetches == 1)

        let noKeys = Source(stale: nil, fresh: fresh)
        #expect(try await KioskReceiptVerifier(keys: noKeys).verify(try await store.sign(Self.claims()), presentedBy: nil).claims == Self.claims())
        #expect(noKeys.fetches == 1)
    }
}

extension ReceiptPolicyTests.Signer {
    init(kid: String, key: EdDSA.PrivateKey) {
        self.kid = kid
        self.key = key
    }
}
