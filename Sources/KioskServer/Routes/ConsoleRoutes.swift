import Foundation
import Hummingbird
import HTTPTypes
import KioskCore
import KioskStore

/// A request on the console, with the session its cookie names (nil before logging in).
struct ConsoleContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var sessionId: String?
    var session: ConsoleSessions.Session?

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }
}

/// Lets a request through only with an open session; the log-in page is the one way in. A GET
/// without one is sent to the log-in page, anything else is refused.
struct ConsoleGate: RouterMiddleware {
    let sessions: ConsoleSessions

    func handle(_ request: Request, context: ConsoleContext, next: (Request, ConsoleContext) async throws -> Response) async throws -> Response {
        var context = context
        if let id = request.cookies[ConsoleSessions.cookie]?.value, let session = await sessions.session(id) {
            context.sessionId = id
            context.session = session
        }
        do {
            return try await admitted(request, context: context, next: next)
        } catch let error as HTTPError {
            // A refused form, an unknown page, a body too large: a console page saying so, with
            // the console's own headers, not a JSON error.
            let message = error.body ?? (error.status == .notFound ? "There is no such console page." : error.status.reasonPhrase)
            return ConsoleRoutes.html(error.status, ConsoleHTML.page(error.status.reasonPhrase, current: nil, csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">\#(ConsoleHTML.escape(message))</p><p><a href="/">The overview</a></p>"#))
        }
    }

    private func admitted(_ request: Request, context: ConsoleContext, next: (Request, ConsoleContext) async throws -> Response) async throws -> Response {
        if context.session == nil, request.uri.path != "/login" {
            if request.method == .get || request.method == .head {
                return Response(status: .seeOther, headers: [.location: "/login"])
            }
            return ConsoleRoutes.html(.forbidden, ConsoleHTML.page("Not logged in", current: nil, csrf: nil,
                body: #"<p class="error">Log in first: this form needs a console session.</p><p><a href="/login">Log in</a></p>"#))
        }
        return try await next(request, context)
    }
}

/// The publisher's console (`kiosk serve --console-port`): server-rendered pages over the same
/// store queries as `kiosk admin … --json` (``Reports/sales(_:)``, ``Reports/pendingRequests(_:)``,
/// ``Reports/adminAccount(_:)``…), and the operator's daily actions as plain forms.
///
/// The admin token logs a person in; the session lives in an HttpOnly, SameSite=Strict cookie,
/// and every form carries the session's CSRF token, checked in ``postedForm(_:context:)``, the one
/// place forms are read. It is served only on its own address, never on the store's port.
struct ConsoleRoutes: Sendable {
    let store: Store
    let catalog: CatalogService
    let keys: SigningKeys
    let metrics: ServerMetrics
    let adminToken: String
    let sessions: ConsoleSessions
    let startedAt = Date()

    func router() -> Router<ConsoleContext> {
        let router = Router(context: ConsoleContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: ConsoleGate(sessions: sessions))
        router.get("login", use: loginPage)
        router.post("login", use: login)
        router.post("logout", use: logout)
        router.get("/", use: overview)
        router.get("products", use: products)
        router.get("covers/:id", use: cover)
        router.get("customers", use: customers)
        router.post("transactions/withdraw", use: withdraw)
        router.post("accounts/care", use: care)
        router.get("ask-to-buy", use: askToBuy)
        router.post("ask-to-buy/answer", use: answer)
        router.get("notifications", use: notifications)
        router.post("notifications/resend", use: resend)
        router.get("payments", use: payments)
        router.get("health", use: health)
        return router
    }

    // MARK: Logging in

    @Sendable func loginPage(_ request: Request, context: ConsoleContext) async throws -> Response {
        Self.html(.ok, Self.loginForm(error: nil))
    }

    @Sendable func login(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await Self.fields(request)
        guard AdminMiddleware.matches(form["token"] ?? "", adminToken) else {
            return Self.html(.unauthorized, Self.loginForm(error: "That is not this store's admin token (the file admin-token in the server's data folder)."))
        }
        let opened = await sessions.open()
        return Response(status: .seeOther, headers: [
            .location: "/",
            .setCookie: "\(ConsoleSessions.cookie)=\(opened.id); Path=/; HttpOnly; SameSite=Strict",
        ])
    }

    @Sendable func logout(_ request: Request, context: ConsoleContext) async throws -> Response {
        _ = try await postedForm(request, context: context)
        if let id = context.sessionId { await sessions.close(id) }
        return Response(status: .seeOther, headers: [
            .location: "/login",
            .setCookie: "\(ConsoleSessions.cookie)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        ])
    }

    static func loginForm(error: String?) -> String {
        let problem = error.map { #"<p class="error" role="alert">\#(ConsoleHTML.escape($0))</p>"# } ?? ""
        return ConsoleHTML.page("Log in", current: nil, csrf: nil, body: """
            \(problem)
            <form method="post" action="/login">
            <label for="token">Admin token</label>
            <input type="password" id="token" name="token" autocomplete="current-password" required>
            <button type="submit">Log in</button>
            </form>
            """)
    }

    // MARK: Overview

    @Sendable func overview(_ request: Request, context: ConsoleContext) async throws -> Response {
        let days = request.uri.queryParameters.get("days") == "90" ? 90 : 30
        let today = Calendar.utc.startOfDay(for: Date())
        let since = Calendar.utc.date(byAdding: .day, value: -(days - 1), to: today) ?? today
        var filter = ListFilter()
        filter.since = since
        let sales = try await store.reports.sales(filter)
        let subscribers = try await store.reports.activeSubscribers()
        let lifecycle = try await store.reports.subscriptionFigures(since: since)
        let overview = SalesOverview(rows: sales, kinds: await productKinds(), since: since, days: days)
        // One revenue chart per currency: amounts in different currencies are never added up.
        let revenueCharts = overview.currencies.map { currency -> String in
            let bars = overview.days.map { day in
                ConsoleChart.Bar(label: day.day, value: Double(day.netCents[currency] ?? 0), shown: ConsoleHTML.money(day.netCents[currency] ?? 0, currency))
            }
            return """
                <h2>Revenue by day (\(ConsoleHTML.escape(currency)))</h2>
                \(ConsoleChart.bars(bars, title: "Revenue by day in \(currency)", description: "net revenue in \(currency) for each of the last \(days) days; the table below lists every day"))
                """
        }.joined(separator: "\n")
        let unitBars = overview.days.map { ConsoleChart.Bar(label: $0.day, value: Double($0.units), shown: "\($0.units) sold") }
        let figures = """
            <ul class="figures">
            <li>Revenue, \(days) days<b>\(overview.totals.map { ConsoleHTML.money($0.value, $0.key) }.sorted().joined(separator: ", ").nonEmpty ?? "none")</b></li>
            <li>Units sold<b>\(overview.units)</b></li>
            <li>Refunds<b>\(overview.refunds)</b></li>
            <li>Active subscribers<b>\(subscribers)</b></li>
            <li>Renewals<b>\(lifecycle.renewals)</b></li>
            <li>Expired (churn)<b>\(lifecycle.expired)</b></li>
            </ul>
            """
        let kindRows = overview.byKind.sorted { $0.key < $1.key }.map { kind, totals in
            [ConsoleHTML.escape(kind), "\(totals.units)", ConsoleHTML.escape(totals.net.map { ConsoleHTML.money($0.value, $0.key) }.sorted().joined(separator: ", "))]
        }
        let dayRows = overview.days.map { day in
            [day.day, "\(day.units)", "\(day.refunds)", ConsoleHTML.escape(day.netCents.map { ConsoleHTML.money($0.value, $0.key) }.sorted().joined(separator: ", "))]
        }
        let body = """
            <p>Last <a href="/?days=30"\(days == 30 ? " aria-current=\"true\"" : "")>30 days</a> ·
            <a href="/?days=90"\(days == 90 ? " aria-current=\"true\"" : "")>90 days</a>, from \(overview.firstDay) (UTC).
            The same figures: <code>kiosk admin sales --since \(overview.firstDay) --json</code>.</p>
            \(figures)
            \(revenueCharts)
            <h2>Units by day</h2>
            \(ConsoleChart.bars(unitBars, title: "Units by day", description: "units sold on each of the last \(days) days; the table below lists every day"))
            \(ConsoleHTML.table(caption: "By product kind", headers: ["kind", "units", "net"], rows: kindRows))
            \(ConsoleHTML.table(caption: "By day", headers: ["day", "units", "refunds", "net"], rows: dayRows))
            """
        return Self.html(.ok, ConsoleHTML.page("Overview", current: "/", csrf: context.session?.csrf, body: body))
    }

    private func productKinds() async -> [String: ProductKind] {
        guard let published = try? await catalog.current else { return [:] }
        return published.products.mapValues(\.kind)
    }

    // MARK: Products

    /// `GET /covers/{id}`: the cover the store serves to everyone at `/v1/covers/{id}`, here too,
    /// since the console is on an address of its own (its pages load images only from it).
    @Sendable func cover(_ request: Request, context: ConsoleContext) async throws -> Response {
        try OPDSRoutes.coverResponse(try context.parameters.require("id"), published: try await catalog.current, request: request)
    }

    /// The product's cover as the store serves it to everyone (the publisher's image or the drawn
    /// card), small; its type and size when it is the publisher's.
    static func cover(_ product: Product) -> String {
        let id = product.id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? product.id
        let image = "<img src=\"/covers/\(ConsoleHTML.escape(id))\" alt=\"cover of \(ConsoleHTML.escape(product.title))\" height=\"64\" loading=\"lazy\">"
        guard let cover = product.cover else { return image + "<br><small>drawn</small>" }
        return image + "<br><small>\(ConsoleHTML.escape(cover.type)), \(Self.bytes(cover.size))</small>"
    }

    /// Who made it, its language, identifiers and subjects, as the catalog (or the EPUB) says.
    static func publicationDetails(_ product: Product) -> String {
        guard let metadata = product.metadata else { return "" }
        var parts: [String] = []
        if let contributors = metadata.contributors, !contributors.isEmpty {
            parts.append(contributors.map { $0.role == "author" ? $0.name : "\($0.name) (\($0.role))" }.joined(separator: ", "))
        }
        if let publisher = metadata.publisher { parts.append(publisher) }
        if let language = metadata.language { parts.append(language) }
        parts += metadata.identifiers ?? []
        if let subjects = metadata.subjects, !subjects.isEmpty { parts.append(subjects.joined(separator: ", ")) }
        if let pages = metadata.pageCount { parts.append("\(pages) pages") }
        return parts.isEmpty ? "" : "<br><small>" + ConsoleHTML.escape(parts.joined(separator: " · ")) + "</small>"
    }

    @Sendable func products(_ request: Request, context: ConsoleContext) async throws -> Response {
        let published = try await catalog.current
        let sales = try await store.reports.sales()
        let downloads = try await store.reports.downloadStats()
        var sold: [String: (units: Int, refunds: Int, net: [String: Int])] = [:]
        for row in sales {
            var entry = sold[row.productId] ?? (0, 0, [:])
            entry.units += row.sales
            entry.refunds += row.refunds
            entry.net[row.currency, default: 0] += row.netCents
            sold[row.productId] = entry
        }
        var served: [String: (requests: Int, bytes: Int64)] = [:]
        for row in downloads {
            served[row.productId, default: (0, 0)].requests += row.requests
            served[row.productId, default: (0, 0)].bytes += row.bytes
        }
        let rows = published.products.values.sorted { $0.id < $1.id }.map { product -> [String] in
            let archive = published.archives[product.id]
            let sale = sold[product.id]
            let serve = served[product.id]
            return [
                Self.cover(product),
                "<code>\(ConsoleHTML.escape(product.id))</code><br>\(ConsoleHTML.escape(product.title))" + Self.publicationDetails(product),
                // Off sale: not offered or sold, still delivered to its owners.
                product.forSale == false ? "\(product.kind.rawValue)<br><strong>off sale</strong>" : product.kind.rawValue,
                "\(sale?.units ?? 0)", "\(sale?.refunds ?? 0)",
                ConsoleHTML.escape((sale?.net ?? [:]).map { ConsoleHTML.money($0.value, $0.key) }.sorted().joined(separator: ", ")),
                "\(serve?.requests ?? 0)", Self.bytes(serve?.bytes ?? 0),
                archive.map { "<code>\(String($0.sha256.prefix(12)))</code>" } ?? "",
                archive.map { Self.bytes($0.size) } ?? "",
            ]
        }
        let body = """
            <p>Catalog ETag <code>\(ConsoleHTML.escape(published.etag))</code>. Sales as <code>kiosk admin sales --json</code>, content requests as <code>kiosk admin downloads --json</code>.</p>
            \(ConsoleHTML.table(caption: "Products", headers: ["cover", "product", "kind", "sold", "refunds", "net", "content requests", "bytes served", "version", "size"], rows: rows))
            """
        return Self.html(.ok, ConsoleHTML.page("Products", current: "/products", csrf: context.session?.csrf, body: body))
    }

    // MARK: Customers

    @Sendable func customers(_ request: Request, context: ConsoleContext) async throws -> Response {
        let query = (request.uri.queryParameters.get("q") ?? "").trimmingCharacters(in: .whitespaces)
        let done = request.uri.queryParameters.get("done")
        var body = """
            <form method="get" action="/customers" role="search">
            <label for="q">Email, account or transaction ID</label>
            <input type="search" id="q" name="q" value="\(ConsoleHTML.escape(query))" required>
            <button type="submit">Find</button>
            </form>
            """
        if let done { body = #"<p class="done" role="status">\#(ConsoleHTML.escape(done))</p>"# + body }
        if !query.isEmpty {
            body += try await customer(query, csrf: context.session?.csrf ?? "")
        }
        return Self.html(.ok, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf, body: body))
    }

    private func customer(_ query: String, csrf: String) async throws -> String {
        let accountId: String
        do {
            if query.contains("@") {
                guard let found = try await store.accounts.account(email: query) else {
                    return #"<p class="error" role="alert">No account signs in with \#(ConsoleHTML.escape(query)).</p>"#
                }
                accountId = found
            } else if let owner = try await store.reports.accountOwning(transactionId: query) {
                accountId = owner
            } else {
                accountId = query
            }
        } catch let error as StoreError {
            return #"<p class="error">\#(ConsoleHTML.escape("\(error)"))</p>"#
        }
        let view: AdminAccountView
        do {
            view = try await store.reports.adminAccount(accountId)
        } catch let error as StoreError {
            return #"<p class="error" role="alert">No account or transaction \#(ConsoleHTML.escape(query)): \#(ConsoleHTML.escape("\(error)"))</p>"#
        }
        // The ledger says which revocations gave the money back.
        let refunded = Dictionary(view.charges.filter { $0.kind == "refund" }.map { ($0.transactionId, $0) }) { first, _ in first }
        let rows = view.transactions.map { row -> [String] in
            let state = refunded[row.transactionId].map { "refunded (\(ConsoleHTML.money($0.amountCents, $0.currency)))" } ?? row.status.rawValue
            var cells = [
                "<code>\(ConsoleHTML.escape(row.transactionId))</code>", ConsoleHTML.time(row.createdAt), ConsoleHTML.escape(row.productId),
                state + (row.revocationReason.map { ": " + ConsoleHTML.escape($0) } ?? ""),
                // Paid with credits: no money moved, and a refund gives the credits back.
                row.creditsSpent.map { "\($0) credits" } ?? ConsoleHTML.money(row.amountCents, row.currency),
            ]
            // A revoked purchase can still be refunded (its money given back later); a refunded one is done.
            let refundable = row.status == .purchased || (row.status == .revoked && refunded[row.transactionId] == nil && row.amountCents > 0)
            let refundLabel = row.creditsSpent.map { "Give \($0) credits back" } ?? (row.amountCents > 0 ? "Refund \(ConsoleHTML.money(row.amountCents, row.currency))" : "Refund")
            if refundable {
                let id = ConsoleHTML.escape(row.transactionId)
                let revoke = row.status == .purchased ? #"<button type="submit" name="action" value="revoke">Revoke</button>"# : ""
                cells.append("""
                    <form method="post" action="/transactions/withdraw">\(ConsoleHTML.hiddenCSRF(csrf))
                    <input type="hidden" name="transaction" value="\(id)">
                    <label for="reason-\(id)">Reason</label><input type="text" id="reason-\(id)" name="reason">
                    <label><input type="checkbox" name="confirm" value="yes" required> I mean it</label>
                    <button type="submit" name="action" value="refund">\(refundLabel)</button>
                    \(revoke)
                    </form>
                    """)
            } else {
                cells.append("")
            }
            return cells
        }
        let summary = view.summary
        var state = [view.email.map { "signs in with \(ConsoleHTML.escape($0))" } ?? "anonymous (no sign-in)"]
        if view.disabled == true { state.append("<strong>disabled</strong>") }
        if view.deleted == true { state.append("deleted by its holder") }
        let devices = (view.devices ?? []).map { [ConsoleHTML.escape($0.name), "<code>\(ConsoleHTML.escape($0.id))</code>", ConsoleHTML.time($0.createdAt), ConsoleHTML.time($0.lastSeenAt)] }
        let audit = (view.audit ?? []).map { [ConsoleHTML.time($0.at), ConsoleHTML.escape($0.action), ConsoleHTML.escape($0.actor), ConsoleHTML.escape($0.detail)] }
        return """
            <h2>Account <code>\(ConsoleHTML.escape(summary.accountId))</code></h2>
            <p>\(state.joined(separator: " · "))</p>
            <ul class="figures"><li>Credits<b>\(summary.credits)</b></li><li>Transactions<b>\(view.transactions.count)</b></li><li>Devices<b>\(devices.count)</b></li></ul>
            \(ConsoleHTML.table(caption: "Transactions", headers: ["transaction", "date", "product", "state", "amount", "action"], rows: rows))
            <form method="post" action="/accounts/care">\(ConsoleHTML.hiddenCSRF(csrf))
            <input type="hidden" name="account" value="\(ConsoleHTML.escape(summary.accountId))">
            <label for="care-reason">Reason, for the audit list</label><input type="text" id="care-reason" name="reason">
            \(view.disabled == true ? #"<button type="submit" name="action" value="enable">Enable</button>"# : #"<button type="submit" name="action" value="disable">Disable (sign out every device)</button>"#)
            \(view.email == nil ? "" : #"<button type="submit" name="action" value="reset-code">Give a reset code</button>"#)
            </form>
            \(ConsoleHTML.table(caption: "Devices", headers: ["name", "device", "signed in", "last seen"], rows: devices))
            \(ConsoleHTML.table(caption: "Audit", headers: ["when", "action", "by", "detail"], rows: audit))
            """
    }

    /// Disable, enable or give a reset code, with a reason: the same calls as `kiosk admin
    /// disable|enable|reset-code`, each kept in the account's audit list. A reset code is shown once, here.
    @Sendable func care(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let account = form["account"] ?? ""
        let back = #"<p><a href="/customers?q=\#(Self.query(account))">Back to the account</a></p>"#
        let reason = form["reason"] ?? ""
        do {
            switch form["action"] {
            case "disable":
                _ = try await store.accounts.disable(account, reason: reason)
            case "enable":
                _ = try await store.accounts.enable(account, reason: reason)
            case "reset-code":
                let issued = try await store.accounts.issueResetCode(account)
                return Self.html(.ok, ConsoleHTML.page("Reset code", current: "/customers", csrf: context.session?.csrf, body: """
                    <p role="status">The one-time code for \(ConsoleHTML.escape(issued.email)), until \(ConsoleHTML.time(issued.expiresAt)):</p>
                    <p><code class="code">\(ConsoleHTML.escape(issued.code))</code></p>
                    <p>Give it to the reader by a way you trust; they run <code>kiosk account reset --email \(ConsoleHTML.escape(issued.email)) --code \(ConsoleHTML.escape(issued.code))</code>. It is not shown again.</p>
                    \(back)
                    """))
            default:
                return Self.html(.badRequest, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                    body: #"<p class="error" role="alert">The form said neither disable, enable nor reset-code; nothing was done.</p>"# + back))
            }
        } catch let error as StoreError {
            return Self.html(.conflict, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">\#(ConsoleHTML.escape("\(error)"))</p>"# + back))
        }
        let done = "\(account) \(form["action"] == "disable" ? "disabled: every device signed out" : "enabled")"
        return Response(status: .seeOther, headers: [.location: "/customers?q=\(Self.query(account))&done=\(Self.query(done))"])
    }

    /// Refund or revoke, with a reason and a confirmation: the same call as `kiosk admin refund|revoke`.
    @Sendable func withdraw(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        guard let transaction = form["transaction"], !transaction.isEmpty else {
            return Self.html(.badRequest, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                body: #"<p class="error">The form named no transaction.</p>"#))
        }
        guard form["confirm"] == "yes" else {
            return Self.html(.badRequest, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">Tick "I mean it" to confirm; nothing was done.</p><p><a href="/customers?q=\#(Self.query(transaction))">Back</a></p>"#))
        }
        guard let action = form["action"], action == "refund" || action == "revoke" else {
            return Self.html(.badRequest, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">The form said neither refund nor revoke; nothing was done.</p><p><a href="/customers?q=\#(Self.query(transaction))">Back</a></p>"#))
        }
        let refund = action == "refund"
        let reason = form["reason"].flatMap { $0.isEmpty ? nil : $0 }
        do {
            _ = try await store.payments.revoke(transactionId: transaction, reason: reason, refund: refund)
        } catch let error as StoreError {
            return Self.html(.conflict, ConsoleHTML.page("Customers", current: "/customers", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">\#(ConsoleHTML.escape("\(error)"))</p><p><a href="/customers?q=\#(Self.query(transaction))">Back</a></p>"#))
        }
        let done = "\(transaction) \(refund ? "refunded" : "revoked")"
        return Response(status: .seeOther, headers: [.location: "/customers?q=\(Self.query(transaction))&done=\(Self.query(done))"])
    }

    // MARK: Ask to Buy

    @Sendable func askToBuy(_ request: Request, context: ConsoleContext) async throws -> Response {
        let csrf = context.session?.csrf ?? ""
        let pending = try await store.reports.pendingRequests()
        let rows = pending.map { row -> [String] in
            let id = ConsoleHTML.escape(row.transactionId)
            return [
                "<code>\(id)</code>", ConsoleHTML.time(row.createdAt), ConsoleHTML.escape(row.productId),
                "<code>\(ConsoleHTML.escape(row.accountId))</code>",
                ConsoleHTML.money(row.amountCents, row.currency) + (row.priceOnApproval == true ? " on approval" : ""),
                """
                <form method="post" action="/ask-to-buy/answer" class="inline">\(ConsoleHTML.hiddenCSRF(csrf))<input type="hidden" name="transaction" value="\(id)">
                <button type="submit" name="answer" value="approve" aria-label="Approve \(id)">Approve</button>
                <button type="submit" name="answer" value="decline" aria-label="Decline \(id)">Decline</button></form>
                """,
            ]
        }
        var body = ConsoleHTML.table(caption: "Waiting for an answer (kiosk admin pending)", headers: ["transaction", "asked", "product", "account", "price", "answer"], rows: rows)
        if let done = request.uri.queryParameters.get("done") { body = #"<p class="done" role="status">\#(ConsoleHTML.escape(done))</p>"# + body }
        return Self.html(.ok, ConsoleHTML.page("Ask to Buy", current: "/ask-to-buy", csrf: csrf, body: body))
    }

    @Sendable func answer(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let transaction = form["transaction"] ?? ""
        do {
            switch form["answer"] {
            case "approve": _ = try await store.payments.approve(transactionId: transaction)
            case "decline": _ = try await store.payments.decline(transactionId: transaction)
            default:
                return Self.html(.badRequest, ConsoleHTML.page("Ask to Buy", current: "/ask-to-buy", csrf: context.session?.csrf,
                    body: #"<p class="error">The form said neither approve nor decline; nothing was done.</p>"#))
            }
        } catch let error as StoreError {
            return Self.html(.conflict, ConsoleHTML.page("Ask to Buy", current: "/ask-to-buy", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">\#(ConsoleHTML.escape("\(error)"))</p><p><a href="/ask-to-buy">Back</a></p>"#))
        }
        let done = "\(transaction) \(form["answer"] == "approve" ? "approved" : "declined")"
        return Response(status: .seeOther, headers: [.location: "/ask-to-buy?done=\(Self.query(done))"])
    }

    // MARK: Notifications

    /// Deliveries to the publisher's endpoints, by endpoint: state, attempts, last answer; a
    /// failed one can be sent again (`kiosk admin notifications [--failed]`, `resend`).
    @Sendable func notifications(_ request: Request, context: ConsoleContext) async throws -> Response {
        let csrf = context.session?.csrf ?? ""
        let failedOnly = request.uri.queryParameters.get("failed") == "true"
        let rows = try await store.notifications.list(failed: failedOnly)
        var byEndpoint: [String: (delivered: Int, pending: Int, failed: Int)] = [:]
        for row in rows {
            var entry = byEndpoint[row.url] ?? (0, 0, 0)
            switch row.state {
            case "delivered": entry.delivered += 1
            case "failed": entry.failed += 1
            default: entry.pending += 1
            }
            byEndpoint[row.url] = entry
        }
        let endpointRows = byEndpoint.sorted { $0.key < $1.key }.map { url, counts in
            [ConsoleHTML.escape(url), "\(counts.delivered)", "\(counts.pending)", "\(counts.failed)"]
        }
        let deliveryRows = rows.map { row -> [String] in
            let id = ConsoleHTML.escape(row.notificationId)
            let resend = row.state == "failed"
                ? """
                  <form method="post" action="/notifications/resend" class="inline">\(ConsoleHTML.hiddenCSRF(csrf))<input type="hidden" name="notification" value="\(id)">
                  <button type="submit" aria-label="Send \(id) again">Send again</button></form>
                  """
                : ""
            return [
                "<code>\(id)</code>", ConsoleHTML.escape(row.type + (row.subtype.map { " / " + $0 } ?? "")), ConsoleHTML.escape(row.url),
                ConsoleHTML.escape(row.state), "\(row.attempts)", row.lastStatus.map(String.init) ?? "", ConsoleHTML.escape(row.lastError ?? ""),
                ConsoleHTML.time(row.createdAt), resend,
            ]
        }
        var body = """
            <p><a href="/notifications">All</a> · <a href="/notifications?failed=true">Failed only</a>. The same rows: <code>kiosk admin notifications\(failedOnly ? " --failed" : "") --json</code>.</p>
            \(ConsoleHTML.table(caption: "By endpoint", headers: ["endpoint", "delivered", "waiting", "failed"], rows: endpointRows))
            \(ConsoleHTML.table(caption: "Deliveries, newest first", headers: ["notification", "type", "endpoint", "state", "attempts", "last status", "last error", "created", ""], rows: deliveryRows))
            """
        if let done = request.uri.queryParameters.get("done") { body = #"<p class="done" role="status">\#(ConsoleHTML.escape(done))</p>"# + body }
        return Self.html(.ok, ConsoleHTML.page("Notifications", current: "/notifications", csrf: csrf, body: body))
    }

    @Sendable func resend(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let id = form["notification"] ?? ""
        do {
            _ = try await store.notifications.resendNotification(id)
        } catch let error as StoreError {
            return Self.html(.conflict, ConsoleHTML.page("Notifications", current: "/notifications", csrf: context.session?.csrf,
                body: #"<p class="error" role="alert">\#(ConsoleHTML.escape("\(error)"))</p><p><a href="/notifications">Back</a></p>"#))
        }
        return Response(status: .seeOther, headers: [.location: "/notifications?done=\(Self.query("\(id) queued to be sent again"))"])
    }

    // MARK: Health

    /// What the payment channels sent (Stripe's events): first those to act on (paid but not
    /// granted, or paid for what the account had), then the latest of all; as `kiosk admin events`.
    @Sendable func payments(_ request: Request, context: ConsoleContext) async throws -> Response {
        let unmatched = try await store.reports.channelEvents(unmatchedOnly: true, limit: 200)
        let latest = try await store.reports.channelEvents(unmatchedOnly: false, limit: 100)
        func rows(_ events: [AdminChannelEventRow]) -> [[String]] {
            events.map { event in
                [ConsoleHTML.time(event.receivedAt), ConsoleHTML.escape(event.channel), "<code>\(ConsoleHTML.escape(event.eventId))</code>",
                 ConsoleHTML.escape(event.type), ConsoleHTML.escape(event.outcome),
                 event.accountId.map { #"<a href="/customers?q=\#(Self.query($0))">\#(ConsoleHTML.escape($0))</a>"# } ?? "",
                 ConsoleHTML.escape(event.detail)]
            }
        }
        let headers = ["received", "channel", "event", "type", "outcome", "account", "what came of it"]
        // The last 30 days' sales by channel and currency, summed over products and days.
        let since = Calendar.utc.startOfDay(for: Date().addingTimeInterval(-29 * 86_400))
        var byChannel: [String: AdminSalesRow] = [:]
        for row in try await store.reports.sales(ListFilter(since: since), byChannel: true) {
            let key = "\(row.channel ?? "")\t\(row.currency)"
            var total = byChannel[key] ?? AdminSalesRow(day: "", productId: "", currency: row.currency, sales: 0, refunds: 0, netCents: 0, channel: row.channel)
            total.sales += row.sales
            total.refunds += row.refunds
            total.netCents += row.netCents
            byChannel[key] = total
        }
        let channelRows = byChannel.values.sorted { ($0.channel ?? "", $0.currency) < ($1.channel ?? "", $1.currency) }.map { row in
            [ConsoleHTML.escape(row.channel ?? ""), ConsoleHTML.escape(row.currency), "\(row.sales)", "\(row.refunds)", ConsoleHTML.escape(Price.shown(cents: row.netCents, row.currency))]
        }
        let body = """
            <p>Events the payment channels sent, each kept once. Those to act on were paid but not granted (refund them on the channel, or grant by hand), or paid for what the account already had.</p>
            \(unmatched.isEmpty ? #"<p role="status">Nothing to act on.</p>"# : ConsoleHTML.table(caption: "To act on", headers: headers, rows: rows(unmatched)))
            \(ConsoleHTML.table(caption: "Sales by channel, the last 30 days", headers: ["channel", "currency", "sales", "refunds", "net"], rows: channelRows))
            \(ConsoleHTML.table(caption: "Latest events", headers: headers, rows: rows(latest)))
            """
        return Self.html(.ok, ConsoleHTML.page("Payments", current: "/payments", csrf: context.session?.csrf, body: body))
    }

    @Sendable func health(_ request: Request, context: ConsoleContext) async throws -> Response {
        let keyRows = try await keys.list().map { key -> [String] in
            let age = Int(Date().timeIntervalSince(key.createdAt) / 86_400)
            return ["<code>\(ConsoleHTML.escape(key.kid))</code>", ConsoleHTML.time(key.createdAt), "\(age) days", key.retiredAt.map { "retired " + ConsoleHTML.time($0) } ?? "in use"]
        }
        let published = try? await catalog.current
        let figures = Self.metricRows(metrics.exposition())
        let body = """
            <ul class="figures">
            <li>Database<b>\(store.reports.engineName)</b></li>
            <li>This instance<b>PID \(getpid())</b>up since \(ConsoleHTML.time(startedAt))</li>
            <li>Catalog<b>\(published.map { "\($0.products.count) products" } ?? "loading")</b><code>\(ConsoleHTML.escape(published?.etag ?? ""))</code></li>
            </ul>
            \(ConsoleHTML.table(caption: "Receipt signing keys (kiosk keys)", headers: ["key", "created", "age", "state"], rows: keyRows))
            \(ConsoleHTML.table(caption: "Figures from /metrics", headers: ["figure", "for", "value"], rows: figures))
            """
        return Self.html(.ok, ConsoleHTML.page("Health", current: "/health", csrf: context.session?.csrf, body: body))
    }

    /// The Prometheus exposition as rows a person reads: the figure, what it is for (its labels),
    /// its value; histograms as their count and sum, not their buckets.
    static func metricRows(_ exposition: String) -> [[String]] {
        exposition.split(separator: "\n").compactMap { line -> [String]? in
            guard !line.hasPrefix("#"), !line.contains("_bucket{"), let space = line.lastIndex(of: " ") else { return nil }
            let series = line[..<space]
            let value = String(line[line.index(after: space)...])
            let name = series.split(separator: "{", maxSplits: 1).first.map(String.init) ?? String(series)
            let labels = series.contains("{") ? String(series.drop { $0 != "{" }.dropFirst().dropLast())
                .replacingOccurrences(of: "\",", with: ", ").replacingOccurrences(of: "=\"", with: " ").replacingOccurrences(of: "\"", with: "") : ""
            let shown = Double(value).map { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int64($0)) : String(format: "%.3f", $0) } ?? value
            return ["<code>\(ConsoleHTML.escape(name))</code>", ConsoleHTML.escape(labels), ConsoleHTML.escape(shown)]
        }
    }

    // MARK: Plumbing

    /// The fields of a posted form, once its CSRF token is the session's; anything else is a 403.
    /// Every form's handler reads its form here, so none can forget the check.
    func postedForm(_ request: Request, context: ConsoleContext) async throws -> [String: String] {
        let form = try await Self.fields(request)
        guard let session = context.session, let token = form["csrf"], AdminMiddleware.matches(token, session.csrf) else {
            throw HTTPError(.forbidden, message: "This form's CSRF token is missing or not this session's: reload the page and send it again.")
        }
        return form
    }

    static func fields(_ request: Request) async throws -> [String: String] {
        try await HTMLForm.fields(request)
    }

    static func html(_ status: HTTPResponse.Status, _ page: String) -> Response {
        HTMLForm.page(status, page, inlineStyle: true)
    }

    static func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    }

    static func bytes(_ count: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: count, countStyle: .binary)
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
