import Foundation
import KioskCore

/// The operator's tax rates per country and tax class (issue 65), a JSON file they keep
/// (`kiosk serve --tax-rates FILE`; the sample `deploy/tax/eu-epublications.json` has the EU's
/// rates, e-publications at each state's reduced rate):
///
/// ```json
/// {"countries": {"DE": {"inclusive": true, "rates": {"standard": "19", "ebook": "7", "periodical": "7"}}}}
/// ```
///
/// A country's rates are percentages as decimal text (`"5.5"`), kept in basis points. `inclusive`
/// (the default, and the EU's law for sales to consumers) says the catalog's price already holds
/// the tax: the reader pays the price, and the tax is the part of it the rate makes. Exclusive, the
/// tax is added to the price. A country the table does not name, or a class it gives no rate, is
/// charged no tax; the sale still records its country.
public struct TaxTable: Sendable, Equatable {
    public struct Country: Sendable, Equatable {
        public var inclusive: Bool
        /// Basis points per class: 700 is 7 %.
        public var rates: [TaxCategory: Int]
    }

    public var countries: [String: Country]

    /// No table: no tax is charged or recorded.
    public static let none = TaxTable(countries: [:])

    public var isEmpty: Bool { countries.isEmpty }

    public init(countries: [String: Country]) { self.countries = countries }

    /// Reads the operator's file.
    /// - Throws: ``TaxTableError`` naming the file, the country and the field at fault.
    public static func load(_ url: URL) throws -> TaxTable {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw TaxTableError("\(url.path): cannot be read (\(error.localizedDescription)); give --tax-rates a JSON file of rates")
        }
        return try parse(data, file: url.path)
    }

    static func parse(_ data: Data, file: String) throws -> TaxTable {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let countries = object["countries"] as? [String: Any] else {
            throw TaxTableError("\(file): is not {\"countries\": {\"DE\": {\"rates\": {\"standard\": \"19\", …}}}}")
        }
        var table: [String: Country] = [:]
        for (code, value) in countries {
            guard StorefrontCountry.code(code) == code else { throw TaxTableError("\(file): \"\(code)\" is not a country code like DE") }
            guard let entry = value as? [String: Any], let rates = entry["rates"] as? [String: Any] else {
                throw TaxTableError("\(file): countries.\(code) must be {\"inclusive\": true, \"rates\": {\"standard\": \"19\", …}}")
            }
            // JSONSerialization gives a boolean as an NSNumber of type "c"; text such as "false" is no boolean.
            if let raw = entry["inclusive"], !((raw as? NSNumber).map { String(cString: $0.objCType) == "c" } ?? false) {
                throw TaxTableError("\(file): countries.\(code).inclusive must be true or false (JSON booleans, not text)")
            }
            let inclusive = entry["inclusive"] as? Bool ?? true
            var points: [TaxCategory: Int] = [:]
            for (name, rate) in rates {
                guard let category = TaxCategory(rawValue: name) else {
                    throw TaxTableError("\(file): countries.\(code).rates.\(name) is not a tax class; use \(TaxCategory.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                guard let text = rate as? String, let basis = Self.basisPoints(text), (0...10_000).contains(basis) else {
                    throw TaxTableError("\(file): countries.\(code).rates.\(name) must be a percentage as text, such as \"5.5\", from 0 to 100")
                }
                points[category] = basis
            }
            table[code] = Country(inclusive: inclusive, rates: points)
        }
        return TaxTable(countries: table)
    }

    /// "5.5" → 550; nil for text that is no percentage with at most two decimals.
    static func basisPoints(_ text: String) -> Int? {
        Price.cents(text)
    }

    /// What a reader in `country` pays for a price of `cents` of a product of `category`, and the
    /// tax in it.
    public func charge(cents: Int, currency: String, country: String?, category: TaxCategory) -> Charge {
        guard let country, let entry = countries[country], let rate = entry.rates[category] ?? entry.rates[.standard] else {
            return Charge(cents: cents, currency: currency, country: country, taxBasisPoints: nil, taxCents: 0)
        }
        if entry.inclusive {
            return Charge(cents: cents, currency: currency, country: country, taxBasisPoints: rate, taxCents: Self.part(of: cents, rate: rate))
        }
        let tax = Self.rounded(cents * rate, over: 10_000)
        return Charge(cents: cents + tax, currency: currency, country: country, taxBasisPoints: rate, taxCents: tax)
    }

    /// The tax inside a tax-inclusive amount: `gross` × rate ÷ (1 + rate), to the nearest cent.
    public static func part(of gross: Int, rate: Int) -> Int {
        rounded(gross * rate, over: 10_000 + rate)
    }

    /// `value` ÷ `divisor` to the nearest whole number, halves away from zero.
    static func rounded(_ value: Int, over divisor: Int) -> Int {
        let half = divisor / 2
        return value >= 0 ? (value + half) / divisor : -((-value + half) / divisor)
    }

    /// Whether the table says prices in `country` hold their tax (its shop shows "incl. VAT").
    public func includesTax(_ country: String?) -> Bool {
        country.flatMap { countries[$0]?.inclusive } ?? false
    }
}

/// What a sale charges: the amount the reader pays (tax included), its currency, the reader's
/// country (their storefront), the rate applied and the tax in the amount.
public struct Charge: Sendable, Equatable {
    public var cents: Int
    public var currency: String
    public var country: String?
    public var taxBasisPoints: Int?
    public var taxCents: Int
}

/// A tax table the store cannot use, in one line.
public struct TaxTableError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
