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

                Example: kiosk admin sales --server http://127.0.0.1:8080 --data .kiosk-server
                """,
            subcommands: [Accounts.self, AccountDetail.self, Pending.self, Sales.self, DownloadStats.self, Approve.self, Decline.self, Revoke.self, Refund.self,
                          Sandbox.self, Renewals.self, Webhooks.self, Notifications.self]
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

        struct Accounts: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List accounts: credits, transactions, paid.", discussion: "Example: kiosk admin accounts --json")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminAccountRow].self, "/v1/admin/accounts")) {
                        "\($0.accountId)  credits \($0.credits)  transactions \($0.transactions)  paid \(Admin.money($0.paidCents))"
                    }
                }
            }
        }

        struct AccountDetail: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "account", abstract: "One account: holdings, transactions and its ledger.", discussion: "Example: kiosk admin account acct_3f9a…")
            @OptionGroup var options: Options
            @Argument(help: "The account ID.") var account: String
            func run() async throws {
                try await reportingErrors {
                    let view = try await options.get(AdminAccountView.self, "/v1/admin/accounts/\(Admin.pathComponent(account))")
                    try options.show(view) {
                        var lines = ["account \(account): \(view.summary.credits) credits, owns \(view.summary.owned.joined(separator: ", "))"]
                        for row in view.transactions {
                            lines.append("  \(row.transactionId)  \(row.status.rawValue)  \(row.productId)  \(row.paymentMethod)  \(Admin.money(row.amountCents))")
                        }
                        for row in view.charges {
                            lines.append("  ledger \(row.kind)  \(row.transactionId)  \(Admin.money(row.amountCents))  \(row.reason ?? "")")
                        }
                        return lines.joined(separator: "\n")
                    }
                }
            }
        }

        struct Pending: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List Ask to Buy requests waiting for an answer.", discussion: "Example: kiosk admin pending")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminTransactionRow].self, "/v1/admin/pending")) {
                        "\($0.transactionId)  \($0.accountId)  \($0.productId)"
                    }
                }
            }
        }

        struct Sales: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Sales by day and product: sales, refunds, net.", discussion: "Example: kiosk admin sales --json")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminSalesRow].self, "/v1/admin/sales")) {
                        "\($0.day)  \($0.productId)  sales \($0.sales)  refunds \($0.refunds)  net \(Admin.money($0.netCents)) \($0.currency)"
                    }
                }
            }
        }

        struct DownloadStats: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "downloads", abstract: "Content requests by product and day.", discussion: "Example: kiosk admin downloads")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminDownloadRow].self, "/v1/admin/downloads")) {
                        "\($0.day)  \($0.productId)  requests \($0.requests)  bytes \($0.bytes)"
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

        /// An ID as one path segment: `txn_../../x` must name no other transaction (libcurl
        /// resolves dot segments), so everything but letters, digits, `-` and `_` is percent-encoded.
        static func pathComponent(_ id: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-_")
            return id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id
        }

        static func decide(_ decision: String, _ transaction: String, reason: String?, _ options: Options) async throws {
            let body = try reason.map { String(decoding: try JSONEncoder().encode(["reason": $0]), as: UTF8.self) }
            let path = "/v1/admin/transactions/\(pathComponent(transaction))/\(decision)"
            let data = try await options.call("POST", path, body: body)
            if decision == "refund" || decision == "revoke" {
                let answer = try options.decode(AdminRevocation.self, from: data, path: path)
                try options.show(answer) { revocationLine(decision, answer) }
                return
            }
            let answer = try options.decode(StoreTransaction.self, from: data, path: path)
            try options.show(answer) { "transaction \(answer.transactionId): \(answer.status.rawValue)\(answer.revocationReason.map { " (\($0))" } ?? "")" }
        }

        /// What a refund or a revocation did, in one line: "refunded txn_…: 8.99 USD paid back,
        /// 10 credits withdrawn, balance now 3 (reason)".
        static func revocationLine(_ decision: String, _ answer: AdminRevocation) -> String {
            var effects = [answer.refundedCents > 0 ? "\(money(answer.refundedCents)) \(answer.currency) paid back"
                : answer.creditsReturned > 0 ? "\(answer.creditsReturned) credits given back" : "nothing paid back"]
            if answer.creditsWithdrawn > 0 { effects.append("\(answer.creditsWithdrawn) credits withdrawn") }
            if !answer.alsoRevoked.isEmpty { effects.append("\(answer.alsoRevoked.count) free re-buy\(answer.alsoRevoked.count == 1 ? "" : "s") revoked with it") }
            effects.append("balance now \(answer.credits)")
            let verb = decision == "refund" ? "refunded" : "revoked"
            return "\(verb) \(answer.transaction.transactionId): \(effects.joined(separator: ", "))\(answer.transaction.revocationReason.map { " (\($0))" } ?? "")"
        }

        /// Cents as `4.99`, `-7.99`.
        static func money(_ value: Int) -> String {
            String(format: "%@%d.%02d", value < 0 ? "-" : "", abs(value) / 100, abs(value) % 100)
        }
    }
}
