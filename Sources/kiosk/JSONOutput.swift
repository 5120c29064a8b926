import Foundation
import KioskClient
import KioskCore

/// The `--json` documents of the commands a script reads, one stable shape each (docs/client.md).
/// Field names follow the wire contract (`transactionId`, `productId`, `credits`, `owned`, …).
enum JSONOutput {
    /// Prints one document on one line of stdout.
    static func print(_ value: some Encodable) throws {
        Swift.print(String(decoding: try JSONEncoder.kiosk.encode(value), as: UTF8.self))
    }

    /// What a run of downloads came to: product IDs by outcome, and why each that did not install stopped.
    struct Downloads: Encodable {
        var installed: [String]
        var installedElsewhere: [String]
        var waiting: [String]
        var interrupted: [String]
        var paused: [String]
        var cancelled: [String]
        var failed: [String]
        var bytesReceived: Int64
        /// productId → the last error of each download that waits or failed.
        var lastErrors: [String: String]

        init(_ report: DownloadRunReport, records: [DownloadRecord]) {
            installed = report.installed
            installedElsewhere = report.installedElsewhere
            waiting = report.waiting
            interrupted = report.interrupted
            paused = report.paused
            cancelled = report.cancelled
            failed = report.failed
            bytesReceived = report.bytesReceived
            var errors: [String: String] = [:]
            for id in report.waiting + report.failed {
                if let error = records.first(where: { $0.productId == id })?.lastError { errors[id] = error }
            }
            lastErrors = errors
        }
    }

    /// `kiosk buy --json`, `kiosk redeem --json`.
    struct Purchase: Encodable {
        var transaction: Kiosk.Transactions.Row
        /// The account's credit balance after the purchase, when the store said.
        var credits: Int?
        /// The account already owned it: nothing was charged (the wire contract's `owned`).
        var owned: Bool
        /// An Ask to Buy request for it was already waiting: nothing new was sent.
        var alreadyPending: Bool
        /// The store could not be reached: saved, sent by the next command.
        var savedOffline: Bool
        /// The store failed underneath, with its message: saved, sent again by the next command.
        var storeFailed: String?
        /// Finished, with its content queued for a later `kiosk resume`.
        var contentQueued: Bool
        var downloads: Downloads?
        var outcome: String
    }

    /// `kiosk balance --json`.
    struct Balance: Encodable {
        /// nil on a device that has no account yet.
        var accountId: String?
        var credits: Int
    }

    /// `kiosk account --json`: the wire contract's account, and the token only when asked for.
    struct Account: Encodable {
        var accountId: String?
        var credits: Int
        var owned: [String]
        var subscriptions: [SubscriptionStatus]
        var token: String?
    }

    /// `kiosk resume --json`.
    struct Resume: Encodable {
        var queued: [String]
        var downloads: Downloads
        /// Downloads that had failed for good before this resume.
        var failedEarlier: [String]
        var outcome: String
    }

    /// `kiosk fetch --json`.
    struct Fetch: Encodable {
        var url: String
        /// The file written, or nil for stdout.
        var path: String?
        var size: Int64
        var sha256: String
        var bytesReceived: Int64
        var attempts: Int
    }
}

extension WorkOutcome {
    /// `complete`, `pending` or `failed`, as the JSON documents say it.
    var name: String {
        switch self {
        case .complete: return "complete"
        case .pending: return "pending"
        case .failed: return "failed"
        }
    }
}
