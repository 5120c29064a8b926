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

                A production store that sells through the publisher's web shop (or --web) answers where \
                to pay: the command prints the checkout URL and, with --wait, waits until the payment \
                lands, then downloads and installs as usual. Without --wait, kiosk agent (or the next \
                kiosk restore) delivers it once paid.

                Example: kiosk buy com.kiosk.credits.pack-5 --quantity 2
                Example: kiosk buy com.kiosk.books.river-of-maps --web --wait
                Example: kiosk buy com.kiosk.books.river-of-maps --code SPRING20  (a code that takes money off)
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID, as `kiosk products` lists it.")
        var product: String

        @Option(help: "How many to buy (credit packs only).")
        var quantity = 1

        @Option(help: "The sandbox payment method: approve (default), decline, cancel or defer.")
        var payment: PaymentMethod?

        @Flag(help: "Pay on the publisher's web shop: print the checkout URL (the default in a production store that has one).")
        var web = false

        @Option(help: "An offer code that takes money off this product (or gives a subscription's introductory offer).")
        var code: String?

        @Flag(help: "With a web checkout: wait until the payment lands, then download and install.")
        var wait = false

        @Option(help: "With --wait: give up after this many seconds (the agent delivers it later).")
        var timeout = 900

        @Flag(help: "Finish right after saving the receipt; download the content later.")
        var noDownload = false

        @Flag(help: "Print the outcome as JSON (docs/client.md).")
        var json = false

        func validate() throws {
            guard (1...100).contains(quantity) else { throw ValidationError("--quantity must be between 1 and 100") }
            if web, payment != nil { throw ValidationError("--web pays on the web shop; --payment is the sandbox's pretend payment: give one") }
            guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
        }

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                var configured = DownloadRunner(client: client)
                configured.announcesPurchases = !json
                let runner = configured
                if try await paysOnWeb(client) {
                    try await buyOnWeb(client, runner: runner)
                    return
                }
                if wait { throw ValidationError("--wait waits for a payment on the web shop; this purchase is not paid there (give --web to pay there)") }
                let (product, quantity, payment, downloadNow) = (self.product, self.quantity, self.payment ?? .approve, !noDownload)
                let watch = runner.watch()
                let result: PurchaseResult
                do {
                    result = try await client.buy(product, quantity: quantity, method: payment, downloadNow: downloadNow, offerCode: code)
                } catch {
                    await watch.end()
                    throw error
                }
                await watch.end()
                try runner.report(purchase: result, json: json)
            }
        }

        /// Whether this purchase is paid on the web shop: asked for, or a production store's way
        /// (a store that cannot be reached, or an older one, is paid as before).
        private func paysOnWeb(_ client: KioskClient) async throws -> Bool {
            if web { return true }
            guard payment == nil, let description = try? await client.storeDescription(),
                  description.environment == StoreEnvironment.production.rawValue else { return false }
            guard description.webCheckout else {
                // Nothing is saved or sent: a production store takes no pretend payment.
                let channels = description.channels.map { ["web": "its web shop", "play": "its Android app", "appstore": "its iOS app"][$0] ?? $0 }
                throw ValidationError("this store runs in the production environment and sells only through \(channels.isEmpty ? "its publisher's channels" : channels.joined(separator: " and ")); buy there, then kiosk restore brings the purchase here")
            }
            return true
        }

        /// A line at once, even into a pipe: the reader must see where to pay before the wait ends.
        private func say(_ line: String, json: Bool) {
            // With --json, stdout holds one JSON document: the lines go to stderr.
            FileHandle(fileDescriptor: json ? 2 : 1).write(Data((line + "\n").utf8))
        }

        private func buyOnWeb(_ client: KioskClient, runner: DownloadRunner) async throws {
            let (checkout, known) = try await client.checkout(product, quantity: quantity, offerCode: code)
            if json && !wait {
                try JSONOutput.print(checkout)
                return
            }
            // The shop's URL as the store made it (no control characters: it checks the template).
            say("pay for \(checkout.productId)\(checkout.quantity > 1 ? " × \(checkout.quantity)" : "") at:", json: json)
            say("  \(TerminalText.escaped(checkout.url))", json: json)
            guard wait else {
                say("once paid, it is delivered by kiosk agent, or by kiosk restore (purchase intent \(checkout.intent))", json: json)
                return
            }
            say("waiting for the payment (up to \(timeout) s)…", json: json)
            let (timeout, downloadNow) = (self.timeout, !noDownload)
            let arrived = try await runner.showingProgress {
                try await client.waitForCheckout(checkout, known: known, timeout: .seconds(timeout), downloadNow: downloadNow)
            }
            guard let arrived else {
                say("no payment of \(checkout.productId) arrived in \(timeout) s; once paid, kiosk agent or kiosk restore delivers it", json: json)
                try WorkOutcome.pending.exit()
                return
            }
            try runner.report(purchase: arrived, json: json)
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
                let client = try await DownloadRunner.connect(options)
                var configured = DownloadRunner(client: client)
                configured.announcesPurchases = !json
                let runner = configured
                let (product, downloadNow) = (self.product, !noDownload)
                let result = try await runner.showingProgress { try await client.redeem(product, downloadNow: downloadNow) }
                try runner.report(purchase: result, json: json)
            }
        }
    }

    /// `kiosk redeem-code CODE`.
    struct RedeemCode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "redeem-code",
            abstract: "Redeem an offer code a publisher gave you: its book, issue or subscription period, free.",
            discussion: "Example: kiosk redeem-code AB12-CD34-EF56-GH78"
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The code (case, spaces and dashes do not matter).")
        var code: String

        @Flag(help: "Save the receipt only; download the content later.")
        var noDownload = false

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                let (code, downloadNow) = (self.code, !noDownload)
                let (redeemed, restored) = try await DownloadRunner(client: client).showingProgress { try await client.redeemCode(code, downloadNow: downloadNow) }
                print("redeemed: \(TerminalText.escaped(redeemed.productId)) is yours (transaction \(redeemed.transaction.transactionId))")
                if !restored.refused.isEmpty { print("not restored: \(restored.refused.map(TerminalText.escaped).joined(separator: ", "))") }
            }
        }
    }
}

extension Kiosk {
    struct Storefront: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show or choose the account's storefront: the country whose prices, currency and tax it buys at.",
            discussion: "A product that lists prices per storefront is sold only where it has one; the store never guesses the country. Example: kiosk storefront DE")

        @OptionGroup var options: ClientOptions

        @Argument(help: "A country code (ISO 3166-1 alpha-2), such as DE, FR or US; leave it out to see the one chosen.")
        var country: String?

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                let summary = if let country { try await client.setStorefront(country) } else { try await client.existingAccountSummary() }
                if let code = summary?.storefront {
                    print("storefront: \(code) (\(StorefrontCountry.name(code)))")
                } else {
                    print("storefront: none chosen: the catalog's base prices, and no tax; choose one with kiosk storefront COUNTRY")
                }
            }
        }
    }
}

extension PaymentMethod: ExpressibleByArgument {}

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
