import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk admin refund` and `revoke` tell the operator what the decision did to the account.
@Suite("kiosk admin refund, as an operator reads it")
struct RefundCommandTests {
    @Test("refund prints what was paid back and withdrawn and the balance left; a pack whose credits were spent is refused in one line", arguments: TestEngine.all)
    func refundSays(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        let pack = try await http.pay("com.kiosk.credits.pack-10", token: account.token).decode(PaymentResponse.self).transaction.transactionId
        let redeemed = try await http.send("POST", "/v1/redemptions", token: account.token,
            json: #"{"productId": "com.kiosk.magazines.harbor-monthly.issue-02", "idempotencyKey": "spend"}"#)
        #expect(redeemed.status == 200)
        let admin = ["--server", server.url, "--data", store.data.path]

        let refused = try await KioskCommand.run(["admin", "refund", pack, "--reason", "asked"] + admin)
        #expect(refused.status == 1)
        #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("answered 409") && refused.stderr.contains("10 credits") && refused.stderr.contains("balance is 8"), "\(refused.stderr)")

        _ = try await http.pay("com.kiosk.credits.pack-5", token: account.token)
        let refunded = try await KioskCommand.run(["admin", "refund", pack, "--reason", "asked"] + admin)
        #expect(refunded.status == 0, "\(refunded.stderr)")
        #expect(refunded.stdout == "refunded \(pack): 8.99 USD paid back, 10 credits withdrawn, balance now 3 (asked)\n")

        let book = try await http.pay("com.kiosk.books.small-engines", token: account.token).decode(PaymentResponse.self).transaction.transactionId
        let revoked = try await KioskCommand.run(["admin", "revoke", book] + admin)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout == "revoked \(book): nothing paid back, balance now 3 (revoked by the store)\n")
        let again = try await KioskCommand.run(["admin", "revoke", book] + admin)
        #expect(again.status == 1 && again.stderr.contains("answered 409") && again.stderr.contains("already revoked"), "\(again.stderr)")

        // An ID with dot segments is one path segment: it names no other transaction (here, the
        // refund of `other` that libcurl's resolving `txn_../..` would have asked for).
        let other = try await http.pay("com.kiosk.books.river-of-maps", token: account.token).decode(PaymentResponse.self).transaction.transactionId
        let tricked = try await KioskCommand.run(["admin", "refund", "txn_../../\(other)"] + admin)
        #expect(tricked.status == 1, "\(tricked.stdout)")
        #expect(try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            .transactions.first { $0.transactionId == other }?.status == .purchased)
        _ = await server.stop()
    }
}
