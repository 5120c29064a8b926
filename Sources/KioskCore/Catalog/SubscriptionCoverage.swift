import Foundation

/// The one rule for which issues a subscription period covers: the store applies it when it checks
/// a receipt for an issue, and the client when it queues the issues a subscription brings.
///
/// A period covers the issue of its series that was current when it was bought (the latest one
/// published on or before the purchase day) and every issue published up to and including the day
/// it expires. An expired period still covers what was published while it ran. Catalog publication
/// dates are days (`yyyy-MM-dd`) with no time zone, so instants are compared by their UTC day: the
/// store, every reader's device and the catalog agree whatever the local time zone.
public struct SubscriptionCoverage: Sendable, Equatable {
    public var purchased: Date
    public var expires: Date

    public init(purchased: Date, expires: Date) {
        self.purchased = purchased
        self.expires = expires
    }

    /// Whether the issue published on `publicationDate` is covered, given the publication dates of
    /// the series' issues (to find the one current at the purchase).
    public func covers<Dates: Sequence<String>>(_ publicationDate: String, seriesIssueDates: Dates) -> Bool {
        let boughtDay = Self.day(purchased)
        let current = seriesIssueDates.filter { $0 <= boughtDay }.max() ?? boughtDay
        return publicationDate >= current && publicationDate <= Self.day(expires)
    }

    /// `yyyy-MM-dd` of an instant in UTC, comparable with catalog publication dates as text.
    public static func day(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}

/// What an account holds of one series: its paid periods and its billing grace windows (from an
/// unpaid period's end to grace's end, or to the recovery or expiry that closed it). The store
/// checks a receipt for an issue by it, counts an issue's owners by it, and the client queues a
/// subscription's issues by it, so the three cannot disagree.
public struct SeriesCoverage: Sendable, Equatable {
    public var periods: [SubscriptionCoverage]
    public var graceWindows: [SubscriptionCoverage]

    public init(periods: [SubscriptionCoverage], graceWindows: [SubscriptionCoverage] = []) {
        self.periods = periods
        self.graceWindows = graceWindows
    }

    /// Whether the issue published on `publicationDate` is covered: by a paid period, or by a grace
    /// window, which entitles what was published during it as a paid period does (the same rule).
    public func covers<Dates: Collection<String>>(_ publicationDate: String, seriesIssueDates: Dates) -> Bool {
        periods.contains { $0.covers(publicationDate, seriesIssueDates: seriesIssueDates) }
            || graceWindows.contains { $0.covers(publicationDate, seriesIssueDates: seriesIssueDates) }
    }
}
