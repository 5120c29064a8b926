import ArgumentParser
import Foundation
import KioskCommandLine
@_spi(Testing) import KioskClient

/// Where the client keeps its state and which server it talks to; shared by every client command.
struct ClientOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The client's state folder (default: $KIOSK_HOME, else $XDG_DATA_HOME/kiosk).", valueName: "dir"))
    var home: String?

    @Option(name: .long, help: ArgumentHelp("The server's base URL (default: $KIOSK_SERVER, else the last one used).", valueName: "url"))
    var server: String?

    func validate() throws {
        // A URL that cannot be a Kiosk store (ftp://, a bare host) is refused before anything runs.
        if let server {
            do {
                _ = try KioskClient.checkServerURL(server)
            } catch {
                throw ValidationError("--server: \(error)")
            }
        }
    }

    /// Opens the client's state, with the engine's settings taken from `KIOSK_*` variables:
    /// KIOSK_STALL_SECONDS, KIOSK_MAX_RECEIVE_SPEED, KIOSK_CONCURRENCY, KIOSK_RETRY_BASE_SECONDS and
    /// KIOSK_RETRY_CAP_SECONDS (the first retry's delay and the longest), KIOSK_CLAIM_LEASE_SECONDS
    /// (how long a download claim holds without renewal), and KIOSK_TEST_CRASH_POINT
    /// (the tests' way to have this process killed at a point of a purchase).
    func client() throws -> KioskClient {
        LogSetup.bootstrap()
        let environment = ProcessInfo.processInfo.environment
        let home = KioskHome.resolve(flag: home, environment: environment)
        return try KioskClient(home: home, server: server ?? environment["KIOSK_SERVER"], configuration: Self.configuration(environment))
    }

    static func configuration(_ environment: [String: String]) -> KioskClient.Configuration {
        var configuration = KioskClient.Configuration()
        if let seconds = environment["KIOSK_STALL_SECONDS"].flatMap(Int.init) { configuration.stallSeconds = seconds }
        configuration.maxReceiveSpeed = environment["KIOSK_MAX_RECEIVE_SPEED"].flatMap(Int64.init)
        // 0 unpacks tar archives only after the download, as zip always is (for comparison runs).
        if environment["KIOSK_UNPACK_WHILE_DOWNLOADING"] == "0" { configuration.unpackWhileDownloading = false }
        if environment["KIOSK_UPDATE_BY_ENTRIES"] == "0" { configuration.updateByEntries = false }
        if let concurrency = environment["KIOSK_CONCURRENCY"].flatMap(Int.init), concurrency > 0 { configuration.concurrency = concurrency }
        if let base = environment["KIOSK_RETRY_BASE_SECONDS"].flatMap(Double.init), base > 0 { configuration.backoff.base = base }
        if let cap = environment["KIOSK_RETRY_CAP_SECONDS"].flatMap(Double.init), cap > 0 { configuration.backoff.cap = cap }
        if let lease = environment["KIOSK_CLAIM_LEASE_SECONDS"].flatMap(Double.init), lease > 0 { configuration.claimLease = lease }
        if let point = environment["KIOSK_TEST_CRASH_POINT"].flatMap(CrashPoint.init(rawValue:)) {
            // SIGKILL, which no handler can soften: what a power cut or the OOM killer does.
            configuration.crashPoint = { reached in if reached == point { kill(getpid(), SIGKILL) } }
        }
        return configuration
    }

    /// The client, after replaying whatever an earlier run left unfinished.
    func connect() async throws -> KioskClient {
        let client = try client()
        _ = try client.server()
        Self.tell(await client.replay(), email: try client.accountEmail())
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

/// One line on stderr, prefixed with the tool's name.
func standardError(_ line: String) {
    BufferedLog.standardError.write("kiosk: \(line)\n")
}
