import Foundation

/// A reader's storefront: the country whose prices, currency and tax they buy at, as an ISO
/// 3166-1 alpha-2 code (`DE`, `FR`, `US`). A reader chooses it (at sign-up, on `/account`, with
/// `kiosk storefront`); the store never guesses it from an address. A product with `prices` is
/// sold only in the storefronts it lists (and, at its base price, to a reader who chose none);
/// one without is sold everywhere at its one price.
public enum StorefrontCountry {
    /// The code as the store keeps it (upper case), or nil for text that names no country.
    public static func code(_ text: String) -> String? {
        let code = text.trimmingCharacters(in: .whitespaces).uppercased()
        guard code.utf8.count == 2, code.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }),
              countries.contains(code) else { return nil }
        return code
    }

    /// Every country code Foundation knows (its regions of two letters: not continents like 001,
    /// nor the unions and reserved codes that are no country: EU, EZ, UN, QO, ZZ).
    public static let countries: Set<String> = Set(Locale.Region.isoRegions.map(\.identifier).filter { code in
        code.utf8.count == 2 && code.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
            && !["EU", "EZ", "UN", "QO", "ZZ"].contains(code)
    })

    /// The country's name in English ("Germany"), or the code itself.
    public static func name(_ code: String) -> String {
        Locale(identifier: "en").localizedString(forRegionCode: code) ?? code
    }
}

/// The tax class of a product in the operator's tax table (``Product/taxCategory``): an e-book
/// and a periodical (an issue or a subscription to one) carry the reduced rate most EU states
/// apply to e-publications; anything else (a credit pack) the standard rate.
public enum TaxCategory: String, Codable, Sendable, CaseIterable {
    case ebook, periodical, standard
}

extension Product {
    /// The price a reader in `storefront` pays, before any tax the storefront adds: its entry in
    /// `prices`, or, for a product with none (or a reader who chose no storefront), its base
    /// price. Nil: not sold in that storefront.
    public func price(in storefront: String?) -> Price? {
        guard let prices, let storefront else { return price }
        return prices[storefront]
    }

    /// The product's tax class: the catalog's `taxCategory`, else by kind (a book an e-book, an
    /// issue or a subscription a periodical, a credit pack standard).
    public var taxClass: TaxCategory {
        if let taxCategory { return taxCategory }
        switch kind {
        case .nonConsumable: return series == nil ? .ebook : .periodical
        case .subscription: return .periodical
        case .consumable: return .standard
        }
    }
}
