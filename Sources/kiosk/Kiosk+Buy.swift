import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Buy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Buy a book, an issue, a subscription or credits.",
            discussion: """
                The purchase is saved before it is sent and its signed receipt is saved before anything \
                else happens, so a crash or a lost connection never loses a purchase or charges twice: \
                the next command completes it. Offline, the purchase waits and exit status is 3.

                Sandbox payment methods: approve (default), decline, cancel, defer (Ask to Buy).

                Example: kiosk buy com.kiosk.credits.pack-5 --quantity 2
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID, as `kiosk products` lists it.")
        var product: String

        @Option(help: "How many to buy (credit packs only).")
        var quantity = 1

        @Option(help: "The sandbox payment method: approve, decline, cancel or defer.")
        var payment: PaymentMethod = .approve

        @Flag(help: "Finish right after saving the receipt; download the content later.")
        var noDownload = false

        @Flag(help: "Print the outcome as JSON (docs/client.md).")
        var json = false

        func validate() throws {
            guard (1...100).contains(quantity) else { throw ValidationError("--quantity must be between 1 and 100") }
        }

        func run() async throws {
            try await reportingErrors {
                let client = try await options.connect()
                var configured = DownloadRunner(client: client)
                configured.announcesPurchases = !json
                let runner = configured
                let (product, quantity, payment, downloadNow) = (self.product, self.quantity, self.payment, !noDownload)
                let result = try await runner.showingProgress {
                    try await client.buy(product, quantity: quantity, method: payment, downloadNow: downloadNow)
                }
                try PurchaseReport(result, json: json).print(runner)
            }
        }
    }

    struct Redeem: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Spend credits on a book or an issue that has a credit price.",
            discussion: "Example: kiosk redeem com.kiosk.magazines.harbor-monthly.issue-02"
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID.")
        var product: String

        @Flag(help: "Finish right after saving the receipt; download the content later.")
        var noDownload = false

        @Flag(help: "Print the outcome as JSON (docs/client.md).")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try await options.connect()
                var configured = DownloadRunner(client: client)
                configured.announcesPurchases = !json
                let runner = configured
                let (product, downloadNow) = (self.product, !noDownload)
                let result = try await runner.showingProgress { try await client.redeem(product, downloadNow: downloadNow) }
                try PurchaseReport(result, json: json).print(runner)
            }
        }
    }
}

extension PaymentMethod: ExpressibleByArgument {}

/// How a purchase's outcome reads on the terminal (or as JSON), and the exit status it gives.
struct PurchaseReport {
    let result: PurchaseResult
    let json: Bool

    init(_ result: PurchaseResult, json: Bool = false) {
        self.result = result
        self.json = json
    }

    /// The line that says a purchase is paid for and its receipt is on disk.
    static func printPurchased(_ record: PaymentRecord) {
        let quantity = record.quantity > 1 ? " × \(record.quantity)" : ""
        Swift.print("transaction \(record.transactionId ?? "(not yet assigned)"): purchased \(record.productId)\(quantity); receipt saved")
    }

    /// Prints the outcome and how its download went, and exits with the status the engine gave it.
    func print(_ runner: DownloadRunner) throws {
        if json {
            try printJSON(runner)
            try result.outcome.exit()
            return
        }
        let record = result.record
        let id = record.transactionId ?? "(not yet assigned)"
        let quantity = record.quantity > 1 ? " × \(record.quantity)" : ""
        if result.savedOffline {
            Swift.print("purchase of \(record.productId)\(quantity) saved; the server cannot be reached, so it will be sent by the next kiosk command")
        }
        switch record.state {
        case _ where result.savedOffline:
            break
        case .purchased, .delivering, .finished, .restored:
            if result.alreadyOwned {
                Swift.print("\(record.productId) is already owned (transaction \(id)); nothing was charged")
            } else if !runner.announced.contains(record.id) {
                Self.printPurchased(record)
            }
            if record.kind == .consumable, let credits = result.credits {
                Swift.print("balance: \(credits) credits")
            }
            if let downloads = result.downloads {
                runner.report(downloads)
            } else if result.contentQueued {
                Swift.print("content: queued; download it with kiosk resume")
            }
        case .deferred where result.alreadyPending:
            Swift.print("transaction \(id): \(record.productId) is already waiting for approval (Ask to Buy); nothing new was sent")
        case .deferred:
            Swift.print("transaction \(id): \(record.productId) is waiting for approval (Ask to Buy); nothing was charged yet")
        case .cancelled:
            Swift.print("transaction \(id): cancelled; nothing was charged")
        case .failed:
            standardError("\(record.productId): \(record.lastError ?? "the purchase failed")")
        case .purchasing, .revoked:
            Swift.print("transaction \(id): \(record.state.rawValue)")
        }
        try result.outcome.exit()
    }

    private func printJSON(_ runner: DownloadRunner) throws {
        let records = (try? runner.client.downloads()) ?? []
        try JSONOutput.print(JSONOutput.Purchase(
            transaction: Kiosk.Transactions.Row(
                TransactionView(record: result.record, receiptProblem: nil),
                price: shownPrice(result.record, try? runner.client.cachedCatalog().products.first { $0.id == result.record.productId })),
            credits: result.credits, owned: result.alreadyOwned, alreadyPending: result.alreadyPending,
            savedOffline: result.savedOffline, contentQueued: result.contentQueued,
            downloads: result.downloads.map { JSONOutput.Downloads($0, records: records) },
            outcome: result.outcome.name))
        if result.record.state == .failed {
            standardError("\(result.record.productId): \(result.record.lastError ?? "the purchase failed")")
        }
    }
}

extension WorkOutcome {
    /// Ends the command with the status this outcome has: 0 done, 1 failed, 3 partly done.
    func exit() throws {
        switch self {
        case .complete: return
        case .pending: throw ExitCode.partlyDone
        case .failed: throw ExitCode.failure
        }
    }
}
