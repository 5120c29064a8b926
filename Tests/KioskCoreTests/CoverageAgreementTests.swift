import Foundation
import KioskCore
import Testing

/// The product's coverage rule against the shared cases of `Tests/Fixtures/coverage-cases.json`,
/// whose every answer `scripts/torture/test_coverage.py` also holds the fault suite's copy of the
/// rule to (`scripts/torture/rules/coverage.py`): the checker and the product agree, case for
/// case, grace windows included.
///
/// An issue is covered as the store's entitlement composes the rule (`Store+Entitlement.swift`): a
/// standing period covers it by ``SubscriptionCoverage``, and so does a billing grace window, by
/// the same rule from the window's start to its end; a revoked period covers nothing.
@Suite("The coverage rule agrees with the fault suite's copy")
struct CoverageAgreementTests {
    struct Fixture: Decodable {
        var cases: [Case]
    }

    /// One account's subscription to one series, and the series' issues with their answers.
    struct Case: Decodable {
        var name: String
        var seriesIssueDates: [String]
        var periods: [Period]
        var graceWindows: [Window]
        var issues: [Issue]
    }

    struct Period: Decodable {
        var purchased: String
        var expires: String
        var revoked: Bool
    }

    struct Window: Decodable {
        var startsAt: String
        var endsAt: String
    }

    struct Issue: Decodable {
        var published: String
        var covered: Bool
    }

    /// `Tests/Fixtures/coverage-cases.json`, found from this file's own path.
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent("coverage-cases.json")

    static func cases() throws -> [Case] {
        try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: fixture)).cases
    }

    static func instant(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text), "not an ISO 8601 instant: \(text)")
    }

    /// Whether the case's subscription covers the issue published on `published`, by the product's
    /// rule as the store's entitlement applies it: its standing periods, then its grace windows.
    static func covered(_ published: String, in subscription: Case) throws -> Bool {
        var coverages: [SubscriptionCoverage] = []
        for period in subscription.periods where !period.revoked {
            coverages.append(SubscriptionCoverage(purchased: try instant(period.purchased), expires: try instant(period.expires)))
        }
        for window in subscription.graceWindows {
            let grace = GraceWindow(startsAt: try instant(window.startsAt), endsAt: try instant(window.endsAt))
            coverages.append(SubscriptionCoverage(purchased: grace.startsAt, expires: grace.endsAt))
        }
        return coverages.contains(where: { $0.covers(published, seriesIssueDates: subscription.seriesIssueDates) })
    }

    @Test("every issue of every case gets the fixture's answer")
    func everyCase() throws {
        let cases = try Self.cases()
        #expect(cases.count >= 15)
        for subscription in cases {
            for issue in subscription.issues {
                let covered = try Self.covered(issue.published, in: subscription)
                #expect(covered == issue.covered, "\(subscription.name): the issue of \(issue.published)")
            }
        }
    }

    @Test("the fixture has grace windows, revocations, renewals and answers of both kinds")
    func fixtureCoversTheRule() throws {
        let cases = try Self.cases()
        #expect(cases.contains(where: { !$0.graceWindows.isEmpty }))
        #expect(cases.contains(where: { $0.periods.contains(where: { $0.revoked }) }))
        #expect(cases.contains(where: { $0.periods.count > 1 }))
        let answers = Set(cases.flatMap { $0.issues.map { $0.covered } })
        #expect(answers == [true, false])
    }
}
