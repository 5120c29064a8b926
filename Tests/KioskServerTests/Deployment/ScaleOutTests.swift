import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// Two `kiosk serve` instances over one PostgreSQL database are one store.
@Suite("Two instances over one PostgreSQL database")
struct ScaleOutTests: TwoInstanceSuite {
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"

    /// `count` requests at once, alternating between instances A and B; `send` is given the
    /// instance's client and the request's index.
    static func splitOverBoth<T: Sendable>(
        _ count: Int, _ a: StoreHTTP, _ b: StoreHTTP, _ send: @escaping @Sendable (StoreHTTP, Int) async throws -> T
    ) async throws -> [T] {
        try await withThrowingTaskGroup(of: T.self) { group in
            for index in 0..<count {
                let http = index.isMultiple(of: 2) ? a : b
                group.addTask { try await send(http, index) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("four instances started at once on a new database: each migrates or finds the work done, all serve, and all sign with the one key made")
    func instancesStartTogether() async throws {
        guard case .postgres(let url) = try await TestPostgres.shared.freshDatabase() else { return }
        let directory = try TemporaryDirectory()
        let folders = try (0..<4).map { _ in try TemporaryDirectory() }
        let stores = try folders.map { try SampleStore(in: $0) }
        let results = try await withThrowingTaskGroup(of: Result<ServerProcess, any Error>.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    do { return .success(try await ServerProcess.start(store, extraArguments: ["--database", url], log: directory.path("server-\(index).log"))) }
                    catch { return .failure(error) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var published: [Set<String>] = []
        for result in results {
            switch result {
            case .success(let server):
                let http = StoreHTTP(baseURL: server.url)
                #expect(try await http.send("GET", "/healthz").status == 200)
                published.append(Set(try await http.send("GET", "/.well-known/jwks.json").decode(JWKSDocument.self).keys.map(\.kid)))
                _ = await server.stop()
            case .failure(let error):
                Issue.record("an instance did not start: \(error)")
            }
        }
        #expect(published.count == 4 && published.allSatisfy { $0.count == 1 && $0 == published.first })
    }

    @Test("a purchase made on A is listed, finished, replayed and refunded on B; an Ask to Buy made on B is approved on A")
    func purchaseAcrossInstances() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let key = UUID().uuidString
            let bought = try await a.1.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            let id = bought.transaction.transactionId

            // B sees it, replays it by its key (no second charge) and finishes it.
            let replayed = try await b.1.pay(Self.book, token: account.token, key: key).decode(PaymentResponse.self)
            #expect(replayed.transaction.transactionId == id)
            let finished = try await b.1.send("POST", "/v1/transactions/\(id)/finish", token: account.token).decode(StoreTransaction.self)
            #expect(finished.finished)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == [499])

            // An Ask to Buy made on B waits; A approves it; the buyer sees it purchased on B.
            let asked = try await b.1.pay("com.kiosk.credits.pack-5", token: account.token, method: .defer).decode(PaymentResponse.self)
            #expect(asked.transaction.status == .deferred)
            let approved = try await a.1.send("POST", "/v1/admin/transactions/\(asked.transaction.transactionId)/approve", token: a.0.adminToken)
            #expect(approved.status == 200)
            let page = try await b.1.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.first { $0.transactionId == asked.transaction.transactionId }?.status == .purchased)

            // Refunded on B, the receipt stops entitling on A.
            let refunded = try await b.1.send("POST", "/v1/admin/transactions/\(id)/refund", token: b.0.adminToken, json: #"{"reason": "test"}"#)
            #expect(refunded.status == 200)
            let receipt = try #require(bought.transaction.signedTransaction)
            #expect(try await a.1.verifyReceipt(receipt).status == 21010)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken).sorted() == [-499, 499, 499])
        }
    }

    @Test("one idempotency key sent to both instances at once, 16 times: one transaction, one charge")
    func idempotencyRace() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let key = UUID().uuidString
            let replies = try await Self.splitOverBoth(16, a.1, b.1) { http, _ in try await http.pay(Self.book, token: account.token, key: key) }
            #expect(replies.allSatisfy { $0.status == 200 })
            let ids = Set(try replies.map { try $0.decode(PaymentResponse.self).transaction.transactionId })
            #expect(ids.count == 1)
            #expect(try await b.1.charges(accountId: account.accountId, adminToken: b.0.adminToken) == [499])
        }
    }

    @Test("16 buys of one book with different keys, split over both instances: one charge, the rest free re-buys of it")
    func buysRaceAcrossInstances() async throws {
        // Within one instance payments of an account take turns; across instances only the
        // database's compare-and-set and unique indexes stand between them.
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let replies = try await Self.splitOverBoth(16, a.1, b.1) { http, _ in
                try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            }
            #expect(replies.filter { $0.owned != true }.count == 1)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == [499])
            let page = try await b.1.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.count == 16)
            #expect(page.transactions.allSatisfy { $0.status == .purchased })
        }
    }

    @Test("24 credit packs with different keys and a replay of each, split over both instances: 24 charges, a balance of exactly 120")
    func packsRaceAcrossInstances() async throws {
        // A pack's charge is written without a look-up, at whatever revision the account is at:
        // across instances only PostgreSQL's row lock orders them, and the unique index on the
        // key answers the replays.
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let replies = try await Self.splitOverBoth(48, a.1, b.1) { http, index in
                try await http.pay(Self.pack5, token: account.token, key: "pack-\(index / 2)").decode(PaymentResponse.self)
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 24)
            #expect(try await a.1.charges(accountId: account.accountId, adminToken: a.0.adminToken) == Array(repeating: 499, count: 24))
            #expect(try await b.1.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 120)
            // Each of the 24 first answers is a balance it left: 5, 10, ... 120 once each.
            let first = Dictionary(grouping: replies, by: \.transaction.transactionId).values.map { $0.map(\.credits).min() ?? 0 }
            #expect(first.sorted() == Array(stride(from: 5, through: 120, by: 5)))
        }
    }

    @Test("a key rotated on A signs A's next receipts, B verifies them at once, and receipts signed before keep verifying on both")
    func keyRotation() async throws {
        try await Self.withTwoInstances { a, b in
            let account = try await a.1.createAccount()
            let before = try #require(try await a.1.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.signedTransaction)
            let oldKID = await a.0.keys.signingKID

            let newKID = try await SigningKeys.rotate(a.0.store.database)
            try await a.0.keys.reload()
            #expect(newKID != oldKID)
            let after = try #require(try await a.1.pay("com.kiosk.credits.pack-5", token: account.token).decode(PaymentResponse.self).transaction.signedTransaction)
            #expect(try Self.kid(of: after) == newKID)

            // B has not read the keys since: a receipt with an unknown kid makes it look again.
            #expect(try await b.1.verifyReceipt(after).status == 0)
            #expect(try await b.1.verifyReceipt(before).status == 0)
            #expect(try await a.1.verifyReceipt(before).status == 0)
            let jwks = try await b.1.send("GET", "/.well-known/jwks.json").decode(JWKSDocument.self)
            #expect(Set(jwks.keys.map(\.kid)) == [oldKID, newKID])
            // The JWKS a client fetches on meeting a new kid lists a key rotated a moment ago elsewhere.
            let third = try await SigningKeys.rotate(a.0.store.database)
            let fresh = try await b.1.send("GET", "/.well-known/jwks.json").decode(JWKSDocument.self)
            #expect(Set(fresh.keys.map(\.kid)) == [oldKID, newKID, third])

            // Retiring the old key takes it out of the JWKS; its receipts stop verifying.
            try await SigningKeys.retire(third, in: b.0.store.database)
            try await SigningKeys.retire(oldKID, in: b.0.store.database)
            try await a.0.keys.reload()
            #expect(try await a.1.verifyReceipt(before).status != 0)
            #expect(try await a.1.verifyReceipt(after).status == 0)
        }
    }

    static func kid(of jws: String) throws -> String {
        var header = String(jws.split(separator: ".")[0]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while header.count % 4 != 0 { header += "=" }
        let object = try JSONSerialization.jsonObject(with: try #require(Data(base64Encoded: header))) as? [String: Any]
        return try #require(object?["kid"] as? String)
    }

    struct JWKSDocument: Decodable {
        struct Key: Decodable { var kid: String }
        var keys: [Key]
    }
}
