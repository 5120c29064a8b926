import Foundation

/// Reads a catalog document (`GET /v1/catalog`, a published `catalog.json`) one product at a
/// time, straight from its bytes.
///
/// Why not `JSONDecoder`: on a catalog of 100,000 products Foundation's decoder spends about 12 µs
/// a product in generic containers (1.2 s, most of a server start and a third of a client sync),
/// and it can only hand back the whole array. This reader knows the one shape it reads, so it
/// costs a fraction of that, holds one product at a time, and gives each product's bytes as sent
/// (the client caches those instead of encoding each product again to compare it).
///
/// It is strict JSON (RFC 8259): UTF-8 checked, escapes and surrogate pairs decoded, control
/// characters refused, nesting bounded, nothing but white space after the document. Keys it does
/// not know are skipped, as `JSONDecoder` does, so a newer server's fields do not break an older
/// client; a `null` optional is absent. Whole numbers only where ``Product`` has an integer.
/// `CatalogReaderTests` checks it against `JSONDecoder` on the same bytes.
public enum CatalogReader {
    /// Every product of the document, in the order sent.
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public static func products(in document: Data) throws -> [Product] {
        var products: [Product] = []
        try forEachProduct(in: document) { product, _ in products.append(product) }
        return products
    }

    /// One product object on its own (as ``forEachProduct(in:_:)`` hands its bytes out).
    /// - Throws: ``CatalogReadError`` naming the first place the object is wrong.
    public static func product(from object: Data) throws -> Product {
        try object.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var reader = JSONCursor(bytes)
            let product = try reader.product(at: "the product")
            try reader.end()
            return product
        }
    }

    /// Calls `body` with each product of the document, in the order sent, and the bytes of its
    /// JSON object exactly as they appear in the document (a slice sharing `document`'s storage).
    /// An error `body` throws ends the reading and is rethrown as it is.
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public static func forEachProduct(in document: Data, _ body: (Product, Data) throws -> Void) throws {
        try document.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var reader = JSONCursor(bytes)
            var sawProducts = false
            try reader.object(at: "the document") { key, reader in
                guard key == "products" else { return try reader.skipValue() }
                sawProducts = true
                var index = 0
                try reader.array(at: "products") { reader in
                    let start = reader.offset
                    let product = try reader.product(at: "products[\(index)]")
                    try body(product, document[(document.startIndex + start)..<(document.startIndex + reader.offset)])
                    index += 1
                }
            }
            try reader.end()
            guard sawProducts else { throw CatalogReadError(place: "the document", problem: "has no \"products\" array") }
        }
    }
}

/// Where a catalog document is wrong and how: `products[12].price.amount: expected a string`.
public struct CatalogReadError: Error, Sendable, Equatable, CustomStringConvertible {
    public var place: String
    public var problem: String
    public var description: String { "\(place): \(problem)" }
}

// MARK: Products

private extension JSONCursor {
    /// One product object; the field names and types are those `Product`'s `Codable` uses.
    mutating func product(at place: @autoclosure () -> String) throws -> Product {
        var id, kind, title, summary, series, publicationDate: String?
        var price: Price?
        var creditPrice, credits, issueNumber, periodMonths: Int?
        var content: ContentDescriptor?
        try object(at: place()) { key, reader in
            switch key {
            case "id": id = try reader.string(at: "\(place()).id")
            case "kind": kind = try reader.string(at: "\(place()).kind")
            case "title": title = try reader.string(at: "\(place()).title")
            case "summary": summary = try reader.string(at: "\(place()).summary")
            case "price": price = try reader.price(at: "\(place()).price")
            case "creditPrice": creditPrice = try reader.optional { try $0.integer(at: "\(place()).creditPrice") }
            case "credits": credits = try reader.optional { try $0.integer(at: "\(place()).credits") }
            case "series": series = try reader.optional { try $0.string(at: "\(place()).series") }
            case "issueNumber": issueNumber = try reader.optional { try $0.integer(at: "\(place()).issueNumber") }
            case "publicationDate": publicationDate = try reader.optional { try $0.string(at: "\(place()).publicationDate") }
            case "periodMonths": periodMonths = try reader.optional { try $0.integer(at: "\(place()).periodMonths") }
            case "content": content = try reader.optional { try $0.content(at: "\(place()).content") }
            default: try reader.skipValue()
            }
        }
        guard let id else { throw CatalogReadError(place: place(), problem: "has no \"id\"") }
        func at() -> String { "\(place()) (\(id))" }
        guard let kind else { throw CatalogReadError(place: at(), problem: "has no \"kind\"") }
        guard let productKind = ProductKind(rawValue: kind) else {
            throw CatalogReadError(place: at(), problem: "has kind \"\(kind)\", which is not consumable, nonConsumable or subscription")
        }
        guard let title else { throw CatalogReadError(place: at(), problem: "has no \"title\"") }
        guard let summary else { throw CatalogReadError(place: at(), problem: "has no \"summary\"") }
        guard let price else { throw CatalogReadError(place: at(), problem: "has no \"price\"") }
        return Product(
            id: id, kind: productKind, title: title, summary: summary, price: price, creditPrice: creditPrice, credits: credits,
            series: series, issueNumber: issueNumber, publicationDate: publicationDate, periodMonths: periodMonths, content: content)
    }

    mutating func price(at place: @autoclosure () -> String) throws -> Price {
        var amount, currency: String?
        try object(at: place()) { key, reader in
            switch key {
            case "amount": amount = try reader.string(at: "\(place()).amount")
            case "currency": currency = try reader.string(at: "\(place()).currency")
            default: try reader.skipValue()
            }
        }
        guard let amount, let currency else {
            throw CatalogReadError(place: place(), problem: "needs both \"amount\" and \"currency\"")
        }
        return Price(amount: amount, currency: currency)
    }

    mutating func content(at place: @autoclosure () -> String) throws -> ContentDescriptor {
        var format, sha256, version: String?
        var size: Int?
        try object(at: place()) { key, reader in
            switch key {
            case "format": format = try reader.string(at: "\(place()).format")
            case "size": size = try reader.integer(at: "\(place()).size")
            case "sha256": sha256 = try reader.string(at: "\(place()).sha256")
            case "version": version = try reader.string(at: "\(place()).version")
            default: try reader.skipValue()
            }
        }
        guard let format, let size, let sha256, let version else {
            throw CatalogReadError(place: place(), problem: "needs \"format\", \"size\", \"sha256\" and \"version\"")
        }
        guard let archiveFormat = ArchiveFormat(rawValue: format) else {
            throw CatalogReadError(place: place(), problem: "has format \"\(format)\", which is not one of \(ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return ContentDescriptor(format: archiveFormat, size: Int64(size), sha256: sha256, version: version)
    }
}

// MARK: JSON

/// A cursor over JSON bytes that reads the values the catalog is made of. Each method reads one
/// value (with the white space before it) and leaves the cursor just after it.
private struct JSONCursor {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    /// Containers open around the cursor; skipping a value deeper than ``maxDepth`` is refused,
    /// so no document can exhaust the stack.
    private var depth = 0
    static let maxDepth = 64

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The document is over: only white space may follow.
    mutating func end() throws {
        skipWhitespace()
        guard offset == bytes.count else { throw failure("the document", "has bytes after its end (at byte \(offset))") }
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
            default: throw failure(place(), "expected a comma or } after \"\(key)\" (at byte \(offset))")
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
            default: throw failure(place(), "expected a comma or ] (at byte \(offset))")
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
            if byte < 0x20 { throw failure(place(), "has a control character in a string (at byte \(offset)); it must be escaped") }
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
                throw failure(place(), "has a control character in a string (at byte \(offset - 1)); it must be escaped")
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
        guard digits > 0 else { throw failure(place(), "expected a whole number (at byte \(offset))") }
        guard digits == 1 || bytes[start] != UInt8(ascii: "0") else { throw failure(place(), "has a number with a leading zero") }
        if let byte = peek(), byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            throw failure(place(), "expected a whole number, not a fraction or an exponent")
        }
        return value
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
        guard try digits() > 0 else { throw failure("a value", "is not JSON (at byte \(start))") }
        if peek() == UInt8(ascii: ".") {
            offset += 1
            guard try digits() > 0 else { throw failure("a number", "has no digits after its point (at byte \(offset))") }
        }
        if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            offset += 1
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { offset += 1 }
            guard try digits() > 0 else { throw failure("a number", "has no digits in its exponent (at byte \(offset))") }
        }
    }

    private mutating func digits() throws -> Int {
        let start = offset
        while let byte = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { offset += 1 }
        return offset - start
    }

    private mutating func literal(_ word: String) throws {
        for expected in word.utf8 {
            guard next() == expected else { throw failure("a value", "is not JSON (at byte \(offset - 1))") }
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
                    throw failure(place(), "has a lone surrogate escape (at byte \(offset))")
                }
                let low = UInt32(try hex4(at: place()))
                guard (0xDC00..<0xE000).contains(low) else { throw failure(place(), "has a lone surrogate escape (at byte \(offset))") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure(place(), "has a lone surrogate escape (at byte \(offset))") }
            UTF8.encode(unicode) { decoded.append($0) }
        default:
            throw failure(place(), "has an unknown escape \\\(Character(Unicode.Scalar(byte))) (at byte \(offset - 1))")
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
            default: throw failure(place(), "has a \\u escape that is not four hex digits (at byte \(offset - 1))")
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
        guard found == byte else { throw failure(place(), "expected \(what()) (at byte \(offset - 1))") }
    }

    private mutating func skipWhitespace() {
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
