import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import Testing

/// A suite that runs against a live sandbox store over real sockets. Conforming gives it, as
/// `Self.…`, the sample store's products, a store on either engine with a fresh account, and the
/// ways the tests act on the store and read it back: purchases, purchases at once, races of the
/// admin and the customer, and what an account ends with.
protocol StoreSuite: Sendable {}

extension StoreSuite {
    static var book: String { "com.kiosk.books.small-engines" }
    static var issue: String { "com.kiosk.magazines.harbor-monthly.issue-02" }
    static var pack5: String { "com.kiosk.credits.pack-5" }
    static var pack10: String { "com.kiosk.credits.pack-10" }
    static var subscription: String { SampleStore.harborMonthly }

    /// A live server over a private copy of the sample store (edited first by `prepare`), and a
    /// fresh account on it.
    @discardableResult
    static func withStore<T: Sendable>(
        engine: TestEngine = .sqlite, database: DatabaseLocation? = nil, environment: StoreEnvironment = .sandbox, data: URL? = nil,
        prepare: @Sendable (SampleStore) throws -> Void = { _ in },
        configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> T
    ) async throws -> T {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try prepare(store)
        var configuration = ServerConfiguration(
            catalogDirectory: store.catalog, contentDirectory: store.content,
            dataDirectory: data ?? store.data, environment: environment)
        // bcrypt's least cost: a test's sign-ins take milliseconds, not a quarter second each.
        configuration.accounts.passwordCost = 4
        configure(&configuration)
        if let database {
            configuration.database = database
        } else {
            configuration.database = try await engine.freshDatabase()
        }
        return try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            return try await body(server, http, try await http.createAccount())
        }
    }

    static func verified(_ reply: StoreHTTP.Reply, by server: KioskServer) async throws -> ReceiptClaims {
        let payment = try reply.decode(PaymentResponse.self)
        let receipt = try #require(payment.transaction.signedTransaction)
        return try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt)
    }

    static func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) async throws -> StoreHTTP.Reply) async throws -> [StoreHTTP.Reply] {
        try await withThrowingTaskGroup(of: StoreHTTP.Reply.self) { group in
            for index in 0..<count { group.addTask { try await body(index) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func payment(_ product: String, quantity: Int = 1, method: String = "approve", key: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: ["productId": product, "quantity": quantity, "paymentMethod": method, "idempotencyKey": key]), as: UTF8.self)
    }

    // MARK: Races of the admin and the customer

    /// Rounds of each race: enough for PostgreSQL's read committed to interleave the two often.
    static var rounds: Int { 20 }

    typealias Race = StoreRace
    typealias Outcome = AccountOutcome

    static func race(_ first: @escaping @Sendable () async throws -> StoreHTTP.Reply, _ second: @escaping @Sendable () async throws -> StoreHTTP.Reply) async throws -> Race {
        async let a = first()
        async let b = second()
        return Race(first: try await a, second: try await b)
    }

    static func outcome(of transactionId: String, account: AccountCreated, http: StoreHTTP, adminToken: String) async throws -> Outcome {
        let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
        let transaction = try #require(page.transactions.first { $0.transactionId == transactionId })
        let credits = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits
        return Outcome(transaction: transaction, ledger: try await http.charges(accountId: account.accountId, adminToken: adminToken), credits: credits)
    }

    static func admin(_ http: StoreHTTP, _ token: String, _ action: String, _ id: String) async throws -> StoreHTTP.Reply {
        try await http.send("POST", "/v1/admin/transactions/\(id)/\(action)", token: token)
    }

    static func message(_ reply: StoreHTTP.Reply) -> String {
        (try? reply.decode(APIError.self).message) ?? String(decoding: reply.body, as: UTF8.self)
    }

    /// Two decisions on one Ask to Buy, or one refund twice: exactly one answers 200, the other a
    /// 409 naming the transaction and the state the winner left, and the account shows only the winner's work.
    func exactlyOneWins(_ engine: TestEngine, _ actions: (String, String), product: String, method: PaymentMethod) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            for round in 0..<Self.rounds {
                let account = try await http.createAccount()
                let id = try await http.pay(product, token: account.token, method: method).decode(PaymentResponse.self).transaction.transactionId
                let before = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                let race = try await Self.race({ try await Self.admin(http, server.adminToken, actions.0, id) },
                                               { try await Self.admin(http, server.adminToken, actions.1, id) })
                #expect(race.statuses.sorted() == [200, 409], "round \(round): \(actions) answered \(race.statuses): \(Self.message(race.first)) / \(Self.message(race.second))")
                guard race.statuses.sorted() == [200, 409] else { continue }
                let (winner, loser) = race.first.status == 200 ? (actions.0, race.second) : (actions.1, race.first)
                let end = try await Self.outcome(of: id, account: account, http: http, adminToken: server.adminToken)
                let refusal = try loser.decode(APIError.self)
                #expect(refusal.message.contains(id) && refusal.message.contains(end.transaction.status.rawValue),
                        "round \(round): the refusal \"\(refusal.message)\" names neither \(id) nor its state \(end.transaction.status)")
                switch winner {
                case "approve":
                    #expect(end.transaction.status == .purchased, "round \(round)")
                    #expect(end.ledger == [499], "round \(round)")
                    #expect(end.credits == 5, "round \(round)")
                case "decline":
                    #expect(end.transaction.status == .declined, "round \(round)")
                    #expect(end.ledger.isEmpty, "round \(round)")
                    #expect(end.credits == 0, "round \(round)")
                default:
                    #expect(end.transaction.status == .revoked, "round \(round)")
                    #expect(end.ledger == before.ledger + [-before.ledger[0]], "round \(round)")
                    #expect(end.credits == 0, "round \(round)")
                }
            }
        }
    }
}

/// The two answers of one race, in the order the actions were named.
struct StoreRace {
    var first: StoreHTTP.Reply
    var second: StoreHTTP.Reply
    var statuses: [Int] { [first.status, second.status] }
}

/// What an account ends with: the transaction's row as its owner lists it, the ledger, the balance.
struct AccountOutcome {
    var transaction: StoreTransaction
    var ledger: [Int]
    var credits: Int
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
