import ArgumentParser
import Foundation
import KioskClient
import KioskCore

extension Kiosk {
    struct Transactions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List this device's transactions, newest first; works offline.",
            discussion: """
                Every receipt is verified against the store's public keys; one that does not verify is
                reported and never used.

                Example: kiosk transactions --json
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the transactions as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let views = try await options.client().transactions()
                if json {
                    let rows = views.map(Row.init)
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                    return
                }
                if views.isEmpty { Swift.print("no transactions yet") }
                for view in views {
                    let record = view.record
                    var line = "\(record.transactionId ?? "-")  \(record.state.rawValue)  \(record.productId)"
                    if record.quantity > 1 { line += " × \(record.quantity)" }
                    if let problem = view.receiptProblem { line += "  RECEIPT REJECTED: \(problem)" }
                    if let error = record.lastError, record.state == .failed || record.state == .deferred { line += "  (\(error))" }
                    Swift.print(line)
                }
            }
        }

        struct Row: Encodable {
            var transactionId: String?
            var originalTransactionId: String?
            var productId: String
            var kind: ProductKind
            var quantity: Int
            var state: PaymentState
            var receiptVerified: Bool
            var receiptProblem: String?
            var lastError: String?
            var createdAt: Date

            init(_ view: TransactionView) {
                transactionId = view.record.transactionId
                originalTransactionId = view.record.originalTransactionId
                productId = view.record.productId
                kind = view.record.kind
                quantity = view.record.quantity
                state = view.record.state
                receiptVerified = view.record.receipt != nil && view.receiptProblem == nil
                receiptProblem = view.receiptProblem
                lastError = view.record.lastError
                createdAt = view.record.createdAt
            }
        }
    }

    struct Balance: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the account's credit balance, as the server knows it.",
            discussion: "Example: kiosk balance"
        )

        @OptionGroup var options: ClientOptions

        func run() async throws {
            try await reportingErrors {
                let (client, server) = try await options.connect()
                let summary = try await client.accountSummary(server: server)
                Swift.print("\(summary.credits) credits")
            }
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring back every book, issue and active subscription of the account.",
            discussion: """
                Credits are consumed, so they are never restored. Use `kiosk account link TOKEN` first
                on a new device.

                Example: kiosk restore
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the restored transactions as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let (client, server) = try await options.connect()
                let restored = try await client.restore(server: server)
                if json {
                    let rows = restored.map { TransactionView(record: $0, receiptProblem: nil) }.map(Transactions.Row.init)
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                    return
                }
                Swift.print(restored.isEmpty ? "nothing to restore" : "restored \(restored.count) purchases:")
                for record in restored {
                    Swift.print("  \(record.productId)  (transaction \(record.transactionId ?? "-"), \(record.state.rawValue))")
                }
            }
        }
    }

    struct Account: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show this device's account, or link it to an existing one.",
            discussion: "Example: kiosk account link 3f9a…  (then kiosk restore)",
            subcommands: [Show.self, Link.self],
            defaultSubcommand: Show.self
        )

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Show the account, its balance and what it owns.",
                discussion: "Example: kiosk account show"
            )

            @OptionGroup var options: ClientOptions

            func run() async throws {
                try await reportingErrors {
                    let (client, server) = try await options.connect()
                    let summary = try await client.accountSummary(server: server)
                    Swift.print("account: \(summary.accountId)")
                    Swift.print("token: \(try await client.accountToken() ?? "-")  (link another device with `kiosk account link TOKEN`)")
                    Swift.print("credits: \(summary.credits)")
                    Swift.print("owned: \(summary.owned.isEmpty ? "nothing yet" : summary.owned.joined(separator: ", "))")
                    for subscription in summary.subscriptions {
                        let state = subscription.active ? "active until" : "expired"
                        Swift.print("subscription: \(subscription.productId) \(state) \(ISO8601DateFormatter().string(from: subscription.expiresDate))")
                    }
                }
            }
        }

        struct Link: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Use an existing account, from another device, on this one.",
                discussion: "Example: kiosk account link 3f9a…  (the token `kiosk account show` prints on the other device)"
            )

            @OptionGroup var options: ClientOptions

            @Argument(help: "The account token.")
            var token: String

            func run() async throws {
                try await reportingErrors {
                    let client = try options.client()
                    let server = try await options.serverURL(for: client)
                    let summary = try await client.linkAccount(token: token, server: server)
                    Swift.print("linked to account \(summary.accountId); run `kiosk restore` to bring back its purchases")
                }
            }
        }
    }

    struct Config: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change device settings.",
            discussion: """
                payments on|off: with payments off (a device restriction, like parental controls) `kiosk buy`
                is refused; products and prices still list.

                Example: kiosk config payments off
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The setting: payments.")
        var setting: String

        @Argument(help: "on or off.")
        var value: String

        func validate() throws {
            guard setting == "payments" else { throw ValidationError("unknown setting \"\(setting)\"; the settings are: payments") }
            guard value == "on" || value == "off" else { throw ValidationError("payments must be on or off, not \"\(value)\"") }
        }

        func run() async throws {
            try await reportingErrors {
                try await options.client().setPaymentsEnabled(value == "on")
                Swift.print("payments \(value)")
            }
        }
    }
}
