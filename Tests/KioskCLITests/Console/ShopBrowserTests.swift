import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The shop in a real browser: Debian's chromium driven by playwright (scripts/shop_check.py),
/// judged by axe-core (axe-playwright-python) and, for the EPUB a reader downloads from the
/// library, by epubcheck. `make test-tools` installs all three; a missing one fails the test,
/// naming what to run.
@Suite("the shop in a browser")
struct ShopBrowserTests {
    static let book = "com.kiosk.books.salt-and-stars"
    static let issue = "com.kiosk.magazines.harbor-monthly.issue-02"
    static let password = "correct horse battery"

    @Test("a reader walks from the front page to a book, signs in to buy it, downloads it from the library (epubcheck passes it), and every page passes axe at 390 px")
    func readerWalk() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.python.path),
                     "no playwright at \(ConsoleBrowserTests.python.path): run make test-tools (it makes that venv and installs playwright)")
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.chromium), "no \(ConsoleBrowserTests.chromium): run make test-tools (apt-get install chromium)")
        try #require(FileManager.default.fileExists(atPath: PublicationTests.epubcheck), "epubcheck is missing: apt-get install epubcheck (make test-tools)")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let created = try await http.send("POST", "/v1/accounts", json: #"{"email": "ann@example.com", "password": "\#(Self.password)", "deviceName": "laptop"}"#)
        let ann = try created.decode(AccountCreated.self)
        #expect(try await http.pay(Self.book, token: ann.token).status == 200)

        let screenshots = directory.path("screenshots")
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let downloaded = directory.path("downloaded.epub")
        let checked = try await KioskCommand.run(
            [SampleStore.repository.appendingPathComponent("scripts/shop_check.py").path,
             "--store", server.url, "--email", "ann@example.com", "--password", Self.password, "--book", Self.book, "--title", "Salt and Stars",
             "--issue", Self.issue, "--issue-title", "Harbor Monthly, October 2026",
             "--download", downloaded.path, "--screenshots", screenshots.path, "--chromium", ConsoleBrowserTests.chromium],
            program: ConsoleBrowserTests.python)
        if checked.status != 0 {
            let kept = SampleStore.repository.appendingPathComponent(".build/shop-screenshots")
            try? FileManager.default.removeItem(at: kept)
            try? FileManager.default.createDirectory(at: kept.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? FileManager.default.copyItem(at: screenshots, to: kept)
            Issue.record("the shop checks failed (screenshots in \(kept.path)):\n\(checked.stdout)\(checked.stderr)")
        }
        let publisher = try Data(contentsOf: store.content.appendingPathComponent("publications/salt-and-stars.epub"))
        #expect((try? Data(contentsOf: downloaded)) == publisher, "the browser's download is the publisher's file byte for byte")
        let epubcheck = try PublicationTests.checkEPUB(downloaded.path)
        #expect(epubcheck.status == 0, "epubcheck: \(epubcheck.output)")
        // One charge each: the book before the walk, the issue in it.
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await http.charges(accountId: ann.accountId, adminToken: adminToken) == [499, 299])
        _ = await server.stop()
    }

    @Test("a subscriber walks from the plan to Stripe's checkout and back, sees an issue of the first period once Stripe's events land, and downloads an issue of the second period once Stripe renews it")
    func subscriberWalk() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.python.path),
                     "no playwright at \(ConsoleBrowserTests.python.path): run make test-tools (it makes that venv and installs playwright)")
        try #require(FileManager.default.isExecutableFile(atPath: ConsoleBrowserTests.chromium), "no \(ConsoleBrowserTests.chromium): run make test-tools (apt-get install chromium)")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // An issue in each period, dated around today: the periods are the invoices' own.
        let now = Int(Date().timeIntervalSince1970)
        let day = { (seconds: Int) in String(ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds))).prefix(10)) }
        let (start, firstEnd, secondEnd) = (now - 10 * 86_400, now + 20 * 86_400, now + 50 * 86_400)
        try store.editHarborMonthly(graceDays: nil, issues: [("walk-a", day(now - 5 * 86_400)), ("walk-b", day(now + 30 * 86_400))])
        let stripe = try await StripeStandIn.start()
        let secret = "whsec_kiosk_walk"
        let server = try await ServerProcess.start(store, extraArguments: ["--stripe-secret-key", StripeStandIn.key, "--stripe-api-url", stripe.url,
                                                                          "--stripe-webhook-secret", secret], log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let created = try await http.send("POST", "/v1/accounts", json: #"{"email": "sam@example.com", "password": "\#(Self.password)", "deviceName": "phone"}"#)
        #expect(created.status == 200 || created.status == 201)
        let screenshots = directory.path("screenshots")
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let checked = try await KioskCommand.run(
            [SampleStore.repository.appendingPathComponent("scripts/shop_subscribe_check.py").path,
             "--store", server.url, "--email", "sam@example.com", "--password", Self.password, "--plan", SampleStore.harborMonthly,
             "--first-issue-title", "Harbor Monthly walk-a", "--second-issue-title", "Harbor Monthly walk-b",
             "--periods", "\(start),\(firstEnd),\(secondEnd)", "--webhook-secret", secret, "--stripe-record", stripe.record.path,
             "--download", directory.path("issue.tar.gz").path, "--screenshots", screenshots.path, "--chromium", ConsoleBrowserTests.chromium],
            program: ConsoleBrowserTests.python)
        #expect(checked.status == 0, "the subscriber's walk failed:\n\(checked.stdout)\(checked.stderr)")
        // The issue is an HTML folder packed as tar.gz: the browser saves the archive, whole.
        let listed = try ToolProcess.run("/usr/bin/tar", ["-tzf", directory.path("issue.tar.gz").path])
        #expect(listed.status == 0 && !listed.output.isEmpty, "the download is the issue's archive: \(listed.output)")
        _ = await server.stop()
        await stripe.stop()
    }
}
