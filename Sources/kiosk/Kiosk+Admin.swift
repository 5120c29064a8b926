import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore
import KioskTransfer

extension Kiosk {
    /// The store's operator: lists and decisions over the admin API.
    struct Admin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a store: accounts, sales, pending Ask to Buy, downloads; approve, decline, revoke, refund.",
            discussion: """
                The admin token comes from --token, else $KIOSK_ADMIN_TOKEN, else <--data>/admin-token.

                kiosk admin backup FILE, kiosk admin check and kiosk admin restore FILE work on the \
                store's database and content themselves (run by kiosk-server; see kiosk admin backup --help).

                Example: kiosk admin sales --server http://127.0.0.1:8080 --data .kiosk-server
                """,
            subcommands: [Accounts.self, AccountDetail.self, TransactionList.self, Pending.self, Sales.self, Tax.self, DownloadStats.self, AppStoreNotifications.self, Approve.self, Decline.self, Revoke.self, Refund.self, Grant.self,
                          Sandbox.self, Renewals.self, Webhooks.self, Notifications.self, Products.self, Codes.self, Disable.self, Enable.self, ResetCode.self, Events.self, Lost.self]
        )

        struct Options: ParsableArguments {
            @Option(help: ArgumentHelp("The server's base URL (default: $KIOSK_SERVER, else http://127.0.0.1:8080).", valueName: "url"))
            var server: String?

            @Option(help: ArgumentHelp("The server's data folder, to read admin-token from (default: $KIOSK_DATA, else .kiosk-server).", valueName: "dir"))
            var data: String?

            @Option(help: ArgumentHelp("The admin token itself (default: $KIOSK_ADMIN_TOKEN).", valueName: "token"))
            var token: String?

            @Flag(help: "Print the answer as JSON.")
            var json = false

            func call(_ method: String, _ path: String, body: String? = nil) async throws -> Data {
                LogSetup.bootstrap()
                let environment = ProcessInfo.processInfo.environment
                let base = (server ?? environment["KIOSK_SERVER"] ?? "http://127.0.0.1:8080").trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                let token = try token ?? environment["KIOSK_ADMIN_TOKEN"] ?? readToken(environment)
                let url = base + path
                let response: HTTPResponse
                do {
                    response = try await HTTPClient().send(HTTPRequest(
                        method: method, url: url, headers: [("Authorization", "Bearer \(token)"), ("Accept", "application/json")],
                        body: body.map { Data($0.utf8) } ?? (method == "POST" ? Data("{}".utf8) : nil), maxResponseBytes: 64 << 20))
                } catch let error as TransferError {
                    throw ValidationError("cannot reach \(url) (\(error.message)); check --server")
                }
                guard (200..<300).contains(response.status) else {
                    let message = (try? JSONDecoder.kiosk.decode(APIError.self, from: response.body))?.message ?? "HTTP \(response.status)"
                    throw ValidationError("\(url) answered \(response.status): \(message)")
                }
                return response.body
            }

            private func readToken(_ environment: [String: String]) throws -> String {
                let folder = data ?? environment["KIOSK_DATA"] ?? ".kiosk-server"
                let file = URL(fileURLWithPath: folder).appendingPathComponent("admin-token")
                guard let text = try? String(contentsOf: file, encoding: .utf8) else {
                    throw ValidationError("\(file.path) cannot be read; pass --data (the server's data folder), --token or KIOSK_ADMIN_TOKEN")
                }
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }

            /// The answer to `GET path`, decoded as the type the server encoded it with.
            func get<Answer: Decodable>(_ type: Answer.Type, _ path: String) async throws -> Answer {
                try decode(type, from: try await call("GET", path), path: path)
            }

            func decode<Answer: Decodable>(_ type: Answer.Type, from data: Data, path: String) throws -> Answer {
                do {
                    return try JSONDecoder.kiosk.decode(type, from: data)
                } catch {
                    throw ValidationError("the answer to \(path) is not what this kiosk reads (\(error)); is --server a Kiosk store of the same version?")
                }
            }

            /// Prints `answer` as JSON (the server's type, encoded as the server does), or `text`.
            func show<Answer: Encodable>(_ answer: Answer, _ text: () -> String) throws {
                if json {
                    print(String(decoding: try JSONEncoder.kiosk.encode(answer), as: UTF8.self))
                } else {
                    print(text())
                }
            }

            /// Prints the rows as JSON, or one line per row through `line` ("none" for no rows).
            func show<Row: Encodable>(rows: [Row], _ line: (Row) -> String) throws {
                try show(rows) { rows.isEmpty ? "none" : rows.map(line).joined(separator: "\n") }
            }
        }

        /// `--since`, `--product`, `--state`: sent as the list's query, applied by the server.
        struct Filters: ParsableArguments {
            @Option(help: ArgumentHelp("Only since this date: YYYY-MM-DD (UTC), an ISO 8601 time, or a time ago (30m, 24h, 7d).", valueName: "date"))
            var since: String?

            @Option(help: ArgumentHelp("Only this product.", valueName: "id"))
            var product: String?

            @Option(help: ArgumentHelp("Only transactions in this state: purchased, deferred, declined, cancelled, revoked.", valueName: "state"))
            var state: String?

            func validate() throws {
                if let since {
                    do { _ = try ListFilter.date(since) } catch { throw ValidationError(error.description) }
                }
                if let state, TransactionStatus(rawValue: state) == nil {
                    throw ValidationError("--state \"\(state)\" is not a transaction state: purchased, deferred, declined, cancelled or revoked")
                }
            }

            /// The filter as the list's query string.
            func query() throws -> String {
                try ListFilter(since: since.map { try ListFilter.date($0) }, productId: product, state: state).query
            }
        }

        /// `--since` and `--product` alone, for the lists that have no state.
        struct DateAndProduct: ParsableArguments {
            @Option(help: ArgumentHelp("Only since this date: YYYY-MM-DD (UTC), an ISO 8601 time, or a time ago (30m, 24h, 7d).", valueName: "date"))
            var since: String?

            @Option(help: ArgumentHelp("Only this product.", valueName: "id"))
            var product: String?

            func validate() throws {
                if let since {
                    do { _ = try ListFilter.date(since) } catch { throw ValidationError(error.description) }
                }
            }

            func query() throws -> String {
                try ListFilter(since: since.map { try ListFilter.date($0) }, productId: product).query
            }
        }

        struct Accounts: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List accounts: created, credits, transactions, paid, last transaction.",
                discussion: "--since keeps accounts created since; --product and --state keep accounts holding such a transaction; --email finds the account that signs in with it.\n\nExample: kiosk admin accounts --since 7d --product com.kiosk.books.river-of-maps  |  kiosk admin accounts --email ann@example.com")
            @OptionGroup var options: Options
            @OptionGroup var filters: Filters
            @Option(help: "Only the account that signs in with this email (without regard to case).")
            var email: String?
            func run() async throws {
                try await reportingErrors {
                    var query = try filters.query()
                    if let email {
                        query += (query.isEmpty ? "?" : "&") + "email=" + (email.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? email)
                    }
                    try options.show(rows: try await options.get([AdminAccountRow].self, "/v1/admin/accounts" + query)) {
                        "\($0.accountId)  created \(ListFilter.shown($0.createdAt))  credits \($0.credits)  transactions \($0.transactions)  paid \(Admin.money($0.paidCents))"
                            + ($0.lastTransactionAt.map { "  last \(ListFilter.shown($0))" } ?? "")
                    }
                }
            }
        }

        struct TransactionList: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "transactions",
                abstract: "List the store's transactions, oldest first: date, state, product, method, price, account.",
                discussion: "Example: kiosk admin transactions --since 2026-11-01 --state revoked")
            @OptionGroup var options: Options
            @OptionGroup var filters: Filters
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminTransactionRow].self, "/v1/admin/transactions" + filters.query())) { Admin.line($0) }
                }
            }
        }

        struct AccountDetail: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "account", abstract: "One account: holdings, transactions and its ledger.", discussion: "Example: kiosk admin account acct_3f9a…")
            @OptionGroup var options: Options
            @Argument(help: "The account ID.") var account: String
            func run() async throws {
                try await reportingErrors {
                    let view = try await options.get(AdminAccountView.self, "/v1/admin/accounts/\(PathSegment.encode(account))")
                    try options.show(view) {
                        let owns = view.summary.owned.isEmpty ? "owns nothing" : "owns \(view.summary.owned.joined(separator: ", "))"
                        var lines = ["account \(account): \(view.summary.credits) credits, \(owns)"]
                        var state = [view.email.map { "signs in with \($0)" } ?? "anonymous (no sign-in)"]
                        if view.disabled == true { state.append("disabled") }
                        if view.deleted == true { state.append("deleted by its holder") }
                        lines.append("  " + state.joined(separator: ", "))
                        for device in view.devices ?? [] {
                            lines.append("  device \(device.name)  \(device.id)  signed in \(ListFilter.shown(device.createdAt))  last seen \(ListFilter.shown(device.lastSeenAt))")
                        }
                        for entry in view.audit ?? [] {
                            lines.append("  audit \(ListFilter.shown(entry.at))  \(entry.action) by \(entry.actor): \(entry.detail)")
                        }
                        for row in view.transactions {
                            lines.append("  \(row.transactionId)  \(ListFilter.shown(row.createdAt))  \(row.status.rawValue)  \(row.productId)  \(row.paymentMethod)  \(row.creditsSpent.map { "\($0) credits" } ?? Price.shown(cents: row.amountCents, row.currency))")
                        }
                        for row in view.charges {
                            lines.append("  ledger \(row.kind)  \(row.transactionId)  \(Price.shown(cents: row.amountCents, row.currency))  \(row.reason ?? "")")
                        }
                        // Device names, emails, reasons and audit details are the readers' and operators' text.
                        return lines.map(TerminalText.escaped).joined(separator: "\n")
                    }
                }
            }
        }

        struct Pending: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List Ask to Buy requests waiting for an answer: date, product, price, account.", discussion: "Example: kiosk admin pending --since 24h")
            @OptionGroup var options: Options
            @OptionGroup var filters: DateAndProduct
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminTransactionRow].self, "/v1/admin/pending" + filters.query())) { Admin.line($0) }
                }
            }
        }

        struct Sales: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Sales by day and product (and channel): sales, refunds, net.",
                discussion: "--since keeps charges and refunds made since; --state keeps those of transactions now in that state; --by-channel splits each row by where the money was taken (web, play, appstore, credits, sandbox).\n\nExample: kiosk admin sales --since 2026-11-01 --by-channel --json")
            @OptionGroup var options: Options
            @OptionGroup var filters: Filters
            @Flag(help: "One row per channel: web (the web shop), play, appstore, credits or sandbox.")
            var byChannel = false
            @Flag(help: "Print the rows as CSV (day, product, currency, sales, refunds, net), as the console's overview charts them.")
            var csv = false
            func validate() throws {
                if csv && options.json { throw ValidationError("--csv and --json cannot both be given") }
            }
            func run() async throws {
                try await reportingErrors {
                    var query = try filters.query()
                    if byChannel { query += (query.isEmpty ? "?" : "&") + "by=channel" }
                    let rows = try await options.get([AdminSalesRow].self, "/v1/admin/sales" + query)
                    if csv {
                        Swift.print("day,productId,currency,sales,refunds,net" + (byChannel ? ",channel" : ""))
                        for row in rows {
                            Swift.print(([row.day, Self.csvField(row.productId), row.currency, "\(row.sales)", "\(row.refunds)", Admin.money(row.netCents)]
                                + (byChannel ? [row.channel ?? ""] : [])).joined(separator: ","))
                        }
                        return
                    }
                    try options.show(rows: rows) {
                        "\($0.day)  \($0.productId)\($0.channel.map { "  \($0)" } ?? "")  sales \($0.sales)  refunds \($0.refunds)  net \(Price.shown(cents: $0.netCents, $0.currency))"
                    }
                }
            }

            /// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
            static func csvField(_ text: String) -> String {
                guard text.contains(where: { $0 == "," || $0 == "\"" || $0.isNewline }) else { return text }
                return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            }
        }

        struct Tax: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A quarter's sales per country, tax rate and currency: what was taxed and the tax (an EU One-Stop-Shop return's figures).",
                discussion: "Sums the ledger: charges less refunds and credits, each with its share of tax. Example: kiosk admin tax --quarter 2026Q4 --csv > oss-2026Q4.csv")
            @OptionGroup var options: Options
            @Option(help: ArgumentHelp("The quarter, such as 2026Q4.", valueName: "yyyyQn")) var quarter: String
            @Flag(help: "Print the rows as CSV: country, rate, currency, sales, refunds, net, tax, gross.") var csv = false
            func validate() throws {
                if csv && options.json { throw ValidationError("--csv and --json cannot both be given") }
                guard TaxQuarter.range(quarter) != nil else { throw ValidationError("--quarter \(quarter) is not a quarter like 2026Q4") }
            }
            func run() async throws {
                try await reportingErrors {
                    let rows = try await options.get([AdminTaxRow].self, "/v1/admin/tax?quarter=\(quarter.uppercased())")
                    if csv {
                        Swift.print("country,rate,currency,sales,refunds,net,tax,gross")
                        for row in rows {
                            Swift.print([row.country ?? "", AdminTaxRow.rateText(row.rateBasisPoints), row.currency, "\(row.sales)", "\(row.refunds)",
                                         Admin.money(row.netCents), Admin.money(row.taxCents), Admin.money(row.grossCents)].joined(separator: ","))
                        }
                        return
                    }
                    try options.show(rows: rows) {
                        let rate = $0.rateBasisPoints.map { "\(AdminTaxRow.rateText($0)) %" } ?? "no tax"
                        return "\($0.country ?? "(no storefront)")  \(rate)  sales \($0.sales)  refunds \($0.refunds)  net \(Price.shown(cents: $0.netCents, $0.currency))  tax \(Price.shown(cents: $0.taxCents, $0.currency))"
                    }
                }
            }
        }

        struct Lost: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "lost",
                abstract: "After a restore: receipts presented for purchases the backup did not hold, and what became of each.",
                discussion: """
                    reinstated: written again from the store's own receipt, with its charge. chargedTwice: the \
                    reader bought the same book again since: refund one. creditsNotRecovered: a credit pack \
                    (grant its credits by hand if due). accountUnknown: an account made after the backup. \
                    reinstatedWithoutPrice: written again, paid with credits, a code or a grant (credits spent since are not taken back).

                    Example: kiosk admin lost --data /var/lib/kiosk
                    """)
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminReinstatementRow].self, "/v1/admin/reinstatements")) {
                        "\($0.transactionId)  \($0.outcome)  \($0.productId)  account \($0.accountId)  bought \(ISO8601DateFormatter().string(from: $0.purchaseDate))  \(Double($0.amountCents) / 100) \($0.currency ?? "")"
                    }
                }
            }
        }

        struct DownloadStats: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "downloads", abstract: "Content requests by product and day.", discussion: "Example: kiosk admin downloads --since 7d --product com.kiosk.books.night-sky-atlas")
            @OptionGroup var options: Options
            @OptionGroup var filters: DateAndProduct
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminDownloadRow].self, "/v1/admin/downloads" + filters.query())) {
                        "\($0.day)  \($0.productId)  requests \($0.requests)  bytes \($0.bytes)"
                    }
                }
            }
        }

        struct AppStoreNotifications: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "appstore", abstract: "App Store Server Notifications received, newest first, with what each did.",
                discussion: "Example: kiosk admin appstore")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminAppStoreNotificationRow].self, "/v1/admin/appstore/notifications")) {
                        "\($0.receivedAt.formatted(.iso8601))  \($0.notificationType)\($0.subtype.map { "/" + $0 } ?? "")  \($0.transactionId ?? "-")  \($0.productId ?? "-")  \($0.outcome)"
                    }
                }
            }
        }

        struct Approve: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Approve an Ask to Buy: it is charged and its receipt signed.", discussion: "Example: kiosk admin approve txn_0a1b…")
            @OptionGroup var options: Options
            @Argument(help: "The transaction ID.") var transaction: String
            func run() async throws { try await reportingErrors { try await Admin.decide("approve", transaction, reason: nil, options) } }
        }

        struct Decline: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Decline an Ask to Buy; nothing is charged.", discussion: "Example: kiosk admin decline txn_0a1b…")
            @OptionGroup var options: Options
            @Argument(help: "The transaction ID.") var transaction: String
            func run() async throws { try await reportingErrors { try await Admin.decide("decline", transaction, reason: nil, options) } }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a purchase without paying it back; the reader's devices remove its content.", discussion: "Example: kiosk admin revoke txn_0a1b… --reason 'chargeback'")
            @OptionGroup var options: Options
            @Argument(help: "The transaction ID.") var transaction: String
            @Option(help: "Why; shown to the reader's devices.") var reason: String?
            func run() async throws { try await reportingErrors { try await Admin.decide("revoke", transaction, reason: reason, options) } }
        }

        struct Refund: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Refund a purchase: revoked, its charge paid back in the ledger and the credits it granted withdrawn (refused once they are spent).", discussion: "Example: kiosk admin refund txn_0a1b… --reason 'damaged file'")
            @OptionGroup var options: Options
            @Argument(help: "The transaction ID.") var transaction: String
            @Option(help: "Why; shown to the reader's devices.") var reason: String?
            func run() async throws { try await reportingErrors { try await Admin.decide("refund", transaction, reason: reason, options) } }
        }

        struct Grant: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Grant a product to an account by hand, charging nothing; kept in the account's audit list.",
                discussion: "For a payment a channel took that the store could not match (kiosk admin events --unmatched), or a goodwill gesture. A product off sale is granted all the same. Example: kiosk admin grant acct_3f9a… com.kiosk.books.river-of-maps --reason 'Stripe pi_123 unmatched'")
            @OptionGroup var options: Options
            @Argument(help: "The account ID (kiosk admin accounts --email finds it).") var account: String
            @Argument(help: "The product ID.") var product: String
            @Option(help: "Why, for the account's audit list (required).") var reason: String
            @Option(help: "How many, of a consumable (credits).") var quantity = 1
            @Option(help: "Makes a retried grant one grant; a new one each run when left out.") var idempotencyKey: String?

            func run() async throws {
                try await reportingErrors {
                    let request = AdminGrantRequest(productId: product, quantity: quantity, reason: reason, idempotencyKey: idempotencyKey ?? UUID().uuidString)
                    let path = try Admin.accountPath(account, "grant")
                    let body = String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
                    let answer = try options.decode(StoreTransaction.self, from: try await options.call("POST", path, body: body), path: path)
                    try options.show(answer) {
                        TerminalText.escaped("granted \(answer.productId)\(quantity > 1 ? " × \(quantity)" : "") to \(account): \(answer.transactionId) \(answer.status.rawValue), nothing charged; in its audit list"
                            + (answer.message.map { " (\($0))" } ?? ""))
                    }
                }
            }
        }

        struct Events: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The events payment channels sent (Stripe's), newest first, with what came of each.",
                discussion: "--unmatched keeps those to act on: paid but not granted (an unknown account or product), or paid for what the account had. Example: kiosk admin events --unmatched")
            @OptionGroup var options: Options
            @Flag(help: "Only the events the operator must look at.") var unmatched = false
            func run() async throws {
                try await reportingErrors {
                    let rows = try await options.get([AdminChannelEventRow].self, "/v1/admin/channel-events" + (unmatched ? "?unmatched=1" : ""))
                    try options.show(rows: rows) {
                        // What a channel sent is shown escaped: its text is the sender's, not the store's.
                        TerminalText.escaped("\(ListFilter.shown($0.receivedAt))  \($0.channel)  \($0.eventId)  \($0.type)  \($0.outcome)  \($0.accountId ?? "-")  \($0.transactionId ?? "-")  \($0.detail)")
                    }
                }
            }
        }

        struct Disable: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Disable an account: every device signed out, none signs in until enabled; kept in its audit list.",
                discussion: "Example: kiosk admin disable acct_3f9a… --reason \"chargeback under review\"")
            @OptionGroup var options: Options
            @Argument(help: "The account ID (kiosk admin accounts --email finds it).") var account: String
            @Option(help: "Why, for the audit list.") var reason: String?
            func run() async throws { try await reportingErrors { try await Admin.care("disable", account, reason: reason, options) } }
        }

        struct Enable: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Enable a disabled account: its holder signs in again.", discussion: "Example: kiosk admin enable acct_3f9a…")
            @OptionGroup var options: Options
            @Argument(help: "The account ID.") var account: String
            @Option(help: "Why, for the audit list.") var reason: String?
            func run() async throws { try await reportingErrors { try await Admin.care("enable", account, reason: reason, options) } }
        }

        struct ResetCode: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Give a locked-out reader a one-time code that sets a new password (kiosk account reset); it works for 24 hours.",
                discussion: "Send the code to the reader by a way you trust (not to the account's email alone if that is what was lost). Example: kiosk admin reset-code acct_3f9a…")
            @OptionGroup var options: Options
            @Argument(help: "The account ID.") var account: String
            func run() async throws {
                try await reportingErrors {
                    let path = try Admin.accountPath(account, "reset-code")
                    let issued = try options.decode(ResetCodeIssued.self, from: try await options.call("POST", path), path: path)
                    try options.show(issued) {
                        "reset code for \(issued.email) (\(issued.accountId)): \(issued.code), until \(ListFilter.shown(issued.expiresAt)); the reader runs kiosk account reset --email \(issued.email) --code \(issued.code)"
                    }
                }
            }
        }

        /// The admin route of one of an account's care actions; an email in place of the ID is
        /// refused, saying how to find the ID.
        static func accountPath(_ account: String, _ action: String) throws -> String {
            if account.contains("@") {
                throw ValidationError("give the account's ID (acct_…), not an email; kiosk admin accounts --email \(account) finds it")
            }
            return "/v1/admin/accounts/\(PathSegment.encode(account))/\(action)"
        }

        static func care(_ action: String, _ account: String, reason: String?, _ options: Options) async throws {
            let body = try reason.map { String(decoding: try JSONEncoder().encode(["reason": $0]), as: UTF8.self) }
            let path = try accountPath(account, action)
            let entry = try options.decode(AccountAuditEntry.self, from: try await options.call("POST", path, body: body), path: path)
            try options.show(entry) {
                action == "disable" ? "account \(account) disabled: every device signed out, none signs in until kiosk admin enable" : "account \(account) enabled: its holder may sign in again"
            }
        }

        static func decide(_ decision: String, _ transaction: String, reason: String?, _ options: Options) async throws {
            let body = try reason.map { String(decoding: try JSONEncoder().encode(["reason": $0]), as: UTF8.self) }
            let path = "/v1/admin/transactions/\(PathSegment.encode(transaction))/\(decision)"
            let data = try await options.call("POST", path, body: body)
            if decision == "refund" || decision == "revoke" {
                let answer = try options.decode(AdminRevocation.self, from: data, path: path)
                try options.show(answer) { revocationLine(decision, answer, reason: reason) }
                return
            }
            let answer = try options.decode(StoreTransaction.self, from: data, path: path)
            try options.show(answer) { "transaction \(answer.transactionId): \(answer.status.rawValue)\(answer.revocationReason.map { " (\($0))" } ?? "")" }
        }

        /// What a refund or a revocation did, in one line: "refunded txn_…: 8.99 USD paid back,
        /// 10 credits withdrawn, balance now 3 (reason)". The reason is this call's (a refund of what
        /// was revoked before keeps the revocation's reason on the transaction; its own is the ledger's).
        static func revocationLine(_ decision: String, _ answer: AdminRevocation, reason: String?) -> String {
            var effects = [answer.refundedCents > 0 ? "\(Price.shown(cents: answer.refundedCents, answer.currency)) paid back"
                : answer.creditsReturned > 0 ? "\(answer.creditsReturned) credits given back" : "nothing paid back"]
            if answer.creditsWithdrawn > 0 { effects.append("\(answer.creditsWithdrawn) credits withdrawn") }
            if !answer.alsoRevoked.isEmpty { effects.append("\(answer.alsoRevoked.count) free re-buy\(answer.alsoRevoked.count == 1 ? "" : "s") revoked with it") }
            effects.append("balance now \(answer.credits)")
            let verb = decision == "refund" ? "refunded" : "revoked"
            let shownReason = reason ?? answer.transaction.revocationReason
            return "\(verb) \(answer.transaction.transactionId): \(effects.joined(separator: ", "))\(shownReason.map { " (\(TerminalText.escaped($0)))" } ?? "")"
        }

        /// A transaction in a list: "txn_…  2026-11-24 13:05  purchased  com.kiosk.books.x  approve  4.99 USD  acct_…".
        static func line(_ row: AdminTransactionRow) -> String {
            let quantity = row.quantity > 1 ? " × \(row.quantity)" : ""
            let paid = row.creditsSpent.map { "\($0) credits" } ?? Price.shown(cents: row.amountCents, row.currency) + (row.priceOnApproval == true ? " on approval" : "")
            var line = "\(row.transactionId)  \(ListFilter.shown(row.createdAt))  \(row.status.rawValue)  \(row.productId)\(quantity)  \(row.paymentMethod)  \(paid)  \(row.accountId)"
            if let revoked = row.revokedAt { line += "  revoked \(ListFilter.shown(revoked))\(row.revocationReason.map { ": \($0)" } ?? "")" }
            return line
        }

        /// Cents as `4.99`, `-7.99`.
        static func money(_ value: Int) -> String {
            String(format: "%@%d.%02d", value < 0 ? "-" : "", abs(value) / 100, abs(value) % 100)
        }
    }
}
