import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The reader's account page in a real browser: Debian's chromium driven by playwright
/// (scripts/account_page_check.py), against a `kiosk serve` of the sample store. `make test-tools`
/// installs both; a missing one fails the test, naming what to run.
@Suite("the account page in a browser")
struct AccountPageBrowserTests {
    static let book = "com.kiosk.books.small-engines"
    static let password = "correct horse battery"

    @Test("sign in, see purchases, cancel auto-renew, approve a device code, remove a device, export, sign out everywhere, delete", arguments: TestEngine.all)
    func readerDay(engine: TestEngine) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.python.path),
                     "no playwright at \(ConsoleBrowserTests.python.path): run make test-tools (it makes that venv and installs playwright)")
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.chromium), "no \(ConsoleBrowserTests.chromium): run make test-tools (apt-get install chromium)")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra += ["--database", url] }
        let server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)

        // The reader: an account with a book and a subscription, a phone, and a TV waiting with a code.
        let created = try await http.send("POST", "/v1/accounts", json: #"{"email": "ann@example.com", "password": "\#(Self.password)", "deviceName": "laptop"}"#)
        let ann = try created.decode(AccountCreated.self)
        #expect(try await http.pay(Self.book, token: ann.token).status == 200)
        #expect(try await http.pay(SampleStore.harborMonthly, token: ann.token).status == 200)
        let phone = try await http.send("POST", "/v1/sessions", json: #"{"email": "ann@example.com", "password": "\#(Self.password)", "deviceName": "phone"}"#).decode(DeviceSignIn.self)
        let grant = try await http.send("POST", "/v1/device-codes", json: #"{"deviceName": "tv"}"#).decode(DeviceCodeGrant.self)
        // A device whose name is HTML, with its < joined to the letter before it (the attack's find).
        let hostile = try JSONSerialization.data(withJSONObject: ["email": "ann@example.com", "password": Self.password,
                                                                  "deviceName": "\u{0D4E}<meta http-equiv=refresh content=0;url=http://127.0.0.2:1/pwn>"])
        #expect(try await http.send("POST", "/v1/sessions", json: String(decoding: hostile, as: UTF8.self)).status == 201)

        let screenshots = directory.path("screenshots")
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let checked = try await KioskCommand.run(
            [SampleStore.repository.appendingPathComponent("scripts/account_page_check.py").path,
             "--store", server.url, "--email", "ann@example.com", "--password", Self.password, "--book", Self.book,
             "--user-code", grant.userCode, "--remove", "phone", "--screenshots", screenshots.path, "--chromium", ConsoleBrowserTests.chromium],
            program: ConsoleBrowserTests.python)
        if checked.status != 0 {
            let kept = SampleStore.repository.appendingPathComponent(".build/account-page-screenshots/\(engine)")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? FileManager.default.copyItem(at: screenshots, to: kept)
            Issue.record("the account page checks failed (screenshots in \(kept.path)):\n\(checked.stdout)\(checked.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: screenshots.appendingPathComponent("account.png").path))

        // What the page did, as the store's API sees it.
        let tv = try await http.send("POST", "/v1/device-codes/token", json: #"{"deviceCode": "\#(grant.deviceCode)"}"#)
        #expect(tv.status == 401 || tv.status == 400, "the TV was approved, then every device was signed out and the account deleted: \(tv.status)")
        #expect(try await http.send("GET", "/v1/account", token: phone.token).status == 401)
        #expect(try await http.send("GET", "/v1/account", token: ann.token).status == 401)
        let view = try await http.send("GET", "/v1/admin/accounts/\(ann.accountId)", token: try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)).decode(AdminAccountView.self)
        #expect(view.deleted == true && view.email == nil && view.charges.count == 2)
        _ = await server.stop()
    }
}
