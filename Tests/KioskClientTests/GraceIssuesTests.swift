import Foundation
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The issues a billing grace window entitles reach the device as a paid period's do, though no
/// receipt carries the window: the client asks the store for its subscriptions' windows.
@Suite("Issues published during a billing grace period")
struct GraceIssuesTests {
    static let monthly = SampleStore.harborMonthly
    static let series = SampleStore.harborSeries

    @Test("a renewal fails into grace: the issue published during grace is queued and installed; one published after grace's end is not")
    func graceIssueQueued() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // Bought today: the period ends a month on; grace runs 6 days past that.
        let end = try #require(Calendar(identifier: .gregorian).date(byAdding: .month, value: 1, to: Date()))
        let issues: [(suffix: String, day: String)] = [("grace-issue", SubscriptionCoverage.day(end.addingTimeInterval(3 * 86_400))),
                      ("late-issue", SubscriptionCoverage.day(end.addingTimeInterval(25 * 86_400)))]
        try store.editHarborMonthly(graceDays: 6, issues: issues)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            _ = try await client.sync()
            _ = try await client.buy(Self.monthly)
            let installedAtPurchase = try client.libraryEntries().map(\.item.productId)
            #expect(!installedAtPurchase.contains("\(Self.series).grace-issue"))
            let accountId = try #require(try client.accountID())
            let expires = try #require(try await client.subscriptions()?.subscriptions.first?.expiresDate)

            // The account's clock a minute past the period's end, renewals failing: grace begins.
            let http = StoreHTTP(baseURL: url)
            let now = try #require(try await client.subscriptions()?.now)
            let settings = SandboxAccountSettings(renewals: .fail, advanceSeconds: expires.addingTimeInterval(60).timeIntervalSince(now))
            let sandbox = try await http.send("POST", "/v1/admin/accounts/\(accountId)/sandbox", token: server.adminToken,
                                              json: String(decoding: try JSONEncoder.kiosk.encode(settings), as: UTF8.self))
            #expect(sandbox.status == 200)
            #expect(try await http.send("POST", "/v1/admin/renewals/run", token: server.adminToken).status == 200)
            let subscription = try #require(try await client.subscriptions()?.subscriptions.first)
            #expect(subscription.state == .gracePeriod)
            #expect(subscription.graceWindows?.count == 1)

            let report = try await client.resume()
            #expect(report.queued.contains("\(Self.series).grace-issue"), "\(report.queued)")
            #expect(!report.queued.contains("\(Self.series).late-issue"))
            #expect(try client.libraryEntries().map(\.item.productId).contains("\(Self.series).grace-issue"))
        }
    }
}
