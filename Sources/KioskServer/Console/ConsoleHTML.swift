import Foundation
import KioskCore

/// HTML made by the server: every page is one string built here, every value that came from the
/// store or a request is escaped on the way in (``escape(_:)``), and nothing is fetched from
/// elsewhere (the style sheet is in the page; there is no script).
enum ConsoleHTML {
    static func escape(_ text: String) -> String {
        HTMLForm.escape(text)
    }

    /// One page: the navigation, `title` as its heading, and `body`.
    static func page(_ title: String, current: String?, csrf: String?, body: String) -> String {
        let links = [("/", "Overview"), ("/products", "Products"), ("/customers", "Customers"), ("/ask-to-buy", "Ask to Buy"), ("/notifications", "Notifications"), ("/payments", "Payments"), ("/health", "Health")]
        let navigation = links.map { path, name in
            path == current ? #"<a href="\#(path)" aria-current="page">\#(name)</a>"# : #"<a href="\#(path)">\#(name)</a>"#
        }.joined(separator: " ")
        let logout = csrf.map { #"<form method="post" action="/logout" class="logout">\#(hiddenCSRF($0))<button type="submit">Log out</button></form>"# } ?? ""
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · Kiosk console</title>
            <style>\(style)</style>
            </head>
            <body>
            <header><strong>Kiosk</strong> <nav aria-label="Console">\(current == nil ? "" : navigation)</nav> \(logout)</header>
            <main>
            <h1>\(escape(title))</h1>
            \(body)
            </main>
            </body>
            </html>
            """
    }

    static func hiddenCSRF(_ token: String) -> String {
        #"<input type="hidden" name="csrf" value="\#(escape(token))">"#
    }

    /// A table with a caption; `rows` are already escaped cells.
    static func table(caption: String, headers: [String], rows: [[String]]) -> String {
        let head = headers.map { "<th scope=\"col\">\(escape($0))</th>" }.joined()
        let body = rows.isEmpty
            ? "<tr><td colspan=\"\(headers.count)\">none</td></tr>"
            : rows.map { "<tr>" + $0.map { "<td>\($0)</td>" }.joined() + "</tr>" }.joined(separator: "\n")
        return "<div class=\"scroll\"><table><caption>\(escape(caption))</caption><thead><tr>\(head)</tr></thead><tbody>\n\(body)\n</tbody></table></div>"
    }

    /// An amount in its currency's own minor units (`4.99 USD`, `500 JPY`).
    /// An amount as HTML: escaped, since a currency came from outside (a channel's event).
    static func money(_ cents: Int, _ currency: String) -> String {
        escape(Price.shown(cents: cents, currency))
    }

    static func time(_ date: Date?) -> String {
        guard let date else { return "" }
        // As `kiosk admin` lists show a moment: UTC, to the minute.
        return ListFilter.shown(date) + " UTC"
    }

    /// Small, readable at 360 px wide: tables scroll inside their box, forms stack.
    static let style = """
        body{font-family:system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
        header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;background:#1d3557;color:#fff}
        header a{color:#fff;margin-right:.6rem}header a[aria-current]{font-weight:bold;text-decoration:none}
        .logout{margin-left:auto}main{padding:1rem;max-width:70rem}
        .scroll{overflow-x:auto}table{border-collapse:collapse;margin:.5rem 0 1.5rem;min-width:18rem}
        caption{text-align:left;font-weight:bold;padding:.3rem 0}th,td{border-bottom:1px solid #ccc;padding:.25rem .6rem;text-align:left}
        .figures{display:flex;flex-wrap:wrap;gap:1rem;padding:0;list-style:none}.figures li{background:#fff;border:1px solid #ddd;padding:.6rem 1rem}
        .figures b{display:block;font-size:1.4rem}svg{max-width:100%;height:auto;background:#fff;border:1px solid #ddd}
        form.inline{display:inline}label{display:block;margin:.4rem 0 .1rem}input[type=text],input[type=password],input[type=search]{max-width:100%;width:22rem}
        .error{color:#a4161a;font-weight:bold}.done{color:#2b7a0b;font-weight:bold}button{margin:.3rem 0}
        """
}
