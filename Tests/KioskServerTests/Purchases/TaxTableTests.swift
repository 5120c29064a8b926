import Foundation
import KioskCore
@testable import KioskStore
import KioskTestSupport
import Testing

/// The operator's tax table: read with one line naming what is wrong, and each charge's tax worked
/// as a person works it (the rate's share of a price that holds it, or added to one that does not).
@Suite("Tax table")
struct TaxTableTests {
    @Test("inclusive: the tax inside a price, to the nearest cent; exclusive: added; a country or class the table lacks: none")
    func charges() throws {
        let table = try TaxTable.parse(Data(#"""
            {"countries": {"DE": {"rates": {"standard": "19", "ebook": "7"}}, "FR": {"inclusive": true, "rates": {"periodical": "2.1", "standard": "20"}},
                           "US": {"inclusive": false, "rates": {"standard": "8.25"}}}}
            """#.utf8), file: "rates.json")
        // 4.49 × 7 ÷ 107 = 0.2937: 0.29.
        #expect(table.charge(cents: 449, currency: "EUR", country: "DE", category: .ebook) == Charge(cents: 449, currency: "EUR", country: "DE", taxBasisPoints: 700, taxCents: 29))
        // A class without a rate takes the standard one: 10.00 × 19 ÷ 119 = 1.5966: 1.60.
        #expect(table.charge(cents: 1000, currency: "EUR", country: "DE", category: .periodical).taxCents == 160)
        // 2.29 × 2.1 ÷ 102.1 = 0.0471: 0.05.
        #expect(table.charge(cents: 229, currency: "EUR", country: "FR", category: .periodical).taxCents == 5)
        // Exclusive: 10.00 plus 8.25 % = 10.825: 0.83 added.
        #expect(table.charge(cents: 1000, currency: "USD", country: "US", category: .ebook) == Charge(cents: 1083, currency: "USD", country: "US", taxBasisPoints: 825, taxCents: 83))
        #expect(table.charge(cents: 1000, currency: "GBP", country: "GB", category: .ebook) == Charge(cents: 1000, currency: "GBP", country: "GB", taxBasisPoints: nil, taxCents: 0))
        #expect(table.charge(cents: 1000, currency: "USD", country: nil, category: .ebook).taxCents == 0)
        #expect(table.includesTax("DE") && !table.includesTax("US") && !table.includesTax(nil))
    }

    @Test("the sample EU table reads, every state of the union in it with its three classes")
    func sample() throws {
        let table = try TaxTable.load(SampleStore.repository.appendingPathComponent("deploy/tax/eu-epublications.json"))
        #expect(table.countries.count == 27)
        #expect(table.countries.values.allSatisfy { $0.inclusive && Set($0.rates.keys) == Set(TaxCategory.allCases) })
        #expect(table.countries["DE"]?.rates[.ebook] == 700 && table.countries["FR"]?.rates[.periodical] == 210)
    }

    @Test("a broken table is refused in one line naming the file and the place", arguments: [
        (#"{"countries": {"Germany": {"rates": {"standard": "19"}}}}"#, "Germany"),
        (#"{"countries": {"DE": {"rates": {"books": "7"}}}}"#, "countries.DE.rates.books"),
        (#"{"countries": {"DE": {"rates": {"ebook": 7}}}}"#, "countries.DE.rates.ebook"),
        (#"{"countries": {"DE": {"rates": {"ebook": "170"}}}}"#, "countries.DE.rates.ebook"),
        (#"{"countries": {"DE": {"rates": {"ebook": "-5"}}}}"#, "countries.DE.rates.ebook"),
        (#"{"countries": {"DE": {"inclusive": "false", "rates": {"ebook": "7"}}}}"#, "countries.DE.inclusive"),
        (#"{"rates": {}}"#, "countries"),
    ])
    func broken(_ text: String, _ named: String) throws {
        let error = try #require(throws: TaxTableError.self) { try TaxTable.parse(Data(text.utf8), file: "rates.json") }
        #expect(error.description.hasPrefix("rates.json: ") && error.description.contains(named) && !error.description.contains("\n"), "\(error)")
    }
}
