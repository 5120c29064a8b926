import Foundation
import JWTKit
@testable import KioskClient
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Testing

/// One receipt policy: on the same receipt, the client (``ReceiptCheck``, with its cached keys and
/// its one refetch) and the server (its proof verifiers, `/v1/content` and `/verifyReceipt`) give
/// the same answer, in the same words.
@Suite("The client and the server give the same answer on the same receipt")
struct ReceiptAgreementTests {
    static let book = "com.kiosk.books.river-of-maps"

    enum Case: String, CaseIterable, Sendable {
        case valid, malformed, forgedSignature, algorithmNone, unknownKey, retiredKey, wrongIssuer
        case sandboxReceiptAtProduction, productionReceiptAtSandbox, otherAccount

        var storeEnvironment: StoreEnvironment { self == .sandboxReceiptAtProduction ? .production : .sandbox }
    }

    /// What one side said about a receipt.
    enum Answer: Equatable, CustomStringConvertible {
        case accepted(ReceiptClaims)
        case refused(ReceiptRefusal)

        init(_ body: () async throws -> ReceiptClaims) async throws {
            do {
                self = .accepted(try await body())
            } catch let refusal as ReceiptRefusal {
                self = .refused(refusal)
            }
        }

        var description: String {
            switch self {
            case .accepted(let claims): return "accepted \(claims.transactionId)"
            case .refused(let refusal): return "refused: \(refusal)"
            }
        }
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The receipt a case presents, and the refusal it must meet (nil: accepted), made from a
    /// genuine purchase of `account`.
    static func receipt(for testCase: Case, genuine: String, claims: ReceiptClaims, account: String, server: KioskServer, client: KioskClient) async throws -> (String, ReceiptRefusal?) {
        let identity = server.keys.identity
        var claims = claims
        switch testCase {
        case .valid:
            return (genuine, nil)
        case .malformed:
            return ("not-a-receipt", .malformed)
        case .forgedSignature:
            let parts = genuine.split(separator: ".").map(String.init)
            let signature = parts[2].hasPrefix("AAAA") ? "BBBB" + parts[2].dropFirst(4) : "AAAA" + parts[2].dropFirst(4)
            return ([parts[0], parts[1], signature].joined(separator: "."), .notAuthentic)
        case .algorithmNone:
            let kid = KioskReceiptPolicy.keyID(of: genuine) ?? ""
            let header = base64URL(Data(#"{"alg":"none","kid":"\#(kid)"}"#.utf8))
            return (header + "." + genuine.split(separator: ".")[1] + ".", .algorithmNotAllowed("none"))
        case .unknownKey:
            let keys = JWTKeyCollection()
            await keys.add(eddsa: try EdDSA.PrivateKey(), kid: JWKIdentifier(string: "ed25519-stranger"))
            return (try await keys.sign(claims, kid: JWKIdentifier(string: "ed25519-stranger")), .unknownKey("ed25519-stranger"))
        case .retiredKey:
            let oldKID = await server.keys.signingKID
            _ = try await SigningKeys.rotate(server.store.database)
            try await server.keys.reload()
            try await SigningKeys.retire(oldKID, in: server.store.database)
            try await server.keys.reload()
            // A device that has read the store's keys since (restore does so first); one whose cache
            // predates the retirement still accepts the receipt offline, and the store refuses it.
            try client.database.settings.set(Setting.Key.jwks, to: String(decoding: try JSONEncoder().encode(try await server.keys.jwks()), as: UTF8.self))
            return (genuine, .keyRetired(oldKID))
        case .wrongIssuer:
            claims.issuer = "kiosk-elsewhere"
            return (try await server.keys.sign(claims), .wrongIssuer(receipt: "kiosk-elsewhere", store: identity.issuer))
        case .sandboxReceiptAtProduction, .productionReceiptAtSandbox:
            let other = StoreIdentity.kiosk(identity.environment == .sandbox ? .production : .sandbox)
            (claims.environment, claims.issuer) = (other.environment, other.issuer)
            return (try await server.keys.sign(claims), .wrongEnvironment(receipt: other.environment, store: identity.environment))
        case .otherAccount:
            claims.accountId = "acct_00000000someone"
            return (try await server.keys.sign(claims), .otherAccount(transactionId: claims.transactionId, receiptAccount: claims.accountId, presentedBy: account))
        }
    }

    @Test("client and server agree", arguments: Case.allCases)
    func agree(_ testCase: Case) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let home = KioskHome(root: directory.path("home"))
        // Bought in the sandbox (a production store sells only for a real proof of payment), then
        // presented to the store of the case's environment: the same database and keys in the sandbox.
        let sandbox = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        let (genuine, claims, account, token) = try await LiveServer.run(sandbox) { server, url in
            let client = try KioskClient(home: home, server: url)
            _ = try await client.sync()
            let bought = try await client.buy(Self.book, downloadNow: false)
            let genuine = try #require(bought.record.receipt)
            let claims = try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(genuine)
            return (genuine, claims, try #require(try client.accountID()), try #require(try client.accountToken()))
        }
        // A production store keeps a database of its own (StoreEnvironmentMark): it signs the case's
        // receipt with its own keys, as the sandbox's receipts are re-signed for the other cases.
        let data = testCase.storeEnvironment == .sandbox ? store.data : directory.path("production-data")
        let configuration = ServerConfiguration(
            catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: data, environment: testCase.storeEnvironment)
        try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: home, server: url)
            // The keys (and the environment they name) of the store the receipt is presented to.
            try client.database.settings.set(Setting.Key.jwks, to: String(decoding: try JSONEncoder().encode(try await server.keys.jwks()), as: UTF8.self))
            let (receipt, expected) = try await Self.receipt(for: testCase, genuine: genuine, claims: claims, account: account, server: server, client: client)

            let api = try client.purchases.storeAPI()
            let onClient = try await Answer { try await ReceiptCheck(database: client.database).verifiedReceipt(receipt, keysFrom: api) }
            let onServer = try await Answer {
                let chosen = try #require(server.store.proofs.verifier(forAuthorization: "Receipt \(receipt)"))
                return try await chosen.verifier.verify(chosen.proof, presentedBy: account).claims
            }
            #expect(onClient == onServer)
            #expect(onClient == (expected.map(Answer.refused) ?? .accepted(claims)))

            // The same answer over the wire: /verifyReceipt's status, and the content route's words.
            let http = StoreHTTP(baseURL: url)
            #expect(try await http.verifyReceipt(receipt, token: token).status == expected?.verifyReceiptStatus ?? VerifyReceiptStatus.valid)
            if testCase != .otherAccount {
                // The content route takes the receipt alone, with no account presenting it.
                let download = try await http.send("HEAD", "/v1/content/\(Self.book)", authorization: "Receipt \(receipt)")
                if let expected {
                    #expect(download.status == 401)
                    let error = try await http.send("GET", "/v1/content/\(Self.book)", authorization: "Receipt \(receipt)").decode(APIError.self)
                    #expect(error.message == expected.description)
                } else {
                    #expect(download.status == 200)
                }
            }
        }
    }
}
