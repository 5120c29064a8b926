import Foundation

/// An ID (a transaction's, an account's, a product's) as one segment of a request's path, the one
/// way the client and `kiosk admin` spell it. Everything but letters, digits, `-`, `_` and `.` is
/// percent-encoded, so `txn_../../x` can name no other resource; a segment that is only dots (`.`
/// or `..`, which libcurl would resolve) is encoded whole. Dots inside an ID stay as they are, so a
/// store's answer that names the ID names it as the reader wrote it (`com.kiosk.books.x`, not
/// `com%2Ekiosk%2Ebooks%2Ex`).
public enum PathSegment {
    public static func encode(_ id: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        if !id.isEmpty, !id.allSatisfy({ $0 == "." }) { allowed.insert(".") }
        return id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id
    }
}
