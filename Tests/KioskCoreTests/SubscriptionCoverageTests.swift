import Foundation
import KioskCore
import Testing

/// The one coverage rule, which the store (entitlement) and the client (queued issues) both call.
@Suite("Which issues a subscription period covers")
struct SubscriptionCoverageTests {
    static let issues = ["2026-09-01", "2026-10-01", "2026-11-01", "2026-12-01"]

    static func instant(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    @Test("the issue current at the purchase and every one up to the expiry day, inclusive, by UTC day", arguments: [
        // (bought, expires, publication, covered)
        ("2026-10-15T12:00:00Z", "2026-11-15T12:00:00Z", "2026-09-01", false),  // before the current issue
        ("2026-10-15T12:00:00Z", "2026-11-15T12:00:00Z", "2026-10-01", true),   // current when bought
        ("2026-10-15T12:00:00Z", "2026-11-15T12:00:00Z", "2026-11-01", true),   // published during the period
        ("2026-10-15T12:00:00Z", "2026-11-15T12:00:00Z", "2026-12-01", false),  // after it expired
        ("2026-10-15T12:00:00Z", "2026-12-01T00:00:00Z", "2026-12-01", true),   // on the expiry day itself
        ("2026-10-15T12:00:00Z", "2026-11-30T23:59:59Z", "2026-12-01", false),  // a second before that day
        ("2026-10-31T23:30:00Z", "2026-11-30T23:30:00Z", "2026-10-01", true),   // late on the 31st, UTC
        ("2026-11-01T00:30:00Z", "2026-12-01T00:30:00Z", "2026-10-01", false),  // the 1st in UTC: the new issue is current
        ("2026-11-01T00:30:00Z", "2026-12-01T00:30:00Z", "2026-11-01", true),
        ("2026-11-01T00:30:00+02:00", "2026-12-01T00:30:00+02:00", "2026-10-01", true),  // the 31st in UTC, whatever the local zone
        ("2026-08-15T12:00:00Z", "2026-09-15T12:00:00Z", "2026-09-01", true),   // bought before the first issue
    ])
    func coverage(bought: String, expires: String, publication: String, covered: Bool) throws {
        let coverage = SubscriptionCoverage(purchased: try Self.instant(bought), expires: try Self.instant(expires))
        #expect(coverage.covers(publication, seriesIssueDates: Self.issues) == covered)
    }

    @Test("days are UTC days, not the machine's")
    func utcDays() throws {
        #expect(SubscriptionCoverage.day(try Self.instant("2026-11-01T00:30:00+02:00")) == "2026-10-31")
        #expect(SubscriptionCoverage.day(try Self.instant("2026-10-31T23:59:59-10:00")) == "2026-11-01")
    }
}
