import Foundation
import KioskCommandLine
@_spi(Testing) import KioskClient

extension KioskClient {
    /// Opens the client's state for a command: `home` and `server` are its flags (else
    /// `KIOSK_HOME`, `XDG_DATA_HOME` and `KIOSK_SERVER`), and the engine's settings come from
    /// `KIOSK_*` variables (``Configuration/init(environment:)``). The library reads no
    /// environment itself: the command does it here.
    static func open(home: String?, server: String?) throws -> KioskClient {
        LogSetup.bootstrap()
        let environment = ProcessInfo.processInfo.environment
        let home = KioskHome.resolve(flag: home, environment: environment)
        return try KioskClient(home: home, server: server ?? environment["KIOSK_SERVER"], configuration: Configuration(environment: environment))
    }
}

extension KioskClient.Configuration {
    /// The engine's settings from KIOSK_STALL_SECONDS, KIOSK_MAX_RECEIVE_SPEED, KIOSK_CONCURRENCY,
    /// KIOSK_RETRY_BASE_SECONDS and KIOSK_RETRY_CAP_SECONDS (the first retry's delay and the
    /// longest), KIOSK_CLAIM_LEASE_SECONDS (how long a download claim holds without renewal),
    /// KIOSK_UNPACK_WHILE_DOWNLOADING and KIOSK_UPDATE_BY_ENTRIES (0 turns them off, for comparison
    /// runs), and KIOSK_TEST_CRASH_POINT (the tests' way to have this process killed at a point of
    /// a purchase); the defaults for the rest.
    init(environment: [String: String]) {
        self.init()
        if let seconds = environment["KIOSK_STALL_SECONDS"].flatMap(Int.init) { stallSeconds = seconds }
        maxReceiveSpeed = environment["KIOSK_MAX_RECEIVE_SPEED"].flatMap(Int64.init)
        // 0 unpacks tar archives only after the download, as zip always is (for comparison runs).
        if environment["KIOSK_UNPACK_WHILE_DOWNLOADING"] == "0" { unpackWhileDownloading = false }
        if environment["KIOSK_UPDATE_BY_ENTRIES"] == "0" { updateByEntries = false }
        if let concurrency = environment["KIOSK_CONCURRENCY"].flatMap(Int.init), concurrency > 0 { self.concurrency = concurrency }
        if let base = environment["KIOSK_RETRY_BASE_SECONDS"].flatMap(Double.init), base > 0 { backoff.base = base }
        if let cap = environment["KIOSK_RETRY_CAP_SECONDS"].flatMap(Double.init), cap > 0 { backoff.cap = cap }
        if let lease = environment["KIOSK_CLAIM_LEASE_SECONDS"].flatMap(Double.init), lease > 0 { claimLease = lease }
        // The power supplies' folder (/sys/class/power_supply unless given): a laptop's battery
        // elsewhere, or a test's. The network's metered state comes from busctl on PATH.
        if let supplies = environment["KIOSK_POWER_SUPPLY_DIR"], !supplies.isEmpty {
            deviceConditions = LinuxDeviceConditions(powerSupplies: URL(fileURLWithPath: supplies))
        }
        if let point = environment["KIOSK_TEST_CRASH_POINT"].flatMap(CrashPoint.init(rawValue:)) {
            // SIGKILL, which no handler can soften: what a power cut or the OOM killer does.
            crashPoint = { reached in if reached == point { kill(getpid(), SIGKILL) } }
        }
    }
}
