import Foundation
import KioskClient
import Testing

/// The newsstand's keep rule as a pure function of what the device holds (issue 67): NOOK's
/// defaults by frequency, what is never removed, and the order things go.
@Suite("Keep rules: how many issues of a title stay on the device")
struct KeepRuleTests {
    static func dates(every days: Int, count: Int, from start: String = "2026-01-05") -> [String] {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.timeZone = TimeZone(identifier: "UTC")
        guard let first = formatter.date(from: start) else { return [] }
        return (0..<count).map { formatter.string(from: first.addingTimeInterval(Double($0 * days) * 86_400)) }
    }

    @Test("the frequency is the median gap between issues: a late or a double issue does not change it; NOOK's defaults follow")
    func frequencies() {
        #expect(Frequency.of(publicationDates: Self.dates(every: 1, count: 30)) == .daily)
        var weekly = Self.dates(every: 7, count: 20)
        weekly.append("2026-01-06")  // a special issue the day after the first
        #expect(Frequency.of(publicationDates: weekly) == .weekly)
        #expect(Frequency.of(publicationDates: Self.dates(every: 30, count: 12)) == .monthly)
        #expect(Frequency.of(publicationDates: Self.dates(every: 61, count: 6)) == .bimonthly)
        #expect(Frequency.of(publicationDates: Self.dates(every: 91, count: 4)) == .quarterly)
        #expect(Frequency.of(publicationDates: ["2026-01-05"]) == nil)
        #expect(KeepRule.standard(for: .daily) == .lastIssues(10) && KeepRule.standard(for: .weekly) == .lastIssues(10))
        #expect(KeepRule.standard(for: .monthly) == .lastIssues(12) && KeepRule.standard(for: .bimonthly) == .lastIssues(6))
        #expect(KeepRule.standard(for: .quarterly) == .lastIssues(4))
    }

    @Test("the last N: the newest N of the issues the subscription brought stay, beside pins and issues bought alone; the rest go oldest first; what is not installed is not counted")
    func lastIssues() {
        let dates = Self.dates(every: 7, count: 52)
        var issues = dates.enumerated().map { ShelfRule.Issue(productId: "issue-\($0.offset)", publicationDate: $0.element, installed: true, pinned: false, boughtAlone: false) }
        issues[3].pinned = true
        issues[50].pinned = true
        issues[5].boughtAlone = true
        issues[49].installed = false  // removed earlier, or still downloading
        let going = ShelfRule(rule: .lastIssues(10)).removable(issues, today: 0)
        // Kept: issues 51 down to 41 but 50 (pinned, kept anyway) and 49 (not installed): 10 of them.
        let kept = Set(issues.map(\.productId)).subtracting(going)
        let expected = Set(["issue-51", "issue-48", "issue-47", "issue-46", "issue-45", "issue-44", "issue-43", "issue-42", "issue-41", "issue-40",
                            "issue-50", "issue-3", "issue-5", "issue-49"])
        #expect(kept == expected, "\(kept.sorted())")
        #expect(going.first == "issue-0" && going.last == "issue-39", "oldest first: \(going)")
        #expect(going.count == 52 - expected.count)
    }

    @Test("the last N days: older issues go, but never the title's newest, a pin or an issue bought alone")
    func lastDays() throws {
        let dates = Self.dates(every: 7, count: 10, from: "2026-01-05")
        var issues = dates.enumerated().map { ShelfRule.Issue(productId: "issue-\($0.offset)", publicationDate: $0.element, installed: true, pinned: false, boughtAlone: false) }
        issues[0].pinned = true
        let today = try #require(Self.day("2026-03-30"))  // issue 9 is 2026-03-09: 21 days ago
        let going = ShelfRule(rule: .days(14)).removable(issues, today: today)
        #expect(going == (1...8).map { "issue-\($0)" }, "\(going)")
        // Everything past the window: the newest still stays.
        let later = try #require(Self.day("2027-06-01"))
        #expect(!ShelfRule(rule: .days(14)).removable(issues, today: later).contains("issue-9"))
        #expect(ShelfRule(rule: .lastIssues(1)).removable([], today: 0).isEmpty)
    }

    static func day(_ text: String) -> Int? {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.date(from: text).map { Int($0.timeIntervalSince1970 / 86_400) }
    }
}
