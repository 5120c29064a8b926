import Foundation
import KioskCore
import KioskTestSupport
import KioskTransfer
import Testing

/// Offer codes in the console: made by a form and shown once, listed with what was redeemed,
/// withdrawn by a button.
@Suite("the console's offer codes, over HTTP")
struct ConsoleCodesTests {
    @Test("a form makes codes and shows them once; the list counts a redemption; Withdraw refuses the rest; a broken form is said on a page", arguments: [TestEngine.sqlite])
    func codes(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: ["--console-port", "0"], log: directory.path("server.log"))
        let console = try #require(try await ConsoleBrowserTests.consoleURL(server), "\(server.log)")
        let token = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let login = try await HTTPClient().send(HTTPRequest(method: "POST", url: console + "/login", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Data("token=\(token)".utf8)))
        let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init), "\(login.status)")
        func post(_ path: String, _ fields: String) async throws -> HTTPResponse {
            try await HTTPClient().send(HTTPRequest(method: "POST", url: console + path, headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", cookie), ("Origin", console)],
                                                    body: Data(fields.utf8)))
        }
        let empty = try await ConsoleMoneyTests.page(console, "/codes", cookie: cookie)
        let csrf = try #require(empty.firstMatch(of: /name="csrf" value="([0-9a-f]+)"/)?.1).description
        #expect(empty.contains("<option value=\"com.kiosk.books.river-of-maps\">"))

        let made = try await post("/codes", "csrf=\(csrf)&product=com.kiosk.books.river-of-maps&count=2&code=&limit=&expires=2099-12-31")
        let page = String(decoding: made.body, as: UTF8.self)
        #expect(made.status == 200 && page.contains("Shown this once"), "\(made.status) \(page)")
        let codes = page.matches(of: /([A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}),com\.kiosk\.books\.river-of-maps,2099-12-31/).map { String($0.1) }
        #expect(codes.count == 2, "\(page)")
        let batch = try #require(page.firstMatch(of: /batch <code>(batch_[0-9a-f]+)<\/code>/)?.1).description

        let http = StoreHTTP(baseURL: server.url)
        let reader = try await http.createAccount()
        #expect(try await http.send("POST", "/v1/codes/redeem", token: reader.token, json: #"{"code": "\#(codes[0])"}"#).status == 200)
        let listed = try await ConsoleMoneyTests.page(console, "/codes", cookie: cookie)
        #expect(listed.contains("1 of 2") && !listed.contains(codes[1]), "the list counts, and never shows a code again")

        let unconfirmed = try await post("/codes/revoke", "csrf=\(csrf)&batch=\(batch)")
        #expect(unconfirmed.status == 400 && String(decoding: unconfirmed.body, as: UTF8.self).contains("I mean it"), "one click withdraws nothing")
        let withdrawn = try await post("/codes/revoke", "csrf=\(csrf)&batch=\(batch)&confirm=yes")
        #expect(withdrawn.status == 303)
        let after = try await ConsoleMoneyTests.page(console, "/codes", cookie: cookie)
        #expect(after.contains("\(batch): 1 codes withdrawn") && after.contains("withdrawn</td>"), "\(after)")
        #expect(try await http.send("POST", "/v1/codes/redeem", token: try await http.createAccount().token, json: #"{"code": "\#(codes[1])"}"#).status == 400)

        let broken = try await post("/codes", "csrf=\(csrf)&product=com.kiosk.books.river-of-maps&count=&code=ab&limit=1&expires=")
        #expect(broken.status == 400 && String(decoding: broken.body, as: UTF8.self).contains("4 to 32 letters and digits"))
        let both = try await post("/codes", "csrf=\(csrf)&product=com.kiosk.books.river-of-maps&count=2&code=BOTHWAYS1&limit=2&expires=")
        #expect(both.status == 400 && String(decoding: both.body, as: UTF8.self).contains("not both"))
        let noDay = try await post("/codes", "csrf=\(csrf)&product=com.kiosk.books.river-of-maps&count=1&code=&limit=&expires=2027-02-30")
        #expect(noDay.status == 400 && String(decoding: noDay.body, as: UTF8.self).contains("is not a day"), "2027-02-30 is no day")
        let forged = try await post("/codes", "csrf=0000&product=com.kiosk.books.river-of-maps&count=5")
        #expect(forged.status == 403, "a form without this session's token makes nothing")
        _ = await server.stop()
    }
}
