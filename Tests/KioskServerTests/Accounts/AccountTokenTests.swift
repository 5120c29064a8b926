import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The account's bearer token: what the store takes as one and what it refuses.
@Suite("Account tokens")
struct AccountTokenTests: StoreSuite {
    @Test("a missing or unknown token gets 401 with a JSON error; the scheme's case and spaces around the token do not matter", arguments: TestEngine.all)
    func unauthorized(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            #expect(try await http.send("GET", "/v1/account").status == 401)
            #expect(try await http.send("GET", "/v1/account", authorization: "bEARER \t\(account.token) ").status == 200)
            #expect(try await http.send("GET", "/v1/account", authorization: "Basic \(account.token)").status == 401)
            #expect(try await http.send("GET", "/v1/account", authorization: "Bearer").status == 401)
            let unknown = try await http.send("GET", "/v1/account", token: "not-a-token")
            #expect(unknown.status == 401)
            #expect(try unknown.decode(APIError.self).code == "unauthorized")
            #expect(try await http.pay(Self.book, token: "not-a-token").status == 401)
        }
    }
}
