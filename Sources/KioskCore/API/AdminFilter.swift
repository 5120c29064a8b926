import Foundation

/// What a list is narrowed to: `--since DATE`, `--product ID`, `--state STATE`.
///
/// The admin lists send it as query parameters (`?since=…&product=…&state=…`) and the server
/// applies it in the list's one query; `kiosk transactions` applies it to the device's own rows.
/// One type on both sides, so the CLI and the server agree on what a date or a state is.
public struct ListFilter: Sendable, Equatable {
    /// Only what happened at or after this moment.
    public var since: Date?
    public var productId: String?
    /// A state name: a ``TransactionStatus`` on the server, a client's payment state locally.
    public var state: String?

    public init(since: Date? = nil, productId: String? = nil, state: String? = nil) {
        self.since = since
        self.productId = productId
        self.state = state
    }

    public var isEmpty: Bool { since == nil && productId == nil && state == nil }

    /// The filter as a query string (`?since=2026-11-24T00:00:00Z&product=…`), or "" for none.
    public var query: String {
        var items: [URLQueryItem] = []
        if let since { items.append(URLQueryItem(name: "since", value: Self.timestamp(since))) }
        if let productId { items.append(URLQueryItem(name: "product", value: productId)) }
        if let state { items.append(URLQueryItem(name: "state", value: state)) }
        guard !items.isEmpty else { return "" }
        var components = URLComponents()
        components.queryItems = items
        // `+` would read as a space on the other side.
        return "?" + (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
    }

    /// A date as a person types it: `2026-11-24` (midnight UTC), `2026-11-24T13:05:00Z` or with an
    /// offset, or a time ago: `30m`, `24h`, `7d`.
    /// - Throws: ``ListFilterError`` naming the text and the forms accepted.
    public static func date(_ text: String, now: Date = Date()) throws(ListFilterError) -> Date {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let unit = trimmed.last, let amount = Int(trimmed.dropLast()), amount >= 0 {
            let seconds: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400]
            if let scale = seconds[unit] { return now.addingTimeInterval(-Double(amount) * scale) }
        }
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.timeZone = TimeZone(identifier: "UTC")
        day.dateFormat = "yyyy-MM-dd"
        if trimmed.count == 10, let date = day.date(from: trimmed) { return date }
        let instant = ISO8601DateFormatter()
        if let date = instant.date(from: trimmed) { return date }
        instant.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = instant.date(from: trimmed) { return date }
        throw ListFilterError(message: "--since \"\(text)\" is not a date: give YYYY-MM-DD, an ISO 8601 time such as 2026-11-24T13:05:00Z, or a time ago such as 30m, 24h or 7d")
    }

    /// `2026-11-24T13:05:00Z`: what the query carries.
    public static func timestamp(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }

    /// `2026-11-24`, the UTC day of `date`: the unit the per-day lists (sales, downloads) count in.
    public static func day(_ date: Date) -> String {
        String(timestamp(date).prefix(10))
    }

    /// `2026-11-24 13:05`: a moment in a list's line, UTC, to the minute.
    public static func shown(_ date: Date) -> String {
        let text = timestamp(date)
        return String(text.prefix(10)) + " " + String(text.dropFirst(11).prefix(5))
    }
}

/// A filter that cannot be read: one line naming the value and what is accepted.
public struct ListFilterError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
