extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace).
    ///
    /// Replaces `trimmingCharacters(in: .whitespaces)` on request paths: that one bridges through
    /// Foundation's `NSString`, and was 7 % of the server's time answering a catalog 304 (perf,
    /// `wrk -c32`), through the If-None-Match comparison alone.
    public func trimmingOptionalWhitespace() -> Substring {
        let text = Substring(self)
        guard let first = text.utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
              let last = text.utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return text[text.endIndex...] }
        return text[first...last]
    }
}
