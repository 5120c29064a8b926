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

        @Flag(help: "Print the balance as JSON: {accountId, credits}.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                // A device with no account yet has no credits: looking creates nothing on the store.
                let summary = try await client.existingAccountSummary()
                if json {
                    try JSONOutput.print(JSONOutput.Balance(accountId: summary?.accountId, credits: summary?.credits ?? 0))
                } else {
                    Swift.print("\(summary?.credits ?? 0) credits")
                }
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
                // Replay first, as every command does; what it took in from the account is part of
                // what this restore brought back, so it is listed here rather than on its own line.
                let client = try options.client()
                _ = try client.server()
                var replayed = await client.replay()
                let arrived = replayed.arrived
                // Restore reads every transaction again and says itself what it cannot take in.
                replayed.arrived = []
                replayed.notTakenIn = []
                DownloadRunner.tell(replayed, email: try client.accountEmail())
                let runner = DownloadRunner(client: client)
                let downloadNow = !noDownload
                var result = try await runner.showingProgress { try await client.restore(downloadNow: downloadNow) }
                let current = try await client.transactions().map(\.record)
                result.restored = arrived.map { record in current.first { $0.id == record.id } ?? record } + result.restored
                result.withdrawn += replayed.withdrawn
                if json {
                    let rows = result.restored.map { TransactionView(record: $0, receiptProblem: nil) }.map { Transactions.Row($0, price: nil) }
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                } else {
                    if !result.restored.isEmpty {
                        Swift.print("restored \(result.restored.count) purchases:")
                    } else if result.downloads?.installed.isEmpty == false {
                        Swift.print("no purchase was new to this device; the content it lacked was downloaded:")
                    } else {
                        Swift.print("nothing new to restore")
                    }
                    for record in result.restored {
                        if result.withdrawn.contains(record.productId) {
                            Swift.print("  \(record.productId)  (transaction \(record.transactionId ?? "-")): withdrawn from the store's catalog; its receipt is kept, but there is no content to download")
                        } else {
                            Swift.print("  \(record.productId)  (transaction \(record.transactionId ?? "-"), \(record.state.rawValue))")
                        }
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

    struct Config: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "See and change this device's settings: server, payments, and when the agent downloads by itself.",
            discussion: """
                Settings live in the home's database (kiosk.sqlite), which every command names. \
                server: the store's URL, remembered from the last --server that answered as a Kiosk \
                store ($KIOSK_SERVER and --server take precedence). payments: on or off; with payments \
                off (a device restriction, like parental controls) `kiosk buy` is refused; products and \
                prices still list. download-network (any or unmetered), battery-floor (a percent) and \
                charging-only (on or off) say when kiosk agent downloads on its own, and keep-free (a size \
                like 2G; default 5 % of the disk, at most 1 GiB) what its downloads leave free, old issues \
                going first to make room; a download you start yourself ignores them.

                Example: kiosk config set server https://store.example.com  |  kiosk config payments off  |  kiosk config set download-network unmetered
                """,
            subcommands: [List.self, Get.self, Assign.self, Unset.self],
            defaultSubcommand: List.self
        )

        /// Where a setting's value is read from, said after it.
        static func source(_ client: KioskClient) -> String {
            "in \(client.settingsFile)"
        }

        /// `kiosk config` alone lists every setting; `kiosk config payments on|off` is kept as it was.
        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List the settings (also: kiosk config payments on|off).",
                discussion: "Example: kiosk config"
            )

            @OptionGroup var options: ClientOptions

            @Argument(help: ArgumentHelp("Only with `payments`: on or off, as kiosk config set payments does.", valueName: "setting value"))
            var words: [String] = []

            func validate() throws {
                guard !words.isEmpty else { return }
                guard words.count == 2, words[0] == "payments" else {
                    let names = KioskClient.SettingName.allCases.map(\.rawValue).joined(separator: ", ")
                    throw ValidationError("unknown config command \"\(words.joined(separator: " "))\"; use kiosk config get|set|unset NAME (settings: \(names))")
                }
                guard words[1] == "on" || words[1] == "off" else { throw ValidationError("payments must be on or off, not \"\(words[1])\"") }
            }

            func run() async throws {
                try await reportingErrors {
                    let client = try options.client()
                    if words.count == 2 {
                        try client.setSetting(.payments, to: words[1])
                        Swift.print("payments \(words[1])")
                        return
                    }
                    for name in KioskClient.SettingName.allCases {
                        Swift.print(try Get.line(name, client: client, options: options))
                    }
                    Swift.print("(settings \(source(client)))")
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Print one setting and where it comes from.", discussion: "Example: kiosk config get server")

            @OptionGroup var options: ClientOptions

            @Argument(help: "server, payments, download-network, battery-floor, charging-only or keep-free.")
            var name: KioskClient.SettingName

            func run() async throws {
                try await reportingErrors {
                    Swift.print(try Self.line(name, client: try options.client(), options: options))
                }
            }

            /// `name = value  (in FILE)`, or what applies when it is unset.
            static func line(_ name: KioskClient.SettingName, client: KioskClient, options: ClientOptions) throws -> String {
                let stored = try client.setting(name)
                switch name {
                case .server:
                    let environment = ProcessInfo.processInfo.environment["KIOSK_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
                    var line = "server = \(stored ?? "(unset)")  (\(source(client)))"
                    if let environment { line += "; KIOSK_SERVER=\(environment) is used instead" }
                    return line
                case .payments:
                    return "payments = \(stored ?? "on")  (\(stored == nil ? "the default; " : "")\(source(client)))"
                case .downloadNetwork, .batteryFloor, .chargingOnly, .keepFree:
                    let fallback = switch name {
                    case .downloadNetwork: "any"
                    case .batteryFloor: "none"
                    case .keepFree: ByteCount.text((try? client.storageFloor()) ?? 0) + ", 5 % of the disk, at most 1 GiB"
                    default: "off"
                    }
                    return "\(name.rawValue) = \(stored ?? fallback)  (\(stored == nil ? "the default; " : "")\(source(client)))"
                }
            }
        }

        struct Assign: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "set", abstract: "Change a setting.", discussion: "Example: kiosk config set server http://127.0.0.1:8080")

            @OptionGroup var options: ClientOptions

            @Argument(help: "server, payments, download-network, battery-floor, charging-only or keep-free.")
            var name: KioskClient.SettingName

            @Argument(help: "The value: an http(s) URL for server, on or off for payments.")
            var value: String

            func validate() throws {
                do {
                    switch name {
                    case .server: _ = try KioskClient.checkServerURL(value)
                    case .payments: guard value == "on" || value == "off" else { throw ValidationError("payments must be on or off, not \"\(value)\"") }
                    case .downloadNetwork, .batteryFloor, .chargingOnly, .keepFree: try KioskClient.checkPolicySetting(name, value)
                    }
                } catch let error as ValidationError {
                    throw error
                } catch {
                    throw ValidationError("\(error)")
                }
            }

            func run() async throws {
                try await reportingErrors {
                    let client = try options.client()
                    let stored = try client.setSetting(name, to: value)
                    Swift.print("\(name.rawValue) = \(stored)  (saved \(source(client)))")
                }
            }
        }

        struct Unset: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a setting (payments go back on; a server must be given again).", discussion: "Example: kiosk config unset server")

            @OptionGroup var options: ClientOptions

            @Argument(help: "server, payments, download-network, battery-floor, charging-only or keep-free.")
            var name: KioskClient.SettingName

            func run() async throws {
                try await reportingErrors {
                    let client = try options.client()
                    try client.unsetSetting(name)
                    Swift.print("\(name.rawValue) unset  (\(source(client)))")
                }
            }
        }
    }
}

extension KioskClient.SettingName: ExpressibleByArgument {}
