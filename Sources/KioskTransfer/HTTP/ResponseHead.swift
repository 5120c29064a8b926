/// A response's status and header fields, read from the lines libcurl hands its header callback:
/// the one reader of them, for the API client, the transfers and the range fetches (there were
/// three, which disagreed on a status line with two spaces and on a field sent twice).
///
/// A status line starts a new response (after a 100 Continue or a redirect): the fields before it
/// are forgotten. Names are kept in lower case; a field sent twice keeps both values, joined by
/// ", ". Read on the bytes: the line made a String, trimmed through Foundation's `NSString`, took
/// 1.4 % of the machine while the server delivered 1,300 notifications a second, and 0.35 % on the
/// bytes (`perf record -a`, 2026-11-28). White space is HTTP's (space, tab, CR, LF), not Unicode's.
struct ResponseHead {
    /// The status of the last status line; 0 before one (or for one without a number).
    private(set) var status = 0
    private(set) var fields: [String: String] = [:]

    /// Adds one line as libcurl hands it over (with its CR LF).
    /// - Returns: true for the blank line that ends a response's head.
    @discardableResult
    mutating func add(_ raw: UnsafeRawBufferPointer) -> Bool {
        let line = Self.trimmed(raw[...])
        if line.isEmpty { return true }
        if line.starts(with: Self.httpSlash) {
            fields = [:]
            // "HTTP/1.1 200 OK", "HTTP/2 304": the word after the version, however many spaces
            // come between (libcurl takes "HTTP/1.1  200" as a 200 too).
            let afterVersion = line.drop { $0 != UInt8(ascii: " ") }.drop { $0 == UInt8(ascii: " ") }
            let code = afterVersion.prefix { $0 != UInt8(ascii: " ") }
            status = Int(String(decoding: code, as: UTF8.self)) ?? 0
            return false
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        let value = String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self)
        fields[name] = fields[name].map { "\($0), \(value)" } ?? value
        return false
    }

    subscript(name: String) -> String? { fields[name] }

    private static let httpSlash = Array("HTTP/".utf8)

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var slice = bytes
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        return slice
    }
}
