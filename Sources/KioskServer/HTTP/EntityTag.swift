/// Entity-tag comparisons of RFC 9110 §8.8.3 and §13.1.
enum EntityTag {
    /// True when an If-None-Match field value names one of `tags` (or is `*`).
    ///
    /// If-None-Match uses the weak comparison: `W/"x"` matches `"x"`.
    static func ifNoneMatch(_ fieldValue: String, matchesAnyOf tags: [String]) -> Bool {
        let listed = fieldValue.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if listed.contains("*") { return true }
        let opaque = listed.map { $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0 }
        return opaque.contains { tags.contains($0) }
    }
}
