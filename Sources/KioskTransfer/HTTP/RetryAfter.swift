import Foundation

/// `Retry-After` (RFC 9110, section 10.2.3) as seconds from now: delta-seconds, or an HTTP date;
/// nil for anything else. The one reading of it, for the store's API calls and the transfers
/// alike: there were two, which disagreed (one took a date and "1.5" seconds, the other neither).
public enum RetryAfter {
    /// - Parameter now: the instant an HTTP date is counted from.
    public static func seconds(_ value: String?, now: Date = Date()) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // Delta-seconds: digits only. A number too large to hold is a very long wait.
            return TimeInterval(Int(value) ?? Int.max)
        }
        // IMF-fixdate, the form HTTP dates are sent in (`Sun, 06 Nov 1994 08:49:37 GMT`).
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSince(now)) }
    }
}
