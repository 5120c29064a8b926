import Foundation

/// The body of `GET /v1/catalog`.
///
/// It carries no timestamp, so the same products always give the same bytes and the same ETag.
public struct CatalogDocument: Codable, Sendable, Equatable {
    public var products: [Product]

    public init(products: [Product]) {
        self.products = products.sorted { $0.id < $1.id }
    }
}

extension JSONEncoder {
    /// The encoder for everything Kiosk sends: sorted keys, so equal values give equal bytes.
    public static var kiosk: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}

extension JSONDecoder {
    /// The decoder matching ``JSONEncoder/kiosk``.
    public static var kiosk: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
