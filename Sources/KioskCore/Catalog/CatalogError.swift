/// A catalog file the server refuses, naming the file, the product and the field at fault.
public struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule that was broken, so tests and tools can tell errors apart.
    public enum Rule: String, Sendable {
        case unreadableFile, malformedJSON, missingField, wrongType, unknownField
        case badID, duplicateID, unknownKind, badPrice, badDate, badNumber
        case missingContent, badContent, kindMismatch, unknownSeries, emptyCatalog
        case badMetadata, badOffer
    }

    public var rule: Rule
    public var file: String
    public var productID: String?
    public var field: String?
    public var message: String

    public init(_ rule: Rule, file: String, productID: String? = nil, field: String? = nil, message: String) {
        self.rule = rule
        self.file = file
        self.productID = productID
        self.field = field
        self.message = message
    }

    public var description: String {
        var parts = [file]
        if let productID { parts.append("product \"\(productID)\"") }
        if let field { parts.append("field \"\(field)\"") }
        return parts.joined(separator: ": ") + ": " + message
    }
}
