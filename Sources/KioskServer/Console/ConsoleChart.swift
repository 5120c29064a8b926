/// A bar chart as SVG, drawn by the server: one bar per day, its value in a `<title>` (a
/// tooltip and what a screen reader reads) and the whole chart described by `role="img"` and
/// its label. The numbers it draws are also printed beside it, in a table.
enum ConsoleChart {
    struct Bar {
        var label: String
        var value: Double
        var shown: String
    }

    static func bars(_ bars: [Bar], title: String, description: String) -> String {
        let width = 720.0, height = 220.0, left = 8.0, bottom = 24.0
        let top = max(bars.map(\.value).max() ?? 0, 1)
        let step = (width - left * 2) / Double(max(bars.count, 1))
        var parts: [String] = []
        for (index, bar) in bars.enumerated() {
            let barHeight = max(0, bar.value) / top * (height - bottom - 12)
            let x = left + Double(index) * step
            let y = height - bottom - barHeight
            parts.append(##"<rect x="\##(f(x + 1))" y="\##(f(y))" width="\##(f(max(step - 2, 1)))" height="\##(f(barHeight))" fill="#457b9d"><title>\##(ConsoleHTML.escape(bar.label)): \##(ConsoleHTML.escape(bar.shown))</title></rect>"##)
        }
        if let first = bars.first, let last = bars.last {
            parts.append(#"<text x="\#(f(left))" y="\#(f(height - 6))" font-size="12">\#(ConsoleHTML.escape(first.label))</text>"#)
            parts.append(#"<text x="\#(f(width - left))" y="\#(f(height - 6))" font-size="12" text-anchor="end">\#(ConsoleHTML.escape(last.label))</text>"#)
        }
        return #"<svg role="img" aria-label="\#(ConsoleHTML.escape(title)): \#(ConsoleHTML.escape(description))" viewBox="0 0 \#(f(width)) \#(f(height))" width="\#(f(width))" height="\#(f(height))"><title>\#(ConsoleHTML.escape(title))</title>\#(parts.joined())</svg>"#
    }

    private static func f(_ value: Double) -> String {
        String(Int(value.rounded()))
    }
}
