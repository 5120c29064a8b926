import Foundation
import KioskTestSupport
import Testing

/// A suite that runs `kiosk` in the background (the agent, `kiosk resume --wait`) and stops it.
/// Conforming gives it, as `Self.…`, the agent started on a home with fast retries, what a
/// background command printed, polling until a condition holds, a stop by signal that is timed,
/// and the home's library, downloads and transactions read back.
protocol BackgroundCommandSuite: Sendable {}

extension BackgroundCommandSuite {
    /// Accelerated timings: a sync every second, retries from one second.
    static var fast: [String: String] { ["KIOSK_RETRY_BASE_SECONDS": "1", "KIOSK_RETRY_CAP_SECONDS": "2"] }

    /// `kiosk agent` in the background on `home`; stdout to `<log>.out`, stderr to `<log>.err`.
    static func startAgent(home: String, in directory: TemporaryDirectory, log: String = "agent", bytesPerSecond: Int? = nil, extra: [String] = []) throws -> Process {
        let process = Process()
        process.executableURL = KioskCommand.executable
        process.arguments = ["agent", "--sync-interval", "1"] + extra
        var environment = ProcessInfo.processInfo.environment.merging(fast) { $1 }
        environment["KIOSK_HOME"] = home
        if let bytesPerSecond { environment["KIOSK_MAX_RECEIVE_SPEED"] = String(bytesPerSecond) }
        process.environment = environment
        let out = directory.path("\(log).out")
        let err = directory.path("\(log).err")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.runAlone()
        return process
    }

    static func output(_ directory: TemporaryDirectory, _ log: String = "agent") -> String {
        ((try? String(contentsOf: directory.path("\(log).out"), encoding: .utf8)) ?? "") + "\n--- stderr ---\n"
            + ((try? String(contentsOf: directory.path("\(log).err"), encoding: .utf8)) ?? "")
    }

    /// Polls `condition` every 50 ms until it holds or `seconds` pass; returns how long it took (nil: never).
    @discardableResult
    static func eventually(within limit: Double, _ condition: () async throws -> Bool) async throws -> Double? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(Int64(limit * 1000)) {
            if try await condition() { return seconds(ContinuousClock.now - start) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await condition() ? limit : nil
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Sends `signal` and returns the exit status and how long the exit took.
    static func stop(_ process: Process, signal: Int32 = SIGTERM) async throws -> (status: Int32, seconds: Double) {
        let start = ContinuousClock.now
        kill(process.processIdentifier, signal)
        try await offCooperativePool { process.waitForExit() }
        return (process.terminationStatus, seconds(ContinuousClock.now - start))
    }

    static func installed(_ home: String, _ product: String) -> Bool {
        FileManager.default.fileExists(atPath: home + "/Library/\(product)")
    }

    static func downloadRow(_ home: String, _ product: String) async throws -> [String: Any]? {
        let json = try JSONSerialization.jsonObject(with: Data(try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": home]).stdout.utf8))
        return (json as? [[String: Any]])?.first { $0["productId"] as? String == product }
    }

    static func transactionID(of product: String, home: String) async throws -> String {
        let listed = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": home]).stdout
        let rows = try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] ?? []
        return rows.first { $0["productId"] as? String == product }?["transactionId"] as? String ?? ""
    }
}
