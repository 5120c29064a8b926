import Foundation

/// The texts the API takes from its callers (idempotency keys, product and transaction IDs,
/// revocation reasons), checked before any of them reaches the database.
///
/// Limits are in UTF-8 bytes, not characters: one character can carry any number of combining
/// marks, and what the database limits is bytes. On PostgreSQL a key over 2,704 bytes overflows its
/// unique index and a NUL is refused in any text; both came back as a 500, which clients retry
/// forever. Control characters (NUL, line breaks, tabs, DEL, C1) are refused too: these texts are
/// shown in one-line answers, logs and the operator's listings.
public enum RequestText {
    /// The most bytes of a key or an ID: far below PostgreSQL's index entry limit, above any ID this store makes.
    public static let maxIdentifierBytes = 255
    /// The most bytes of a revocation reason, which the reader's devices show.
    public static let maxReasonBytes = 500

    /// - Parameters:
    ///   - field: how the caller names the text (`idempotencyKey`, `the transaction ID in the path`).
    ///   - allowEmpty: whether an empty text is accepted (a reason may be empty: the store writes its own).
    /// - Throws: ``StoreError`` `bad_request` naming `field` and what to send instead.
    public static func check(_ value: String, field: String, maxBytes: Int = maxIdentifierBytes, allowEmpty: Bool = false) throws {
        guard allowEmpty || !value.isEmpty else {
            throw StoreError.invalidRequest("\(field) is empty; send 1 to \(maxBytes) bytes of printable UTF-8")
        }
        let bytes = value.utf8.count
        guard bytes <= maxBytes else {
            throw StoreError.invalidRequest("\(field) is \(bytes) bytes of UTF-8; send at most \(maxBytes)")
        }
        if let control = value.unicodeScalars.first(where: isControl) {
            let code = String(control.value, radix: 16, uppercase: true)
            throw StoreError.invalidRequest("\(field) contains the control character U+\(String(repeating: "0", count: max(0, 4 - code.count)))\(code); send printable text only")
        }
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
