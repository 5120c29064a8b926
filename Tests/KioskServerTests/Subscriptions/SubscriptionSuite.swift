import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// A suite that lives a subscription's life with the account's clock moved forward. Conforming
/// gives it, as `Self.…`, a store whose monthly subscription has the grace it is given, the
/// ``SubscriptionFixture`` to act on it, and the receipts' claims read back.
protocol SubscriptionSuite: Sendable {}

extension SubscriptionSuite {
    typealias Fixture = SubscriptionFixture

    static var monthly: String { SampleStore.harborMonthly }
    static var series: String { SampleStore.harborSeries }
    static var day: TimeInterval { 86_400 }

    static func withStore(engine: TestEngine, graceDays: Int?, issues: [(String, String)] = [], _ body: @Sendable (Fixture) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editHarborMonthly(graceDays: graceDays, issues: issues.map { (suffix: $0.0, day: $0.1) })
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = try await engine.freshDatabase()
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            try await body(Fixture(server: server, http: http, account: try await http.createAccount()))
        }
    }

    static func claims(_ jws: String) throws -> ReceiptClaims {
        try SubscriptionFixture.claims(jws)
    }
}

/// One store with the monthly subscription given `graceDays`, plus issues of the series
/// published on the given days (id suffix → yyyy-MM-dd).
struct SubscriptionFixture: Sendable {
    let server: KioskServer
    let http: StoreHTTP
    let account: AccountCreated

    var admin: String { server.adminToken }

    func subscriptions() async throws -> SubscriptionList {
        try await http.send("GET", "/v1/subscriptions", token: account.token).decode(SubscriptionList.self)
    }

    func subscription(_ id: String) async throws -> SubscriptionInfo {
        let found = try await subscriptions().subscriptions.first { $0.originalTransactionId == id }
        return try #require(found)
    }

    @discardableResult
    func sandbox(renewals: SandboxAccountSettings.RenewalOutcome? = nil, advance: TimeInterval? = nil) async throws -> SandboxAccountState {
        let body = String(decoding: try JSONEncoder.kiosk.encode(SandboxAccountSettings(renewals: renewals, advanceSeconds: advance)), as: UTF8.self)
        let reply = try await http.send("POST", "/v1/admin/accounts/\(account.accountId)/sandbox", token: admin, json: body)
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        return try reply.decode(SandboxAccountState.self)
    }

    /// Moves the account's clock to `seconds` after `date` and runs a renewal pass.
    @discardableResult
    func advance(to date: Date, plus seconds: TimeInterval = 60) async throws -> Int {
        let now = try await subscriptions().now
        let needed = date.addingTimeInterval(seconds).timeIntervalSince(now)
        if needed > 0 { try await sandbox(advance: needed) }
        return try await runRenewals()
    }

    func runRenewals() async throws -> Int {
        let reply = try await http.send("POST", "/v1/admin/renewals/run", token: admin)
        #expect(reply.status == 200)
        return try reply.decode([String: Int].self)["steps"] ?? -1
    }

    func buy() async throws -> (transaction: StoreTransaction, claims: ReceiptClaims) {
        let reply = try await http.pay(SampleStore.harborMonthly, token: account.token)
        #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
        let transaction = try reply.decode(PaymentResponse.self).transaction
        return (transaction, try SubscriptionFixture.claims(try #require(transaction.signedTransaction)))
    }

    func charges() async throws -> [Int] {
        try await http.charges(accountId: account.accountId, adminToken: admin)
    }

    /// Every purchased period of the subscription, oldest first, as their receipts say.
    func periods() async throws -> [ReceiptClaims] {
        let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
        return try page.transactions.filter { $0.productId == SampleStore.harborMonthly && $0.status == .purchased }
            .map { try SubscriptionFixture.claims(try #require($0.signedTransaction)) }
    }

    /// Whether the content route serves `productId` for the receipt.
    func entitled(_ productId: String, receipt: String) async throws -> Bool {
        let response = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: http.baseURL + "/v1/content/\(productId)",
                                                               headers: [("Authorization", "Receipt \(receipt)")]))
        return response.status == 200
    }

    /// A receipt's claims, read without verifying its signature.
    static func claims(_ jws: String) throws -> ReceiptClaims {
        let parts = jws.split(separator: ".")
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        return try JSONDecoder().decode(ReceiptClaims.self, from: try #require(Data(base64Encoded: payload)))
    }
}
