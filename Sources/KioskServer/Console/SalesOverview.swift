import Foundation
import KioskCore

/// The overview's figures, summed from the rows of ``Reports/sales(_:)`` (the rows `kiosk admin
/// sales --json` prints): every day of the window, even one with no sale, so a chart's gaps are
/// days without sales and not missing days.
struct SalesOverview {
    struct Day {
        var day: String
        var units = 0
        var refunds = 0
        var netCents: [String: Int] = [:]
    }

    let days: [Day]
    let totals: [String: Int]
    let units: Int
    let refunds: Int
    let byKind: [String: (units: Int, net: [String: Int])]
    /// Every currency the window's sales were in, the one with most units first: one revenue
    /// chart each (never one currency's chart standing for all).
    let currencies: [String]
    var firstDay: String { days.first?.day ?? "" }

    init(rows: [AdminSalesRow], kinds: [String: ProductKind], since: Date, days count: Int) {
        var byDay: [String: Day] = [:]
        var totals: [String: Int] = [:]
        var unitsByCurrency: [String: Int] = [:]
        var byKind: [String: (units: Int, net: [String: Int])] = [:]
        for row in rows {
            var day = byDay[row.day] ?? Day(day: row.day)
            day.units += row.sales
            day.refunds += row.refunds
            day.netCents[row.currency, default: 0] += row.netCents
            byDay[row.day] = day
            totals[row.currency, default: 0] += row.netCents
            unitsByCurrency[row.currency, default: 0] += row.sales
            let kind = kinds[row.productId]?.rawValue ?? "withdrawn"
            var entry = byKind[kind] ?? (0, [:])
            entry.units += row.sales
            entry.net[row.currency, default: 0] += row.netCents
            byKind[kind] = entry
        }
        self.days = (0..<count).map { offset in
            let date = Calendar.utc.date(byAdding: .day, value: offset, to: since) ?? since
            let name = ListFilter.day(date)
            return byDay[name] ?? Day(day: name)
        }
        self.totals = totals
        self.units = rows.reduce(0) { $0 + $1.sales }
        self.refunds = rows.reduce(0) { $0 + $1.refunds }
        self.byKind = byKind
        self.currencies = unitsByCurrency.keys.sorted { (unitsByCurrency[$0] ?? 0, $1) > (unitsByCurrency[$1] ?? 0, $0) }
    }
}
