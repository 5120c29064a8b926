import Foundation

/// Reads a catalog document as its bytes arrive, in pieces of any size, handing out each product
/// as soon as its last byte is in: a 100,000-product catalog is never held whole.
///
/// How: a small resumable scanner follows the document's structure (strings, escapes, the
/// containers open) a byte at a time. It keeps each element of the top-level `"products"` array
/// until the element ends and reads it with the strict ``CatalogReader`` rules; everything
/// outside that array (the document's frame: its braces, its other keys) is kept and read with
/// the same rules at ``finish()``, the array standing empty in it. So a document is accepted or
/// refused exactly as ``CatalogReader`` would refuse it whole, and errors name the product
/// (`products[700].price.amount: expected a string`) and the byte in the whole document.
///
/// ```swift
/// var stream = CatalogStream()
/// for piece in pieces { try stream.read(piece) { product, json in … } }
/// try stream.finish()
/// ```
public struct CatalogStream {
    /// Bytes outside the products array, read at ``finish()``.
    private var frame: [UInt8] = []
    /// The product being received.
    private var element: [UInt8] = []
    /// Where `element` starts in the document.
    private var elementStart = 0
    /// Document bytes before the piece being read.
    private var consumed = 0
    /// The containers open (`{` or `[`), outermost first.
    private var open: [UInt8] = []
    private var inString = false
    private var escaped = false
    /// Inside the top-level object, a string now would be a key.
    private var expectingKey = false
    /// Where, in `frame`, the top-level key being received starts.
    private var keyStart: Int?
    /// The last top-level key, whose value comes next.
    private var key = ""
    /// Inside the `"products"` array (the second container open).
    private var inProducts = false
    /// Inside the products array, an element has started and not yet ended.
    private var inElement = false
    /// Inside the products array, a comma asks for another element.
    private var needsElement = false
    private var index = 0
    /// The top-level object has closed: only white space may follow.
    private var documentClosed = false

    public init() {}

    /// Reads the next piece of the document, calling `body` with each product it completes and
    /// the bytes of its JSON object as sent (valid only during the call). An error `body` throws
    /// ends the reading as it is.
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public mutating func read(_ piece: UnsafeRawBufferPointer, _ body: (Product, UnsafeRawBufferPointer) throws -> Void) throws {
        // Bytes from `run` up to the cursor belong to the frame or to the element (whichever is
        // being received) and are copied in one go when that changes or the piece ends.
        var run = 0
        var cursor = 0
        defer { consumed += piece.count }
        while cursor < piece.count {
            if inString && !escaped {
                // Most of a catalog is the inside of strings: only a quote or a backslash matters there.
                while cursor < piece.count {
                    let byte = piece[cursor]
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { break }
                    cursor += 1
                }
                guard cursor < piece.count else { break }
            }
            let byte = piece[cursor]
            let position = consumed + cursor
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if keyStart != nil {
                        flush(piece, from: &run, upTo: cursor + 1)
                        try readKey()
                    }
                }
            } else if inProducts && open.count == 2 {
                try productsByte(byte, in: piece, at: cursor, position: position, run: &run, body)
            } else {
                try frameByte(byte, in: piece, at: cursor, position: position, run: &run)
            }
            cursor += 1
        }
        flush(piece, from: &run, upTo: piece.count)
    }

    /// Copies the piece's bytes from `run` up to `end` to the element or the frame, whichever is
    /// being received, and moves `run` on.
    private mutating func flush(_ piece: UnsafeRawBufferPointer, from run: inout Int, upTo end: Int) {
        guard end > run else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: piece[run..<end])
        if inElement { element.append(contentsOf: bytes) } else if !inProducts { frame.append(contentsOf: bytes) }
        run = end
    }

    /// A byte outside strings directly inside the products array: elements and the commas between them.
    private mutating func productsByte(
        _ byte: UInt8, in piece: UnsafeRawBufferPointer, at cursor: Int, position: Int, run: inout Int,
        _ body: (Product, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        switch byte {
        case 0x20, 0x0A, 0x0D, 0x09:
            break
        case UInt8(ascii: ","), UInt8(ascii: "]"):
            if inElement {
                flush(piece, from: &run, upTo: cursor)
                try endElement(body)
            } else if needsElement || byte == UInt8(ascii: ",") {
                throw CatalogReadError(place: "products[\(index)]", problem: "expected an object (at byte \(position))")
            }
            needsElement = byte == UInt8(ascii: ",")
            if byte == UInt8(ascii: "]") {
                // The array ends; its `]` goes to the frame.
                open.removeLast()
                inProducts = false
                run = cursor
            }
        case UInt8(ascii: "}"):
            throw CatalogReadError(place: "products", problem: "expected a comma or ] (at byte \(position))")
        default:
            if !inElement {
                inElement = true
                needsElement = false
                elementStart = position
                run = cursor
            }
            if byte == UInt8(ascii: "\"") { inString = true }
            if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { try enter(byte, at: position) }
        }
    }

    /// A byte outside strings and outside the products array: the frame's structure.
    private mutating func frameByte(_ byte: UInt8, in piece: UnsafeRawBufferPointer, at cursor: Int, position: Int, run: inout Int) throws {
        switch byte {
        case UInt8(ascii: "\""):
            inString = true
            if open.count == 1 && expectingKey {
                flush(piece, from: &run, upTo: cursor)
                keyStart = frame.count
            }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard !open.isEmpty || (byte == UInt8(ascii: "{") && !documentClosed) else { throw outsideDocument(at: position) }
            let productsArray = open.count == 1 && !expectingKey && key == "products" && byte == UInt8(ascii: "[")
            try enter(byte, at: position)
            if open.count == 1 { expectingKey = true }
            if productsArray {
                flush(piece, from: &run, upTo: cursor + 1)
                inProducts = true
                needsElement = false
            }
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            guard let innermost = open.last else { throw outsideDocument(at: position) }
            guard (innermost == UInt8(ascii: "{")) == (byte == UInt8(ascii: "}")) else {
                throw CatalogReadError(place: inElement ? "products[\(index)]" : "the document",
                                       problem: "has a \(Character(Unicode.Scalar(byte))) that does not close its \(Character(Unicode.Scalar(innermost))) (at byte \(position))")
            }
            open.removeLast()
            if open.isEmpty { documentClosed = true }
        case UInt8(ascii: ","):
            if open.count == 1 { expectingKey = true }
        case UInt8(ascii: ":"):
            if open.count == 1 { expectingKey = false }
        case 0x20, 0x0A, 0x0D, 0x09:
            break
        default:
            if open.isEmpty { throw outsideDocument(at: position) }
        }
    }

    /// The document has ended: checks that it ended whole and that its frame is a catalog.
    /// - Throws: ``CatalogReadError`` naming the first place the document is wrong.
    public mutating func finish() throws {
        if inProducts {
            if inElement {
                // Cut short inside a product: its own reading says where; a whole product was
                // still owed a comma or a `]`.
                _ = try readElement()
                throw CatalogReadError(place: "products", problem: "expected a comma or ], found the end of the document")
            }
            throw CatalogReadError(place: "products", problem: "expected an object or ], found the end of the document")
        }
        try frame.withUnsafeBytes { bytes in
            var reader = JSONCursor(bytes)
            var sawProducts = false
            try reader.object(at: "the document") { key, reader in
                guard key == "products" else { return try reader.skipValue() }
                sawProducts = true
                // Its elements were read as they came: the frame keeps it empty.
                try reader.array(at: "products") { _ in }
            }
            try reader.end()
            guard sawProducts else { throw CatalogReadError(place: "the document", problem: "has no \"products\" array") }
        }
    }

    // MARK: Pieces

    private mutating func enter(_ container: UInt8, at position: Int) throws {
        guard open.count < JSONCursor.maxDepth else {
            throw CatalogReadError(place: inElement ? "products[\(index)]" : "the document", problem: "nests deeper than \(JSONCursor.maxDepth) levels (at byte \(position))")
        }
        open.append(container)
    }

    /// A top-level key has been received whole: decodes it (escapes and all).
    private mutating func readKey() throws {
        guard let start = keyStart else { return }
        keyStart = nil
        key = try frame[start...].withUnsafeBytes { bytes in
            var reader = JSONCursor(bytes)
            return try reader.string(at: "the document")
        }
    }

    private mutating func endElement(_ body: (Product, UnsafeRawBufferPointer) throws -> Void) throws {
        let product = try readElement()
        // White space between the object and its comma is not part of it.
        var end = element.count
        while end > 0, [0x20, 0x0A, 0x0D, 0x09].contains(element[end - 1]) { end -= 1 }
        try element.withUnsafeBytes { try body(product, UnsafeRawBufferPointer(rebasing: $0[..<end])) }
        element.removeAll(keepingCapacity: true)
        inElement = false
        index += 1
    }

    private func readElement() throws -> Product {
        try element.withUnsafeBytes { bytes in
            var reader = JSONCursor(bytes, base: elementStart)
            let product = try reader.product(at: "products[\(index)]")
            guard reader.atEnd() else {
                throw CatalogReadError(place: "products", problem: "expected a comma or ] (at byte \(reader.position))")
            }
            return product
        }
    }

    private func outsideDocument(at position: Int) -> CatalogReadError {
        documentClosed
            ? CatalogReadError(place: "the document", problem: "has bytes after its end (at byte \(position))")
            : CatalogReadError(place: "the document", problem: "expected an object (at byte \(position))")
    }
}
