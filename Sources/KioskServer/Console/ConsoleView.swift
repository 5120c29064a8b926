import Foundation
import KioskCore

/// What the console's templates (``ConsoleTemplates``) show: plain values, text only. The
/// templates escape every one of them; nothing here is HTML.
enum ConsoleView {
    /// A whole page: the layout's parts and the page's own values (`page`).
    struct Page<Body> {
        var title: String
        var navigation: [Link]
        var csrf: String?
        var done: String?
        var error: String?
        var back: Back?
        var page: Body

        /// `current`: the navigation's path for this page; nil shows no navigation (logging in).
        init(_ title: String, current: String?, csrf: String?, done: String? = nil, error: String? = nil, back: Back? = nil, page: Body) {
            self.title = title
            self.navigation = current.map { current in Self.sections.map { Link(path: $0.0, name: $0.1, current: $0.0 == current) } } ?? []
            self.csrf = csrf
            self.done = done
            self.error = error
            self.back = back
            self.page = page
        }

        static var sections: [(String, String)] {
            [("/", "Overview"), ("/products", "Products"), ("/customers", "Customers"), ("/ask-to-buy", "Ask to Buy"),
             ("/codes", "Codes"), ("/notifications", "Notifications"), ("/payments", "Payments"), ("/health", "Health")]
        }
    }

    /// A page with nothing of its own (logging in, a refusal).
    struct Nothing {}

    struct Link {
        var path: String
        var name: String
        var current: Bool
    }

    struct Back {
        var href: String
        var label: String
    }

    /// A table of text; a cell may be shown as code or lead somewhere.
    struct Table {
        var caption: String
        var headers: [String]
        var rows: [Row]
        /// Stored, not computed: the templates read values by reflection.
        var columns: Int

        init(caption: String, headers: [String], rows: [[Cell]]) {
            self.caption = caption
            self.headers = headers
            self.rows = rows.map(Row.init(cells:))
            self.columns = headers.count
        }
    }

    struct Row {
        var cells: [Cell]
    }

    struct Cell {
        var text: String
        var code = false
        var link: String?

        init(_ text: String, code: Bool = false, link: String? = nil) {
            self.text = text
            self.code = code
            self.link = link
        }

        static func code(_ text: String) -> Cell { Cell(text, code: true) }
    }

    /// A figure in the row of boxes at the top of a page.
    struct Figure {
        var name: String
        var value: String
        var note: String?
        var code: String?
    }

    /// A bar chart's geometry, drawn by ``ConsoleTemplates/chart``.
    struct Chart {
        struct Bar {
            var x: Int
            var y: Int
            var width: Int
            var height: Int
            var label: String
            var shown: String
        }

        /// The first and last day under the bars.
        struct Axis {
            var left: Int
            var right: Int
            var baseline: Int
            var first: String
            var last: String
        }

        var title: String
        var description: String
        var width: Int
        var height: Int
        var bars: [Bar]
        var axis: Axis?
    }
}

/// How the console writes amounts and moments, as `kiosk admin` does.
enum ConsoleText {
    /// An amount in its currency's own minor units (`4.99 USD`, `500 JPY`).
    static func money(_ cents: Int, _ currency: String) -> String {
        Price.shown(cents: cents, currency)
    }

    /// Amounts in several currencies, never added up: `4.99 USD, 500 JPY`.
    static func money(_ amounts: [String: Int]) -> String {
        amounts.map { money($0.value, $0.key) }.sorted().joined(separator: ", ")
    }

    /// As `kiosk admin` lists show a moment: UTC, to the minute.
    static func time(_ date: Date?) -> String {
        guard let date else { return "" }
        return ListFilter.shown(date) + " UTC"
    }

    static func bytes(_ count: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: count, countStyle: .binary)
    }
}
