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
            subcommands: [Accounts.self, AccountDetail.self, Pending.self, Sales.self, DownloadStats.self, Approve.self, Decline.self, Revoke.self, Refund.self]
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

            /// Prints JSON as it came, or one line per row through `line`.
            func show(_ data: Data, _ line: ([String: Any]) -> String) throws {
                if json {
                    print(String(decoding: data, as: UTF8.self))
                    return
                }
                let rows = (try JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
                if rows.isEmpty { print("none") }
                for row in rows { print(line(row)) }
            }
        }

        struct Accounts: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List accounts: credits, transactions, paid.", discussion: "Example: kiosk admin accounts --json")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(try await options.call("GET", "/v1/admin/accounts")) {
                        "\($0["accountId"] ?? "")  credits \($0["credits"] ?? 0)  transactions \($0["transactions"] ?? 0)  paid \(Admin.money($0["paidCents"]))"
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
                    let data = try await options.call("GET", "/v1/admin/accounts/\(account)")
                    if options.json { print(String(decoding: data, as: UTF8.self)); return }
                    let object = (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
                    let summary = object["summary"] as? [String: Any] ?? [:]
                    print("account \(account): \(summary["credits"] ?? 0) credits, owns \((summary["owned"] as? [String])?.joined(separator: ", ") ?? "nothing")")
                    for row in object["transactions"] as? [[String: Any]] ?? [] {
                        print("  \(row["transactionId"] ?? "")  \(row["status"] ?? "")  \(row["productId"] ?? "")  \(row["paymentMethod"] ?? "")  \(Admin.money(row["amountCents"]))")
                    }
                    for row in object["charges"] as? [[String: Any]] ?? [] {
                        print("  ledger \(row["kind"] ?? "")  \(row["transactionId"] ?? "")  \(Admin.money(row["amountCents"]))  \(row["reason"] ?? "")")
                    }
                }
            }
        }

        struct Pending: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List Ask to Buy requests waiting for an answer.", discussion: "Example: kiosk admin pending")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(try await options.call("GET", "/v1/admin/pending")) {
                        "\($0["transactionId"] ?? "")  \($0["accountId"] ?? "")  \($0["productId"] ?? "")"
                    }
                }
            }
        }

        struct Sales: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Sales by day and product: sales, refunds, net.", discussion: "Example: kiosk admin sales --json")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(try await options.call("GET", "/v1/admin/sales")) {
                        "\($0["day"] ?? "")  \($0["productId"] ?? "")  sales \($0["sales"] ?? 0)  refunds \($0["refunds"] ?? 0)  net \(Admin.money($0["netCents"])) \($0["currency"] ?? "")"
                    }
                }
            }
        }

        struct DownloadStats: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "downloads", abstract: "Content requests by product and day.", discussion: "Example: kiosk admin downloads")
            @OptionGroup var options: Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(try await options.call("GET", "/v1/admin/downloads")) {
                        "\($0["day"] ?? "")  \($0["productId"] ?? "")  requests \($0["requests"] ?? 0)  bytes \($0["bytes"] ?? 0)"
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

        static func decide(_ decision: String, _ transaction: String, reason: String?, _ options: Options) async throws {
            let body = try reason.map { String(decoding: try JSONEncoder().encode(["reason": $0]), as: UTF8.self) }
            let data = try await options.call("POST", "/v1/admin/transactions/\(transaction)/\(decision)", body: body)
            if options.json { print(String(decoding: data, as: UTF8.self)); return }
            if decision == "refund" || decision == "revoke" {
                print(revocationLine(decision, try JSONDecoder.kiosk.decode(AdminRevocation.self, from: data)))
                return
            }
            let answer = try JSONDecoder.kiosk.decode(StoreTransaction.self, from: data)
            print("transaction \(answer.transactionId): \(answer.status.rawValue)\(answer.revocationReason.map { " (\($0))" } ?? "")")
        }

        /// What a refund or a revocation did, in one line: "refunded txn_…: 8.99 USD paid back,
        /// 10 credits withdrawn, balance now 3 (reason)".
        static func revocationLine(_ decision: String, _ answer: AdminRevocation) -> String {
            var effects = [answer.refundedCents > 0 ? "\(money(answer.refundedCents)) \(answer.currency) paid back" : "nothing paid back"]
            if answer.creditsWithdrawn > 0 { effects.append("\(answer.creditsWithdrawn) credits withdrawn") }
            if !answer.alsoRevoked.isEmpty { effects.append("\(answer.alsoRevoked.count) free re-buy\(answer.alsoRevoked.count == 1 ? "" : "s") revoked with it") }
            effects.append("balance now \(answer.credits)")
            let verb = decision == "refund" ? "refunded" : "revoked"
            return "\(verb) \(answer.transaction.transactionId): \(effects.joined(separator: ", "))\(answer.transaction.revocationReason.map { " (\($0))" } ?? "")"
        }

        static func money(_ cents: Any?) -> String {
            let value = (cents as? Int) ?? 0
            return String(format: "%@%d.%02d", value < 0 ? "-" : "", abs(value) / 100, abs(value) % 100)
        }
    }
}
