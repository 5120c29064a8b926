/// A `GET` or `HEAD` over HTTP/1.1 without a body, recognised from the request's bytes, with its
/// target and the few fields an answer from bytes (``BytesResponder``) and its log line need.
///
/// It recognises only what every HTTP/1.1 parser reads the same way, and nothing that changes
/// how the next request on the connection is framed: a request line of `GET` or `HEAD`, one space,
/// a target in origin form (a `/`, then only the characters RFC 3986 allows in a path and a query,
/// at most 1 KiB), one space and `HTTP/1.1`, then field lines of a token, a colon and visible
/// ASCII, each ending in CR LF, then an empty line. A body's fields (`Content-Length`,
/// `Transfer-Encoding`, `Expect`), `Connection` (and `Proxy-Connection`, which llhttp reads as
/// one), `Upgrade`, a folded
/// line, a bare CR or LF, a byte outside ASCII, a request over 8 KiB up to its empty line, more
/// than 100 fields or a request not yet whole: any of them makes it nil, and NIO's parser
/// (llhttp) reads the bytes instead.
struct RawGet: Equatable {
    var isHead: Bool
    /// The request's target as sent (`/products/a.b?x=1`): what HTTP Types calls its path.
    var target: String
    /// Every `If-None-Match` line's value, joined with commas.
    var ifNoneMatch = ""
    /// Every `Accept-Encoding` line's value, joined with commas.
    var acceptEncoding = ""
    /// Every `X-Forwarded-For` line's value, joined with commas (the rate limits' client address).
    var forwardedFor = ""
    var userAgent: String?
    /// The token of one `Authorization: Bearer` line; any other `Authorization` sets
    /// ``hasAuthorization`` alone. Only a held poll (``HeldFeedPoll``) answers a request that has
    /// one: the account of every other request is the middleware's to resolve.
    var bearerToken: String?
    var hasAuthorization = false
    /// The request's length in bytes, up to and including its empty line.
    var length = 0

    static let maximumLength = 8 << 10
    static let maximumFields = 100
    /// The longest target recognised: no link of the store's is longer (``RenderedPages/longestAddress``).
    static let maximumTarget = 1 << 10
}

extension RawGet {
    private static let get = Array("GET ".utf8)
    private static let head = Array("HEAD ".utf8)
    private static let version = Array(" HTTP/1.1\r\n".utf8)

    /// The request at the start of `bytes`, or nil when it is not certainly one (see the type).
    init?(_ bytes: UnsafeRawBufferPointer) {
        let isHead: Bool
        if bytes.starts(with: Self.get) {
            isHead = false
        } else if bytes.starts(with: Self.head) {
            isHead = true
        } else {
            return nil
        }
        let end = min(bytes.count, Self.maximumLength)
        let targetStart = isHead ? Self.head.count : Self.get.count
        var index = targetStart
        guard index < end, bytes[index] == UInt8(ascii: "/") else { return nil }
        while index < end, index - targetStart < Self.maximumTarget, Self.isTargetByte(bytes[index]) { index += 1 }
        guard index + Self.version.count <= end,
              UnsafeRawBufferPointer(rebasing: bytes[index..<(index + Self.version.count)]).elementsEqual(Self.version)
        else { return nil }
        self.init(isHead: isHead, target: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<index]), as: UTF8.self))
        index += Self.version.count
        var fields = 0
        while true {
            // The empty line that ends the request.
            guard index + 1 < end else { return nil }
            if bytes[index] == 13 {
                guard bytes[index + 1] == 10 else { return nil }
                length = index + 2
                return
            }
            fields += 1
            guard fields <= Self.maximumFields else { return nil }
            // The name: a token, then a colon (no space before it: RFC 9112 §5.1).
            let nameStart = index
            while index < end, Self.isTokenByte(bytes[index]) { index += 1 }
            guard index < end, index > nameStart, bytes[index] == UInt8(ascii: ":") else { return nil }
            let name = UnsafeRawBufferPointer(rebasing: bytes[nameStart..<index])
            index += 1
            // The value: tabs and visible ASCII, then CR LF.
            let valueStart = index
            while index < end, Self.isValueByte(bytes[index]) { index += 1 }
            guard index + 1 < end, bytes[index] == 13, bytes[index + 1] == 10 else { return nil }
            let value = UnsafeRawBufferPointer(rebasing: bytes[valueStart..<index])
            index += 2
            guard record(name: name, value: value) else { return nil }
        }
    }

    /// Keeps what the answer needs from one field; false for a field that rules the request out.
    private mutating func record(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        func named(_ lowercase: StaticString) -> Bool {
            guard name.count == lowercase.utf8CodeUnitCount else { return false }
            for offset in 0..<name.count where name[offset] | 0x20 != lowercase.utf8Start[offset] | 0x20 { return false }
            return true
        }
        func append(_ value: UnsafeRawBufferPointer, to text: inout String) {
            let trimmed = Self.trimmed(value)
            guard !trimmed.isEmpty else { return }
            if !text.isEmpty { text += "," }
            text += String(decoding: trimmed, as: UTF8.self)
        }
        if named("if-none-match") {
            append(value, to: &ifNoneMatch)
        } else if named("accept-encoding") {
            append(value, to: &acceptEncoding)
        } else if named("x-forwarded-for") {
            append(value, to: &forwardedFor)
        } else if named("user-agent") {
            // HTTPFields joins repeated lines with ", " for the log line; so does this.
            let text = String(decoding: Self.trimmed(value), as: UTF8.self)
            userAgent = userAgent.map { "\($0), \(text)" } ?? text
        } else if named("authorization") {
            // Two lines of it are read differently by different stacks: left to llhttp.
            guard !hasAuthorization else { return false }
            hasAuthorization = true
            let text = Self.trimmed(value)
            if text.count > 7, zip(text.prefix(7), "bearer ".utf8).allSatisfy({ $0 | 0x20 == $1 | 0x20 }) {
                let token = Self.trimmed(UnsafeRawBufferPointer(rebasing: text[7...]))
                if !token.isEmpty { bearerToken = String(decoding: token, as: UTF8.self) }
            }
        } else if named("content-length") || named("transfer-encoding") || named("expect") || named("connection")
                    || named("proxy-connection") || named("upgrade") {
            return false
        }
        return true
    }

    private static func trimmed(_ value: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 0
        var end = value.count
        while start < end, value[start] == 32 || value[start] == 9 { start += 1 }
        while end > start, value[end - 1] == 32 || value[end - 1] == 9 { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: value[start..<end])
    }

    /// RFC 9110 §5.6.2's `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// RFC 3986's `pchar`, `/` and `?`: what a path and a query hold (a `#`, a space, a quote or a
    /// byte outside ASCII goes to llhttp).
    private static func isTargetByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"),
             UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
             UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"),
             UInt8(ascii: "/"), UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }

    /// A tab or visible ASCII (no `obs-text`: a byte over 0x7E goes to llhttp).
    private static func isValueByte(_ byte: UInt8) -> Bool {
        byte == 9 || (32...126).contains(byte)
    }
}
