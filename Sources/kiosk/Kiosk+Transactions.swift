import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Transactions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List this device's transactions, newest first; works offline.",
            discussion: """
                Every receipt is verified against the store's public keys; one that does not verify is \
                reported and never used.

                Each line: transaction, date, state, product, price (from the cached catalog).

                Example: kiosk transactions --since 7d --state finished --json
                """
        )

        @OptionGroup var options: ClientOptions

        @OptionGroup var filters: TransactionFilters

        @Flag(help: "Print the transactions as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let views = try filters.apply(try await client.transactions())
                let products = Dictionary(try client.cachedCatalog().products.map { ($0.id, $0) }) { first, _ in first }
                if json {
                    let rows = views.map { Row($0, price: shownPrice($0.record, products[$0.record.productId])) }
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                    return
                }
                if views.isEmpty { Swift.print(try filters.filter().isEmpty ? "no transactions yet" : "no transactions match") }
                for view in views {
                    let record = view.record
                    let date = ListFilter.shown(view.claims?.purchased ?? record.createdAt)
                    var line = "\(record.transactionId ?? "-")  \(date)  \(record.state.rawValue)  \(record.productId)"
                    if record.quantity > 1 { line += " × \(record.quantity)" }
                    if let price = shownPrice(record, products[record.productId]) { line += "  \(price)" }
                    if let problem = view.receiptProblem { line += "  RECEIPT REJECTED: \(problem)" }
                    if record.state == .revoked {
                        line += "  revoked \(record.revokedAt.map { ISO8601DateFormatter().string(from: $0) } ?? ""): \(record.revocationReason ?? "")"
                    } else if let error = record.lastError {
                        line += "  (\(error))"
                        if let next = record.nextAttemptAt, record.state != .failed { line += "  next attempt \(DownloadRunner.time(next))" }
                    }
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
            var attempts: Int
            var nextAttemptAt: Date?
            var revokedAt: Date?
            var revocationReason: String?
            var createdAt: Date
            /// When the store made the purchase (the receipt's date); nil before there is a verified receipt.
            var purchaseDate: Date?
            /// A subscription's end, from its receipt.
            var expiresAt: Date?
            /// What it cost as the cached catalog prices it (`4.99 USD`, `3 credits`).
            var price: String?

            init(_ view: TransactionView, price: String?) {
                purchaseDate = view.claims?.purchased
                expiresAt = view.claims?.expires
                self.price = price
                transactionId = view.record.transactionId
                originalTransactionId = view.record.originalTransactionId
                productId = view.record.productId
                kind = view.record.kind
                quantity = view.record.quantity
                state = view.record.state
                receiptVerified = view.record.receipt != nil && view.receiptProblem == nil
                receiptProblem = view.receiptProblem
                lastError = view.record.lastError
                attempts = view.record.attempts
                nextAttemptAt = view.record.nextAttemptAt
                revokedAt = view.record.revokedAt
                revocationReason = view.record.revocationReason
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
                let client = try await options.connect()
                let summary = try await client.accountSummary()
                Swift.print("\(summary.credits) credits")
            }
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring back every book, issue and active subscription of the account.",
            discussion: """
                A purchase whose receipt does not verify is left out and named on one line; the others are \
                restored, and the exit status is 1. Credits are consumed, so they are never restored; an expired subscription still brings \
                the issues published while it ran. The content is downloaded and installed, and a \
                missing or damaged library folder is downloaded again. Use `kiosk account link TOKEN` \
                first on a new device; no sync is needed before.

                Example: kiosk restore
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the restored transactions as JSON.")
        var json = false

        @Flag(help: "Only queue the content; download it later with kiosk resume.")
        var noDownload = false

        func run() async throws {
            try await reportingErrors {
                let client = try await options.connect()
                let runner = DownloadRunner(client: client)
                let downloadNow = !noDownload
                let result = try await runner.showingProgress { try await client.restore(downloadNow: downloadNow) }
                if json {
                    let rows = result.restored.map { TransactionView(record: $0, receiptProblem: nil) }.map { Transactions.Row($0, price: nil) }
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                } else {
                    Swift.print(result.restored.isEmpty ? "nothing new to restore" : "restored \(result.restored.count) purchases:")
                    for record in result.restored {
                        Swift.print("  \(record.productId)  (transaction \(record.transactionId ?? "-"), \(record.state.rawValue))")
                    }
                    if let downloads = result.downloads { runner.report(downloads) }
                }
                // One line each for what could not be restored; everything else was.
                for problem in result.refused {
                    BufferedLog.standardError.write("kiosk: \(problem)\n")
                }
                try result.outcome.exit()
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
                    let client = try await options.connect()
                    let summary = try await client.accountSummary()
                    Swift.print("account: \(summary.accountId)")
                    Swift.print("token: \(try client.accountToken() ?? "-")  (link another device with `kiosk account link TOKEN`)")
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
                    let summary = try await client.linkAccount(token: token)
                    Swift.print("linked to account \(summary.accountId); run `kiosk restore` to bring back its purchases")
                }
            }
        }
    }

    struct Config: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change device settings.",
            discussion: """
                payments on|off: with payments off (a device restriction, like parental controls) `kiosk buy` \
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
                try options.client().setPaymentsEnabled(value == "on")
                Swift.print("payments \(value)")
            }
        }
    }
}
