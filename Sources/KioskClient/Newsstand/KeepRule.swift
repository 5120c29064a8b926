import Foundation

/// How many of a title's subscription issues a device keeps: the newest N, or those of the last
/// N days. What a rule never removes is ``ShelfRule``'s to say (the newest issue, pins, issues
/// bought on their own, books).
public enum KeepRule: Sendable, Equatable, Codable {
    case lastIssues(Int)
    case days(Int)

    /// NOOK's newsstand defaults, by how often the title comes out: 10 daily or weekly issues,
    /// 12 monthly, 6 bimonthly, 4 quarterly.
    public static func standard(for frequency: Frequency) -> KeepRule {
        switch frequency {
        case .daily, .weekly: .lastIssues(10)
        case .monthly: .lastIssues(12)
        case .bimonthly: .lastIssues(6)
        case .quarterly: .lastIssues(4)
        }
    }

    public var description: String {
        switch self {
        case .lastIssues(let count): count == 1 ? "the last issue" : "the last \(count) issues"
        case .days(let days): "issues of the last \(days) days"
        }
    }
}

/// How often a title comes out.
public enum Frequency: String, Sendable, Codable, CaseIterable {
    case daily, weekly, monthly, bimonthly, quarterly

    /// The catalog gives no frequency: it is read off the title's issues, as the median gap
    /// between consecutive publication dates (one late or double issue does not change it).
    /// Nil with fewer than two dated issues; the caller then takes monthly, the commonest.
    public static func of(publicationDates dates: [String]) -> Frequency? {
        let days = Set(dates).compactMap(IssueDate.day).sorted()
        guard days.count >= 2 else { return nil }
        let gaps = zip(days.dropFirst(), days).map { $0 - $1 }.sorted()
        let median = gaps[gaps.count / 2]
        return switch median {
        case ..<4: .daily
        case ..<16: .weekly
        case ..<46: .monthly
        case ..<76: .bimonthly
        default: .quarterly
        }
    }
}

/// A `YYYY-MM-DD` publication date as a day number (days since 1970-01-01, UTC).
enum IssueDate {
    static func day(_ text: String) -> Int? {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        var components = DateComponents()
        (components.year, components.month, components.day) = (parts[0], parts[1], parts[2])
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        guard let date = calendar.date(from: components) else { return nil }
        return Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
    }

    static func today(_ now: Date) -> Int { Int((now.timeIntervalSince1970 / 86_400).rounded(.down)) }
}

/// What a title's keep rule removes, decided on what the device holds: a pure rule, so the agent,
/// `kiosk library --tidy` and an app all decide alike, and a test can read it.
///
/// Never removed: the title's newest issue on the device, a pinned issue, an issue bought on its
/// own (not through the subscription), and anything not installed. Of the rest (the issues the
/// subscription brought), the rule keeps the newest N, or those published in the last N days;
/// pins and single purchases are kept beside them and do not count against N.
public struct ShelfRule: Sendable {
    public struct Issue: Sendable, Equatable {
        public var productId: String
        public var publicationDate: String
        public var installed: Bool
        public var pinned: Bool
        public var boughtAlone: Bool

        public init(productId: String, publicationDate: String, installed: Bool, pinned: Bool, boughtAlone: Bool) {
            (self.productId, self.publicationDate, self.installed, self.pinned, self.boughtAlone) = (productId, publicationDate, installed, pinned, boughtAlone)
        }
    }

    public var rule: KeepRule

    public init(rule: KeepRule) {
        self.rule = rule
    }

    /// The issues the rule removes, oldest first.
    public func removable(_ issues: [Issue], today: Int) -> [String] {
        let installed = issues.filter(\.installed).sorted { ($0.publicationDate, $0.productId) > ($1.publicationDate, $1.productId) }
        guard let newest = installed.first else { return [] }
        let subscribed = installed.filter { !$0.pinned && !$0.boughtAlone && $0.productId != newest.productId }
        let going: [Issue]
        switch rule {
        case .lastIssues(let count):
            // The newest issue counts as one of the N it keeps.
            going = Array(subscribed.dropFirst(max(0, count - 1)))
        case .days(let days):
            going = subscribed.filter { (IssueDate.day($0.publicationDate) ?? Int.min) < today - days }
        }
        return going.reversed().map(\.productId)
    }
}
