import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// The operator's lists over the admin API.
@Suite("The admin lists")
struct AdminListTests: StoreSuite {
    @Test("every admin list answers: accounts, one account, pending, sales by product and day, downloads", arguments: TestEngine.all)
    func adminLists(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let bought = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self)
            let receipt = try #require(bought.transaction.signedTransaction)
            let download = try await HTTPClient().send(HTTPRequest(url: http.baseURL + "/v1/content/\(Self.book)", headers: [("Authorization", "Receipt \(receipt)")], maxResponseBytes: 64 << 20))
            #expect(download.status == 200)
            _ = try await http.pay(Self.issue, token: account.token, method: .defer)
            func list(_ path: String) async throws -> [[String: Any]] {
                let reply = try await http.send("GET", path, token: server.adminToken)
                #expect(reply.status == 200, "\(path)")
                return try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]] ?? []
            }
            let accounts = try await list("/v1/admin/accounts")
            #expect(accounts.first { $0["accountId"] as? String == account.accountId }?["paidCents"] as? Int == 499)
            #expect(try await list("/v1/admin/pending").first?["productId"] as? String == Self.issue)
            let sales = try await list("/v1/admin/sales")
            #expect(sales.count == 1 && sales.first?["productId"] as? String == Self.book && sales.first?["netCents"] as? Int == 499)
            #expect((sales.first?["day"] as? String)?.count == 10)
            let downloads = try await list("/v1/admin/downloads")
            #expect(downloads.first?["productId"] as? String == Self.book && downloads.first?["requests"] as? Int == 1)
            #expect(try await http.send("GET", "/v1/admin/accounts", token: "wrong").status == 401)
            #expect(try await http.send("GET", "/v1/admin/accounts").status == 401)
        }
    }
}
