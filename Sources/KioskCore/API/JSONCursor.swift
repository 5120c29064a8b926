import Foundation

/// A cursor over JSON bytes that reads the values the catalog is made of. Each method reads one
/// value (with the white space before it) and leaves the cursor just after it.
///
/// The bytes may be one piece of a larger document (a product of a catalog read as it arrives):
/// `base` is where they start in it, so an error names the byte in the document, not in the piece.
///
/// **Performance layer.** With ``CatalogReader`` (its only user), replaces `JSONDecoder` for
/// catalog documents, which spent about 12 µs a product in generic containers. The figures
/// (docs/benchmarks.md, 100,000 products, a 19.0 MB catalog, 2026-11-22): a full `kiosk sync`
/// 0.67 s and 81 MiB peak, against 2.89 s and 147 MiB before (8.9 s before that); a
/// `kiosk serve --published` start 0.62 s against 1.38 s.
struct JSONCursor {
    private let bytes: UnsafeRawBufferPointer
    private let base: Int
    private(set) var offset = 0
    /// Containers open around the cursor; skipping a value deeper than ``maxDepth`` is refused,
    /// so no document can exhaust the stack.
    private var depth = 0
    static let maxDepth = 64

    init(_ bytes: UnsafeRawBufferPointer, base: Int = 0) {
        self.bytes = bytes
        self.base = base
    }

    /// Where the cursor is in the whole document.
    var position: Int { base + offset }

    /// Only white space is left.
    mutating func atEnd() -> Bool {
        skipWhitespace()
        return offset == bytes.count
    }

    /// The document is over: only white space may follow.
    mutating func end() throws {
        skipWhitespace()
        guard offset == bytes.count else { throw failure("the document", "has bytes after its end (at byte \(position))") }
    }

    /// Reads an object, calling `member` with each key and the cursor on its value (which
    /// `member` must read or skip).
    mutating func object(at place: @autoclosure () -> String, _ member: (String, inout JSONCursor) throws -> Void) throws {
        try expect(UInt8(ascii: "{"), at: place(), "an object")
        try enter(place())
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            offset += 1
            depth -= 1
            return
        }
        while true {
            let key = try string(at: place())
            try expect(UInt8(ascii: ":"), at: place(), "a colon after \"\(key)\"")
            try member(key, &self)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "}"):
                depth -= 1
                return
            default: throw failure(place(), "expected a comma or } after \"\(key)\" (at byte \(position))")
            }
        }
    }

    /// Reads an array, calling `element` with the cursor on each element.
    mutating func array(at place: @autoclosure () -> String, _ element: (inout JSONCursor) throws -> Void) throws {
        try expect(UInt8(ascii: "["), at: place(), "an array")
        try enter(place())
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            offset += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "]"):
                depth -= 1
                return
            default: throw failure(place(), "expected a comma or ] (at byte \(position))")
            }
        }
    }

    /// `null` as nil, anything else read by `value`.
    mutating func optional<T>(_ value: (inout JSONCursor) throws -> T) throws -> T? {
        skipWhitespace()
        if peek() == UInt8(ascii: "n") {
            try literal("null")
            return nil
        }
        return try value(&self)
    }

    /// A string, its escapes decoded; the bytes must be UTF-8 (ASCII, the usual case, needs no check).
    mutating func string(at place: @autoclosure () -> String) throws -> String {
        try expect(UInt8(ascii: "\""), at: place(), "a string")
        let start = offset
        var high: UInt8 = 0
        // The common case has no escape: the string is its bytes.
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "\"") {
                defer { offset += 1 }
                let utf8 = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
                return high < 0x80 ? String(decoding: utf8, as: UTF8.self) : try text(utf8, at: place())
            }
            high |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure(place(), "has a control character in a string (at byte \(position)); it must be escaped") }
            offset += 1
        }
        var decoded = Array(bytes[start..<offset])
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                return try decoded.withUnsafeBytes { try text($0, at: place()) }
            case UInt8(ascii: "\\"):
                try escape(into: &decoded, at: place())
            case ..<0x20:
                throw failure(place(), "has a control character in a string (at byte \(position - 1)); it must be escaped")
            default:
                decoded.append(byte)
            }
        }
        throw failure(place(), "has a string that never ends")
    }

    /// A whole number that fits an `Int` (no fraction, no exponent).
    mutating func integer(at place: @autoclosure () -> String) throws -> Int {
        skipWhitespace()
        let negative = peek() == UInt8(ascii: "-")
        if negative { offset += 1 }
        let start = offset
        var value = 0
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            let digit = Int(byte - UInt8(ascii: "0"))
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else { throw failure(place(), "is a number too large") }
            value = sum
            offset += 1
        }
        let digits = offset - start
        guard digits > 0 else { throw failure(place(), "expected a whole number (at byte \(position))") }
        guard digits == 1 || bytes[start] != UInt8(ascii: "0") else { throw failure(place(), "has a number with a leading zero") }
        if let byte = peek(), byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            throw failure(place(), "expected a whole number, not a fraction or an exponent")
        }
        return value
    }

    /// `true` or `false`.
    mutating func boolean(at place: @autoclosure () -> String) throws -> Bool {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "t"): try literal("true"); return true
        case UInt8(ascii: "f"): try literal("false"); return false
        default: throw failure(place(), "is not true or false (at byte \(position))")
        }
    }

    /// Reads past any value, checking it is well formed.
    mutating func skipValue() throws {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "{"): try object(at: "a skipped value") { _, reader in try reader.skipValue() }
        case UInt8(ascii: "["): try array(at: "a skipped value") { reader in try reader.skipValue() }
        case UInt8(ascii: "\""): _ = try string(at: "a skipped value")
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: try skipNumber()
        }
    }

    // MARK: Pieces

    private mutating func skipNumber() throws {
        let start = offset
        if peek() == UInt8(ascii: "-") { offset += 1 }
        guard try digits() > 0 else { throw failure("a value", "is not JSON (at byte \(base + start))") }
        if peek() == UInt8(ascii: ".") {
            offset += 1
            guard try digits() > 0 else { throw failure("a number", "has no digits after its point (at byte \(position))") }
        }
        if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            offset += 1
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { offset += 1 }
            guard try digits() > 0 else { throw failure("a number", "has no digits in its exponent (at byte \(position))") }
        }
    }

    private mutating func digits() throws -> Int {
        let start = offset
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { offset += 1 }
        return offset - start
    }

    private mutating func literal(_ word: String) throws {
        for expected in word.utf8 {
            guard next() == expected else { throw failure("a value", "is not JSON (at byte \(position - 1))") }
        }
    }

    /// One escape after a backslash, appended as UTF-8.
    private mutating func escape(into decoded: inout [UInt8], at place: @autoclosure () -> String) throws {
        guard let byte = next() else { throw failure(place(), "has a string that never ends") }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4(at: place()))
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else {
                    throw failure(place(), "has a lone surrogate escape (at byte \(position))")
                }
                let low = UInt32(try hex4(at: place()))
                guard (0xDC00..<0xE000).contains(low) else { throw failure(place(), "has a lone surrogate escape (at byte \(position))") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure(place(), "has a lone surrogate escape (at byte \(position))") }
            UTF8.encode(unicode) { decoded.append($0) }
        default:
            throw failure(place(), "has an unknown escape \\\(Character(Unicode.Scalar(byte))) (at byte \(position - 1))")
        }
    }

    private mutating func hex4(at place: @autoclosure () -> String) throws -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = next() else { throw failure(place(), "has a string that never ends") }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure(place(), "has a \\u escape that is not four hex digits (at byte \(position - 1))")
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    /// `String(decoding:)` is the fast way in, but it repairs bad UTF-8 where the document must be
    /// refused: a string equal to its bytes had nothing to repair.
    private func text(_ utf8: UnsafeRawBufferPointer, at place: @autoclosure () -> String) throws -> String {
        let text = String(decoding: utf8, as: UTF8.self)
        guard text.utf8.elementsEqual(utf8) else { throw failure(place(), "has a string that is not UTF-8") }
        return text
    }

    private mutating func enter(_ place: @autoclosure () -> String) throws {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure(place(), "nests deeper than \(Self.maxDepth) levels") }
    }

    private mutating func expect(_ byte: UInt8, at place: @autoclosure () -> String, _ what: @autoclosure () -> String) throws {
        skipWhitespace()
        guard let found = next() else { throw failure(place(), "expected \(what()), found the end of the document") }
        guard found == byte else { throw failure(place(), "expected \(what()) (at byte \(position - 1))") }
    }

    mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
    }

    private func peek() -> UInt8? { offset < bytes.count ? bytes[offset] : nil }

    private mutating func next() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    private func failure(_ place: String, _ problem: String) -> CatalogReadError {
        CatalogReadError(place: place, problem: problem)
    }
}
