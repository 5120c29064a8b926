/// A bar chart's geometry: one bar per day, scaled to the tallest; ``ConsoleTemplates/chart``
/// draws it as SVG.
enum ConsoleChart {
    struct Bar {
        var label: String
        var value: Double
        var shown: String
    }

    static func bars(_ bars: [Bar], title: String, description: String) -> ConsoleView.Chart {
        let width = 720.0, height = 220.0, left = 8.0, bottom = 24.0
        let top = max(bars.map(\.value).max() ?? 0, 1)
        let step = (width - left * 2) / Double(max(bars.count, 1))
        let drawn = bars.enumerated().map { index, bar in
            let barHeight = max(0, bar.value) / top * (height - bottom - 12)
            let x = left + Double(index) * step
            return ConsoleView.Chart.Bar(x: whole(x + 1), y: whole(height - bottom - barHeight), width: whole(max(step - 2, 1)),
                                         height: whole(barHeight), label: bar.label, shown: bar.shown)
        }
        let axis = bars.first.flatMap { first in
            bars.last.map { last in
                ConsoleView.Chart.Axis(left: whole(left), right: whole(width - left), baseline: whole(height - 6), first: first.label, last: last.label)
            }
        }
        return ConsoleView.Chart(title: title, description: description, width: whole(width), height: whole(height), bars: drawn, axis: axis)
    }

    private static func whole(_ value: Double) -> Int {
        Int(value.rounded())
    }
}
