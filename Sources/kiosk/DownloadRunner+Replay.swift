import Foundation
import KioskCommandLine
import KioskClient

extension DownloadRunner {
    /// The client, after replaying whatever an earlier run left unfinished, with what that did
    /// told on stderr: the unfinished work is the engine's work this runner shows, so `kiosk buy`
    /// hands off to the runner, not to its flags, to open the client.
    static func connect(_ options: ClientOptions) async throws -> KioskClient {
        let client = try KioskClient.open(home: options.home, server: options.server)
        _ = try client.server()
        tell(await client.replay(), email: try client.accountEmail())
        return client
    }

    /// What replaying unfinished work did, one line each on stderr (stdout is the command's own).
    /// - Parameter email: the account's sign-in, to name in the way to sign in again.
    static func tell(_ report: ReplayReport, email: String?) {
        if let account = report.signedOut {
            standardError(signedOut(account, email: email))
        }
        if report.sent + report.finished + report.deferredResolved > 0 {
            standardError("completed unfinished work: \(report.sent) sent, \(report.finished) finished, \(report.deferredResolved) Ask to Buy answered")
        }
        for product in report.refused {
            standardError("\(product): the store refused the saved purchase, so nothing was charged (kiosk transactions says why)")
        }
        // One line a product: a refund that also revoked the free re-buys standing on it names it once.
        var told = Set<String>()
        for product in report.revoked where told.insert(product).inserted {
            if report.revokedCredits.contains(product) {
                standardError("\(product): the store revoked this purchase of credits; no library content changed (kiosk balance shows what is left)")
            } else if report.revokedPeriods.contains(product) {
                standardError("\(product): the store revoked a period of this subscription; the issues no other purchase or period covers were removed from the library")
            } else if report.revokedKept.contains(product) {
                standardError("\(product): the store revoked this purchase; its content stays in the library, covered by another purchase or a subscription")
            } else {
                standardError("\(product): the store revoked this purchase; its content was removed from the library")
            }
        }
        if !report.failed.isEmpty {
            standardError("\(report.failed.count) unfinished transaction(s) failed again and will be retried; see kiosk transactions")
        }
        if !report.arrived.isEmpty {
            let products = report.arrived.map(\.productId).joined(separator: ", ")
            standardError("\(report.arrived.count) purchase(s) made on another device, or renewed or granted by the store, were saved here: \(products) (kiosk resume downloads what they cover)")
        }
        for problem in report.notTakenIn { standardError(problem) }
        for held in report.heldForOtherStore + report.heldForOtherAccount { standardError(held) }
    }

    /// The store refused this device's token: what happened, and what to do.
    static func signedOut(_ account: String, email: String?) -> String {
        let again = email.map { "kiosk login --email \($0)" } ?? "kiosk login --email EMAIL, or kiosk account link TOKEN for an account without a sign-in"
        return "this device was signed out of account \(account) (removed on another device, signed out everywhere, a new password, or the account disabled); "
            + "sign in to it again (\(again)); purchases saved here wait for that"
    }
}
