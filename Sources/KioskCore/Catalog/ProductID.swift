/// The one rule for what a product ID may be, shared by the catalog loader and the client.
///
/// A reverse-DNS name: at least three dot-separated labels of lowercase ASCII letters, digits,
/// `-` and `_`, each starting with a letter or digit, 128 characters at most. Such an ID can
/// never contain `/`, `..`, a NUL or a control character, so the client may use it as one file
/// name (`Library/<id>`, `downloads/<id>.partial`) — and it builds no path from any other.
public enum ProductID {
    public static let maxLength = 128

    public static func isValid(_ id: String) -> Bool {
        guard (1...maxLength).contains(id.utf8.count) else { return false }
        var labels = 0
        var labelStart = true
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "."):
                if labelStart { return false }
                labels += 1
                labelStart = true
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                labelStart = false
            case UInt8(ascii: "-"), UInt8(ascii: "_"):
                if labelStart { return false }
            default:
                return false
            }
        }
        return !labelStart && labels + 1 >= 3
    }

    /// The ID as a message can show it: control characters escaped, cut at 80 characters.
    public static func printable(_ id: String) -> String {
        let escaped = id.unicodeScalars.map { scalar -> String in
            scalar.value < 0x20 || scalar.value == 0x7f ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
        }.joined()
        return escaped.count > 80 ? String(escaped.prefix(77)) + "…" : escaped
    }

    /// Why `id` is refused, in words a person can act on.
    public static func problem(_ id: String) -> String {
        "\"\(printable(id))\" is not a reverse-DNS product ID like com.example.books.title (lowercase letters, digits, - and _, at most \(maxLength) characters)"
    }
}
