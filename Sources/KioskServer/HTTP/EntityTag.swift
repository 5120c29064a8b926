import KioskCore

/// Entity-tag comparisons of RFC 9110 §8.8.3 and §13.1.
enum EntityTag {
    /// True when an If-None-Match field value names one of `tags` (or is `*`).
    ///
    /// If-None-Match uses the weak comparison: `W/"x"` matches `"x"`.
    ///
    /// Split on UTF-8 bytes, not characters: splitting the String walked grapheme clusters, the
    /// most of what this comparison cost a catalog 304.
    static func ifNoneMatch(_ fieldValue: String, matchesAnyOf tags: [String]) -> Bool {
        for item in fieldValue.utf8.split(separator: UInt8(ascii: ",")) {
            var tag = Substring(item).trimmingOptionalWhitespace()
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tags.contains(where: { $0 == tag }) { return true }
        }
        return false
    }
}
