import Foundation
import Hummingbird
import HTTPTypes
import KioskCore
import KioskStore
import Mustache

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
    let pages: ConsolePages

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
            return pages.render(error.status, "consoleMessage", ConsoleView.Page(error.status.reasonPhrase, current: nil, csrf: context.session?.csrf,
                error: message, back: .init(href: "/", label: "The overview"), page: ConsoleView.Nothing()))
        }
    }

    private func admitted(_ request: Request, context: ConsoleContext, next: (Request, ConsoleContext) async throws -> Response) async throws -> Response {
        if context.session == nil, request.uri.path != "/login" {
            if request.method == .get || request.method == .head {
                return Response(status: .seeOther, headers: [.location: "/login"])
            }
            return pages.render(.forbidden, "consoleMessage", ConsoleView.Page("Not logged in", current: nil, csrf: nil,
                error: "Log in first: this form needs a console session.", back: .init(href: "/login", label: "Log in"), page: ConsoleView.Nothing()))
        }
        return try await next(request, context)
    }
}

/// Renders the console's templates (``ConsoleTemplates``) into pages with the console's headers.
struct ConsolePages: Sendable {
    let templates: MustacheLibrary

    func render<Body>(_ status: HTTPResponse.Status, _ template: String, _ page: ConsoleView.Page<Body>) -> Response {
        HTMLForm.page(status, templates.render(page, withTemplate: template) ?? "", inlineStyle: true)
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
    let pages: ConsolePages
    let startedAt = Date()

    func router() -> Router<ConsoleContext> {
        let router = Router(context: ConsoleContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: ConsoleGate(sessions: sessions, pages: pages))
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
        router.get("codes", use: codes)
        router.post("codes", use: makeCodes)
        router.post("codes/revoke", use: revokeCodes)
        router.get("notifications", use: notifications)
        router.post("notifications/resend", use: resend)
        router.get("payments", use: payments)
        router.get("health", use: health)
        return router
    }

    // MARK: Logging in

    @Sendable func loginPage(_ request: Request, context: ConsoleContext) async throws -> Response {
        loginForm(.ok, error: nil)
    }

    @Sendable func login(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        guard AdminMiddleware.matches(form["token"] ?? "", adminToken) else {
            return loginForm(.unauthorized, error: "That is not this store's admin token (the file admin-token in the server's data folder).")
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

    private func loginForm(_ status: HTTPResponse.Status, error: String?) -> Response {
        pages.render(status, "consoleLogin", ConsoleView.Page("Log in", current: nil, csrf: nil, error: error, page: ConsoleView.Nothing()))
    }

    // MARK: Overview

    struct Overview {
        struct Window {
            var days: Int
            var current: Bool
        }

        struct Revenue {
            var currency: String
            var chart: ConsoleView.Chart
        }

        var windows: [Window]
        var firstDay: String
        var figures: [ConsoleView.Figure]
        var revenue: [Revenue]
        var units: ConsoleView.Chart
        var byKind: ConsoleView.Table
        var byDay: ConsoleView.Table
    }

    @Sendable func overview(_ request: Request, context: ConsoleContext) async throws -> Response {
        let days = request.uri.queryParameters.get("days") == "90" ? 90 : 30
        let today = Calendar.utc.startOfDay(for: Date())
        let since = Calendar.utc.date(byAdding: .day, value: -(days - 1), to: today) ?? today
        var filter = ListFilter()
        filter.since = since
        let sales = try await store.reports.sales(filter)
        let subscribers = try await store.reports.activeSubscribers()
        let lifecycle = try await store.reports.subscriptionFigures(since: since)
        let offers = try await store.reports.offerFigures(since: since)
        let overview = SalesOverview(rows: sales, kinds: await productKinds(), since: since, days: days)
        // One revenue chart per currency: amounts in different currencies are never added up.
        let revenue = overview.currencies.map { currency in
            let bars = overview.days.map { day in
                ConsoleChart.Bar(label: day.day, value: Double(day.netCents[currency] ?? 0), shown: ConsoleText.money(day.netCents[currency] ?? 0, currency))
            }
            return Overview.Revenue(currency: currency, chart: ConsoleChart.bars(bars, title: "Revenue by day in \(currency)",
                description: "net revenue in \(currency) for each of the last \(days) days; the table below lists every day"))
        }
        let unitBars = overview.days.map { ConsoleChart.Bar(label: $0.day, value: Double($0.units), shown: "\($0.units) sold") }
        let figures = [
            ConsoleView.Figure(name: "Revenue, \(days) days", value: ConsoleText.money(overview.totals).nonEmpty ?? "none"),
            ConsoleView.Figure(name: "Units sold", value: "\(overview.units)"),
            ConsoleView.Figure(name: "Refunds", value: "\(overview.refunds)"),
            ConsoleView.Figure(name: "Active subscribers", value: "\(subscribers)"),
            ConsoleView.Figure(name: "Renewals", value: "\(lifecycle.renewals)"),
            ConsoleView.Figure(name: "Expired (churn)", value: "\(lifecycle.expired)"),
            ConsoleView.Figure(name: "Introductory offers taken",
                               value: offers.taken.isEmpty ? "none" : offers.taken.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")),
            ConsoleView.Figure(name: "Offers gone on to the full price", value: "\(offers.converted)"),
        ]
        let kindRows = overview.byKind.sorted { $0.key < $1.key }.map { kind, totals -> [ConsoleView.Cell] in
            [.init(kind), .init("\(totals.units)"), .init(ConsoleText.money(totals.net))]
        }
        let dayRows = overview.days.map { day -> [ConsoleView.Cell] in
            [.init(day.day), .init("\(day.units)"), .init("\(day.refunds)"), .init(ConsoleText.money(day.netCents))]
        }
        let page = Overview(
            windows: [30, 90].map { Overview.Window(days: $0, current: $0 == days) }, firstDay: overview.firstDay, figures: figures, revenue: revenue,
            units: ConsoleChart.bars(unitBars, title: "Units by day", description: "units sold on each of the last \(days) days; the table below lists every day"),
            byKind: .init(caption: "By product kind", headers: ["kind", "units", "net"], rows: kindRows),
            byDay: .init(caption: "By day", headers: ["day", "units", "refunds", "net"], rows: dayRows))
        return pages.render(.ok, "consoleOverview", ConsoleView.Page("Overview", current: "/", csrf: context.session?.csrf, page: page))
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

    struct Products {
        struct Row {
            var id: String
            var coverPath: String
            /// The publisher's cover's type and size, or "drawn" for the card the store draws.
            var coverNote: String
            var title: String
            var details: String?
            var kind: String
            /// Off sale: not offered or sold, still delivered to its owners.
            var offSale: Bool
            var sold: Int
            var refunds: Int
            var net: String
            var requests: Int
            var served: String
            var version: String?
            var size: String
        }

        var etag: String
        var products: [Row]
    }

    /// Who made it, its language, identifiers and subjects, as the catalog (or the EPUB) says.
    static func publicationDetails(_ product: Product) -> String? {
        guard let metadata = product.metadata else { return nil }
        var parts: [String] = []
        if let contributors = metadata.contributors, !contributors.isEmpty {
            parts.append(contributors.map { $0.role == "author" ? $0.name : "\($0.name) (\($0.role))" }.joined(separator: ", "))
        }
        if let publisher = metadata.publisher { parts.append(publisher) }
        if let language = metadata.language { parts.append(language) }
        parts += metadata.identifiers ?? []
        if let subjects = metadata.subjects, !subjects.isEmpty { parts.append(subjects.joined(separator: ", ")) }
        if let pages = metadata.pageCount { parts.append("\(pages) pages") }
        return parts.isEmpty ? nil : parts.joined(separator: " · ")
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
        let rows = published.products.values.sorted { $0.id < $1.id }.map { product in
            let archive = published.archives[product.id]
            let sale = sold[product.id]
            let serve = served[product.id]
            return Products.Row(
                id: product.id, coverPath: product.id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? product.id,
                coverNote: product.cover.map { "\($0.type), \(ConsoleText.bytes($0.size))" } ?? "drawn",
                title: product.title, details: Self.publicationDetails(product), kind: product.kind.rawValue, offSale: product.forSale == false,
                sold: sale?.units ?? 0, refunds: sale?.refunds ?? 0, net: ConsoleText.money(sale?.net ?? [:]),
                requests: serve?.requests ?? 0, served: ConsoleText.bytes(serve?.bytes ?? 0),
                version: archive.map { String($0.sha256.prefix(12)) }, size: archive.map { ConsoleText.bytes($0.size) } ?? "")
        }
        return pages.render(.ok, "consoleProducts", ConsoleView.Page("Products", current: "/products", csrf: context.session?.csrf,
            page: Products(etag: published.etag, products: rows)))
    }

    // MARK: Customers

    struct Customers {
        struct Account {
            var accountId: String
            var email: String?
            var disabled: Bool
            var deleted: Bool
            var credits: Int
            var transactionCount: Int
            var deviceCount: Int
            var transactions: [Transaction]
            var devices: ConsoleView.Table
            var audit: ConsoleView.Table
        }

        struct Transaction {
            var id: String
            var date: String
            var productId: String
            var state: String
            var reason: String?
            var amount: String
            /// The refund button's words, when it can still be refunded; nil for none.
            var refundLabel: String?
            var revocable: Bool
        }

        var query: String
        var notFound: String?
        var account: Account?
    }

    @Sendable func customers(_ request: Request, context: ConsoleContext) async throws -> Response {
        let query = (request.uri.queryParameters.get("q") ?? "").trimmingCharacters(in: .whitespaces)
        var page = Customers(query: query)
        if !query.isEmpty {
            switch try await customer(query) {
            case .success(let account): page.account = account
            case .failure(let problem): page.notFound = problem.message
            }
        }
        return pages.render(.ok, "consoleCustomers", ConsoleView.Page("Customers", current: "/customers", csrf: context.session?.csrf,
            done: await done(context), page: page))
    }

    struct NotFound: Error {
        var message: String
    }

    /// The account an email, a transaction or an account ID names, as the page shows it.
    private func customer(_ query: String) async throws -> Result<Customers.Account, NotFound> {
        let accountId: String
        do {
            if query.contains("@") {
                guard let found = try await store.accounts.account(email: query) else {
                    return .failure(NotFound(message: "No account signs in with \(query)."))
                }
                accountId = found
            } else if let owner = try await store.reports.accountOwning(transactionId: query) {
                accountId = owner
            } else {
                accountId = query
            }
        } catch let error as StoreError {
            return .failure(NotFound(message: "\(error)"))
        }
        let view: AdminAccountView
        do {
            view = try await store.reports.adminAccount(accountId)
        } catch let error as StoreError {
            return .failure(NotFound(message: "No account or transaction \(query): \(error)"))
        }
        // The ledger says which revocations gave the money back.
        let refunded = Dictionary(view.charges.filter { $0.kind == "refund" }.map { ($0.transactionId, $0) }) { first, _ in first }
        let transactions = view.transactions.map { row in
            // A revoked purchase can still be refunded (its money given back later); a refunded one is done.
            let refundable = row.status == .purchased || (row.status == .revoked && refunded[row.transactionId] == nil && row.amountCents > 0)
            // Paid with credits: no money moved, and a refund gives the credits back.
            let refundLabel = row.creditsSpent.map { "Give \($0) credits back" } ?? (row.amountCents > 0 ? "Refund \(ConsoleText.money(row.amountCents, row.currency))" : "Refund")
            return Customers.Transaction(
                id: row.transactionId, date: ConsoleText.time(row.createdAt), productId: row.productId,
                state: refunded[row.transactionId].map { "refunded (\(ConsoleText.money($0.amountCents, $0.currency)))" } ?? row.status.rawValue,
                reason: row.revocationReason, amount: row.creditsSpent.map { "\($0) credits" } ?? ConsoleText.money(row.amountCents, row.currency),
                refundLabel: refundable ? refundLabel : nil, revocable: row.status == .purchased)
        }
        let devices = (view.devices ?? []).map { device -> [ConsoleView.Cell] in
            [.init(device.name), .code(device.id), .init(ConsoleText.time(device.createdAt)), .init(ConsoleText.time(device.lastSeenAt))]
        }
        let audit = (view.audit ?? []).map { entry -> [ConsoleView.Cell] in
            [.init(ConsoleText.time(entry.at)), .init(entry.action), .init(entry.actor), .init(entry.detail)]
        }
        return .success(Customers.Account(
            accountId: view.summary.accountId, email: view.email, disabled: view.disabled == true, deleted: view.deleted == true,
            credits: view.summary.credits, transactionCount: view.transactions.count, deviceCount: devices.count, transactions: transactions,
            devices: .init(caption: "Devices", headers: ["name", "device", "signed in", "last seen"], rows: devices),
            audit: .init(caption: "Audit", headers: ["when", "action", "by", "detail"], rows: audit)))
    }

    struct ResetCode {
        var email: String
        var code: String
        var expires: String
    }

    /// Disable, enable or give a reset code, with a reason: the same calls as `kiosk admin
    /// disable|enable|reset-code`, each kept in the account's audit list. A reset code is shown once, here.
    @Sendable func care(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let account = form["account"] ?? ""
        let back = ConsoleView.Back(href: "/customers?q=\(Self.query(account))", label: "Back to the account")
        let reason = form["reason"] ?? ""
        do {
            switch form["action"] {
            case "disable":
                _ = try await store.accounts.disable(account, reason: reason)
            case "enable":
                _ = try await store.accounts.enable(account, reason: reason)
            case "reset-code":
                let issued = try await store.accounts.issueResetCode(account)
                return pages.render(.ok, "consoleResetCode", ConsoleView.Page("Reset code", current: "/customers", csrf: context.session?.csrf, back: back,
                    page: ResetCode(email: issued.email, code: issued.code, expires: ConsoleText.time(issued.expiresAt))))
            default:
                return refusal(.badRequest, "Customers", current: "/customers", context: context,
                    "The form said neither disable, enable nor reset-code; nothing was done.", back: back)
            }
        } catch let error as StoreError {
            return refusal(.conflict, "Customers", current: "/customers", context: context, "\(error)", back: back)
        }
        await said("\(account) \(form["action"] == "disable" ? "disabled: every device signed out" : "enabled")", context)
        return Response(status: .seeOther, headers: [.location: "/customers?q=\(Self.query(account))"])
    }

    /// Refund or revoke, with a reason and a confirmation: the same call as `kiosk admin refund|revoke`.
    @Sendable func withdraw(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        guard let transaction = form["transaction"], !transaction.isEmpty else {
            return refusal(.badRequest, "Customers", current: "/customers", context: context, "The form named no transaction.")
        }
        let back = ConsoleView.Back(href: "/customers?q=\(Self.query(transaction))", label: "Back")
        guard form["confirm"] == "yes" else {
            return refusal(.badRequest, "Customers", current: "/customers", context: context, #"Tick "I mean it" to confirm; nothing was done."#, back: back)
        }
        guard let action = form["action"], action == "refund" || action == "revoke" else {
            return refusal(.badRequest, "Customers", current: "/customers", context: context, "The form said neither refund nor revoke; nothing was done.", back: back)
        }
        let refund = action == "refund"
        let reason = form["reason"].flatMap { $0.isEmpty ? nil : $0 }
        do {
            _ = try await store.payments.revoke(transactionId: transaction, reason: reason, refund: refund)
        } catch let error as StoreError {
            return refusal(.conflict, "Customers", current: "/customers", context: context, "\(error)", back: back)
        }
        await said("\(transaction) \(refund ? "refunded" : "revoked")", context)
        return Response(status: .seeOther, headers: [.location: "/customers?q=\(Self.query(transaction))"])
    }

    // MARK: Ask to Buy

    struct AskToBuy {
        struct Asked {
            var id: String
            var asked: String
            var productId: String
            var accountId: String
            var price: String
        }

        var requests: [Asked]
    }

    @Sendable func askToBuy(_ request: Request, context: ConsoleContext) async throws -> Response {
        let pending = try await store.reports.pendingRequests().map { row in
            AskToBuy.Asked(id: row.transactionId, asked: ConsoleText.time(row.createdAt), productId: row.productId, accountId: row.accountId,
                           price: ConsoleText.money(row.amountCents, row.currency) + (row.priceOnApproval == true ? " on approval" : ""))
        }
        return pages.render(.ok, "consoleAskToBuy", ConsoleView.Page("Ask to Buy", current: "/ask-to-buy", csrf: context.session?.csrf,
            done: await done(context), page: AskToBuy(requests: pending)))
    }

    @Sendable func answer(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let transaction = form["transaction"] ?? ""
        do {
            switch form["answer"] {
            case "approve": _ = try await store.payments.approve(transactionId: transaction)
            case "decline": _ = try await store.payments.decline(transactionId: transaction)
            default:
                return refusal(.badRequest, "Ask to Buy", current: "/ask-to-buy", context: context, "The form said neither approve nor decline; nothing was done.")
            }
        } catch let error as StoreError {
            return refusal(.conflict, "Ask to Buy", current: "/ask-to-buy", context: context, "\(error)", back: .init(href: "/ask-to-buy", label: "Back"))
        }
        await said("\(transaction) \(form["answer"] == "approve" ? "approved" : "declined")", context)
        return Response(status: .seeOther, headers: [.location: "/ask-to-buy"])
    }

    // MARK: Notifications

    struct Notifications {
        struct Delivery {
            var id: String
            var type: String
            var url: String
            var state: String
            var attempts: Int
            var lastStatus: String
            var lastError: String
            var created: String
            var failed: Bool
        }

        var failedOnly: Bool
        var endpoints: ConsoleView.Table
        var deliveries: [Delivery]
    }

    /// Deliveries to the publisher's endpoints, by endpoint: state, attempts, last answer; a
    /// failed one can be sent again (`kiosk admin notifications [--failed]`, `resend`).
    @Sendable func notifications(_ request: Request, context: ConsoleContext) async throws -> Response {
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
        let endpointRows = byEndpoint.sorted { $0.key < $1.key }.map { url, counts -> [ConsoleView.Cell] in
            [.init(url), .init("\(counts.delivered)"), .init("\(counts.pending)"), .init("\(counts.failed)")]
        }
        let deliveries = rows.map { row in
            Notifications.Delivery(
                id: row.notificationId, type: row.type + (row.subtype.map { " / " + $0 } ?? ""), url: row.url, state: row.state, attempts: row.attempts,
                lastStatus: row.lastStatus.map(String.init) ?? "", lastError: row.lastError ?? "", created: ConsoleText.time(row.createdAt),
                failed: row.state == "failed")
        }
        let page = Notifications(failedOnly: failedOnly,
            endpoints: .init(caption: "By endpoint", headers: ["endpoint", "delivered", "waiting", "failed"], rows: endpointRows), deliveries: deliveries)
        return pages.render(.ok, "consoleNotifications", ConsoleView.Page("Notifications", current: "/notifications", csrf: context.session?.csrf,
            done: await done(context), page: page))
    }

    @Sendable func resend(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let id = form["notification"] ?? ""
        do {
            _ = try await store.notifications.resendNotification(id)
        } catch let error as StoreError {
            return refusal(.conflict, "Notifications", current: "/notifications", context: context, "\(error)", back: .init(href: "/notifications", label: "Back"))
        }
        await said("\(id) queued to be sent again", context)
        return Response(status: .seeOther, headers: [.location: "/notifications"])
    }

    // MARK: Offer codes

    struct Codes {
        struct Batch { var batch, productId, kind, gives, until: String; var codes, redeemed, limit: Int; var open: Bool }
        struct Choice { var id, title: String }
        struct Made { var batch, productId, csv: String; var count: Int }
        var made: Made?
        var batches: [Batch]
        var products: [Choice]
    }

    @Sendable func codes(_ request: Request, context: ConsoleContext) async throws -> Response {
        try await codesPage(made: nil, context: context)
    }

    private func codesPage(made: Codes.Made?, context: ConsoleContext) async throws -> Response {
        let batches = try await store.codes.list().map { row in
            Codes.Batch(batch: row.batch, productId: row.productId, kind: row.kind == "custom" ? "custom" : "one-time",
                        gives: (row.benefit ?? .free).described(currency: ""),
                        until: row.expiresAt.map(ConsoleText.time) ?? "no end", codes: row.codes, redeemed: row.redeemed, limit: row.limit,
                        open: row.revokedAt == nil)
        }
        let products = try await catalog.current.products.values.filter { $0.kind != .consumable && $0.forSale != false }
            .sorted { $0.id < $1.id }.map { Codes.Choice(id: $0.id, title: $0.title) }
        return pages.render(.ok, "consoleCodes", ConsoleView.Page("Codes", current: "/codes", csrf: context.session?.csrf, done: await done(context),
                                                                  page: Codes(made: made, batches: batches, products: products)))
    }

    /// The form's codes, made and shown on the answer itself (never kept, never redirected to).
    @Sendable func makeCodes(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        func number(_ name: String) -> Int? { form[name].flatMap { $0.isEmpty ? nil : Int($0.trimmingCharacters(in: .whitespaces)) } }
        let code = form["code"].flatMap { $0.isEmpty ? nil : $0 }
        let expires = form["expires"].flatMap { $0.isEmpty ? nil : $0 }
        let back = ConsoleView.Back(href: "/codes", label: "Back to the codes")
        if code != nil, number("count") != nil {
            return refusal(.badRequest, "Codes", current: "/codes", context: context, "Give a number of one-time codes or one code with its limit, not both.", back: back)
        }
        var end: Date?
        if let expires {
            guard let day = CodeExpiry.endOfDay(expires) else {
                return refusal(.badRequest, "Codes", current: "/codes", context: context, "\(expires) is not a day like 2026-12-31", back: back)
            }
            end = day
        }
        do {
            let benefit: CodeBenefit = switch form["benefit"] ?? "free" {
            case "percentOff": .percentOff(number("value") ?? 0)
            case "amountOff": .amountOff(form["value"].flatMap { Price.cents($0.trimmingCharacters(in: .whitespaces)) } ?? 0)
            case "introductoryOffer": .introductoryOffer
            default: .free
            }
            let made = try await store.codes.create(AdminCodesRequest(productId: form["product"] ?? "", count: code == nil ? number("count") : nil,
                                                                      code: code, limit: number("limit"), expiresAt: end, benefit: benefit))
            let csv = (["code,product,expires"] + made.codes.map { "\($0),\(made.productId),\(expires ?? "")" }).joined(separator: "\n")
            return try await codesPage(made: Codes.Made(batch: made.batch, productId: made.productId, csv: csv, count: made.codes.count), context: context)
        } catch let error as StoreError {
            return refusal(.badRequest, "Codes", current: "/codes", context: context, error.message, back: back)
        }
    }

    @Sendable func revokeCodes(_ request: Request, context: ConsoleContext) async throws -> Response {
        let form = try await postedForm(request, context: context)
        let batch = form["batch"] ?? ""
        guard form["confirm"] == "yes" else {
            return refusal(.badRequest, "Codes", current: "/codes", context: context, "Tick \u{201C}I mean it\u{201D} to withdraw \(batch): its codes are refused for good.",
                           back: .init(href: "/codes", label: "Back"))
        }
        do {
            let withdrawn = try await store.codes.revoke(batch: batch)
            await said("\(batch): \(withdrawn) codes withdrawn", context)
        } catch let error as StoreError {
            return refusal(.conflict, "Codes", current: "/codes", context: context, error.message, back: .init(href: "/codes", label: "Back"))
        }
        return Response(status: .seeOther, headers: [.location: "/codes"])
    }


    // MARK: Health

    struct Payments {
        /// Nil when there is nothing to act on: the page says so instead of an empty table.
        var toActOn: ConsoleView.Table?
        var byChannel: ConsoleView.Table
        var tax: ConsoleView.Table
        var latest: ConsoleView.Table
    }

    /// What the payment channels sent (Stripe's events): first those to act on (paid but not
    /// granted, or paid for what the account had), then the latest of all; as `kiosk admin events`.
    @Sendable func payments(_ request: Request, context: ConsoleContext) async throws -> Response {
        let unmatched = try await store.reports.channelEvents(unmatchedOnly: true, limit: 200)
        let latest = try await store.reports.channelEvents(unmatchedOnly: false, limit: 100)
        let headers = ["received", "channel", "event", "type", "outcome", "account", "what came of it"]
        func table(_ caption: String, _ events: [AdminChannelEventRow]) -> ConsoleView.Table {
            .init(caption: caption, headers: headers, rows: events.map { event in
                [.init(ConsoleText.time(event.receivedAt)), .init(event.channel), .code(event.eventId), .init(event.type), .init(event.outcome),
                 .init(event.accountId ?? "", link: event.accountId.map { "/customers?q=\(Self.query($0))" }), .init(event.detail)]
            })
        }
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
        let channelRows = byChannel.values.sorted { ($0.channel ?? "", $0.currency) < ($1.channel ?? "", $1.currency) }.map { row -> [ConsoleView.Cell] in
            [.init(row.channel ?? ""), .init(row.currency), .init("\(row.sales)"), .init("\(row.refunds)"), .init(ConsoleText.money(row.netCents, row.currency))]
        }
        // This quarter's tax per country and rate (``Reports/tax(quarter:)``, `kiosk admin tax`).
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        let today = Date()
        let quarter = "\(calendar.component(.year, from: today))Q\((calendar.component(.month, from: today) - 1) / 3 + 1)"
        let taxRows = try await store.reports.tax(quarter: quarter).map { row -> [ConsoleView.Cell] in
            [.init(row.country.map { "\(StorefrontCountry.name($0)) (\($0))" } ?? "no storefront"), .init(row.rateBasisPoints.map { "\(AdminTaxRow.rateText($0)) %" } ?? "none"),
             .init("\(row.sales)"), .init("\(row.refunds)"), .init(ConsoleText.money(row.netCents, row.currency)), .init(ConsoleText.money(row.taxCents, row.currency)),
             .init(ConsoleText.money(row.grossCents, row.currency))]
        }
        let page = Payments(
            toActOn: unmatched.isEmpty ? nil : table("To act on", unmatched),
            byChannel: .init(caption: "Sales by channel, the last 30 days", headers: ["channel", "currency", "sales", "refunds", "net"], rows: channelRows),
            tax: .init(caption: "Tax in \(quarter) per country and rate (kiosk admin tax --quarter \(quarter) --csv)",
                       headers: ["country", "rate", "sales", "refunds", "taxable", "tax", "paid"], rows: taxRows),
            latest: table("Latest events", latest))
        return pages.render(.ok, "consolePayments", ConsoleView.Page("Payments", current: "/payments", csrf: context.session?.csrf, page: page))
    }

    struct Health {
        var figures: [ConsoleView.Figure]
        var keys: ConsoleView.Table
        var metrics: ConsoleView.Table
    }

    @Sendable func health(_ request: Request, context: ConsoleContext) async throws -> Response {
        let keyRows = try await keys.list().map { key -> [ConsoleView.Cell] in
            let age = Int(Date().timeIntervalSince(key.createdAt) / 86_400)
            return [.code(key.kid), .init(ConsoleText.time(key.createdAt)), .init("\(age) days"), .init(key.retiredAt.map { "retired " + ConsoleText.time($0) } ?? "in use")]
        }
        let published = try? await catalog.current
        let page = Health(
            figures: [
                .init(name: "Database", value: store.reports.engineName),
                .init(name: "This instance", value: "PID \(getpid())", note: "up since \(ConsoleText.time(startedAt))"),
                .init(name: "Catalog", value: published.map { "\($0.products.count) products" } ?? "loading", code: published?.etag),
            ],
            keys: .init(caption: "Receipt signing keys (kiosk keys)", headers: ["key", "created", "age", "state"], rows: keyRows),
            metrics: .init(caption: "Figures from /metrics", headers: ["figure", "for", "value"], rows: Self.metricRows(metrics.exposition())))
        return pages.render(.ok, "consoleHealth", ConsoleView.Page("Health", current: "/health", csrf: context.session?.csrf, page: page))
    }

    /// The Prometheus exposition as rows a person reads: the figure, what it is for (its labels),
    /// its value; histograms as their count and sum, not their buckets.
    static func metricRows(_ exposition: String) -> [[ConsoleView.Cell]] {
        exposition.split(separator: "\n").compactMap { line -> [ConsoleView.Cell]? in
            guard !line.hasPrefix("#"), !line.contains("_bucket{"), let space = line.lastIndex(of: " ") else { return nil }
            let series = line[..<space]
            let value = String(line[line.index(after: space)...])
            let name = series.split(separator: "{", maxSplits: 1).first.map(String.init) ?? String(series)
            let labels = series.contains("{") ? String(series.drop { $0 != "{" }.dropFirst().dropLast())
                .replacingOccurrences(of: "\",", with: ", ").replacingOccurrences(of: "=\"", with: " ").replacingOccurrences(of: "\"", with: "") : ""
            let shown = Double(value).map { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int64($0)) : String(format: "%.3f", $0) } ?? value
            return [.code(name), .init(labels), .init(shown)]
        }
    }

    // MARK: Plumbing

    /// The fields of a posted form, once its CSRF token is the session's; anything else is a 403.
    /// Every form's handler reads its form here, so none can forget the check.
    func postedForm(_ request: Request, context: ConsoleContext) async throws -> [String: String] {
        let form = try await HTMLForm.fields(request)
        guard let session = context.session, let token = form["csrf"], AdminMiddleware.matches(token, session.csrf) else {
            throw HTTPError(.forbidden, message: "This form's CSRF token is missing or not this session's: reload the page and send it again.")
        }
        return form
    }

    /// Keeps what a form did for the page its 303 leads to (``ConsoleSessions/keep(done:for:)``).
    private func said(_ done: String, _ context: ConsoleContext) async {
        if let id = context.sessionId { await sessions.keep(done: done, for: id) }
    }

    /// What this session's last form did, said once.
    private func done(_ context: ConsoleContext) async -> String? {
        guard let id = context.sessionId else { return nil }
        return await sessions.takeDone(id)
    }

    /// A form refused: the page it came from, saying why, and nothing done.
    private func refusal(_ status: HTTPResponse.Status, _ title: String, current: String, context: ConsoleContext, _ message: String, back: ConsoleView.Back? = nil) -> Response {
        pages.render(status, "consoleMessage", ConsoleView.Page(title, current: current, csrf: context.session?.csrf, error: message, back: back, page: ConsoleView.Nothing()))
    }

    static func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
