import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

/// How a purchase's outcome reads on the terminal (or as JSON), and the exit status it gives:
/// the runner that showed the work shows what it came to.
extension DownloadRunner {

    /// The line that says a purchase is paid for and its receipt is on disk.
    static func printPurchased(_ record: PaymentRecord) {
        let quantity = record.quantity > 1 ? " × \(record.quantity)" : ""
        Swift.print("transaction \(record.transactionId ?? "(not yet assigned)"): purchased \(record.productId)\(quantity); receipt saved")
    }

    /// Prints the outcome and how its download went, and exits with the status the engine gave it.
    func report(purchase result: PurchaseResult, json: Bool = false) throws {
        let runner = self
        if json {
            try printJSON(result)
            try result.outcome.exit()
            return
        }
        let record = result.record
        let id = record.transactionId ?? "(not yet assigned)"
        let quantity = record.quantity > 1 ? " × \(record.quantity)" : ""
        if result.savedOffline {
            Swift.print("purchase of \(record.productId)\(quantity) saved; the server cannot be reached, so it will be sent by the next kiosk command")
        }
        if let problem = result.storeFailed {
            Swift.print("purchase of \(record.productId)\(quantity) saved; the store could not take it now (\(TerminalText.escaped(problem))), so it will be sent again, with the same key, by the next kiosk command")
        }
        switch record.state {
        case _ where result.savedOffline || result.storeFailed != nil:
            break
        case .purchased, .delivering, .finished, .restored:
            if result.alreadyOwned {
                Swift.print("\(record.productId) is already owned (transaction \(id)); nothing was charged")
            } else if !runner.announcesPurchases {
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

    private func printJSON(_ result: PurchaseResult) throws {
        let runner = self
        let records = (try? runner.client.downloads()) ?? []
        try JSONOutput.print(JSONOutput.Purchase(
            transaction: Kiosk.Transactions.Row(
                TransactionView(record: result.record, receiptProblem: nil),
                price: shownPrice(result.record, try? runner.client.cachedCatalog().products.first { $0.id == result.record.productId })),
            credits: result.credits, owned: result.alreadyOwned, alreadyPending: result.alreadyPending,
            savedOffline: result.savedOffline, storeFailed: result.storeFailed, contentQueued: result.contentQueued,
            downloads: result.downloads.map { JSONOutput.Downloads($0, records: records) },
            outcome: result.outcome.name))
        if result.record.state == .failed {
            standardError("\(result.record.productId): \(result.record.lastError ?? "the purchase failed")")
        }
    }
}
