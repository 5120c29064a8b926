import Foundation
import Testing

/// Stripe's API in the tests (scripts/stripe_standin.py): it answers the documented shapes of a
/// Checkout Session's creation and records every request, which ``judgedFields(of:)`` then holds
/// to what Stripe's own library (the `stripe` package, scripts/stripe_judge.py) sends for the
/// same parameters.
public final class StripeStandIn: @unchecked Sendable {
    /// The secret key the stand-in accepts.
    public static let key = "sk_live_kiosk_standin"
    public let process = Process()
    public private(set) var url = ""
    /// Its record of requests, one JSON object per line.
    public let record: URL
    let directory: TemporaryDirectory

    /// One request as the stand-in received it.
    public struct Recorded: Decodable, Sendable {
        public var method: String
        public var path: String
        public var authorization: String?
        public var idempotencyKey: String?
        public var contentType: String?
        public var fields: [[String]]

        /// The fields as name → value (a name given twice keeps its last value).
        public var form: [String: String] {
            Dictionary(fields.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }) { _, last in last }
        }
    }

    public static func start() async throws -> StripeStandIn {
        try StripeSigner.requireLibrary()
        return try await offCooperativePool { try StripeStandIn() }
    }

    init() throws {
        directory = try TemporaryDirectory()
        record = directory.path("requests.jsonl")
        let log = directory.path("standin.log")
        FileManager.default.createFile(atPath: record.path, contents: nil)
        FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = StripeSigner.python
        process.arguments = [SampleStore.repository.appendingPathComponent("scripts/stripe_standin.py").path, record.path, "--key", Self.key]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = try FileHandle(forWritingTo: log)
        try process.runAlone()
        url = try ServerProcess.listeningURL(process, stdout: stdout, log: log)
    }

    /// Every request received so far, in order.
    public func requests() throws -> [Recorded] {
        let text = try String(contentsOf: record, encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONDecoder().decode(Recorded.self, from: Data($0.utf8)) }
    }

    /// The fields Stripe's library sends for `parameters` (as the API reference writes them),
    /// sent through it to this stand-in and read back from its record.
    /// With `subscription`, the fields of that subscription's update instead.
    public func judgedFields(of parameters: [String: Any], idempotencyKey: String, subscription: String? = nil) async throws -> Recorded {
        let file = directory.path("params-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: parameters).write(to: file)
        let before = try requests().count
        let judged = try await KioskCommand.run([SampleStore.repository.appendingPathComponent("scripts/stripe_judge.py").path, url, Self.key, file.path, idempotencyKey]
                                                    + (subscription.map { [$0] } ?? []),
                                               program: StripeSigner.python)
        try #require(judged.status == 0, "stripe_judge.py failed: \(judged.stderr)")
        let after = try requests()
        try #require(after.count == before + 1, "Stripe's library sent \(after.count - before) requests")
        return after[before]
    }

    /// Kills it (SIGKILL: it keeps nothing worth a clean stop, and a child of the test process may
    /// inherit SIGTERM blocked) and waits for it.
    public func stop() async {
        _ = try? await offCooperativePool { [self] in
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitForExit(seconds: 30)
            }
        }
    }

    /// A test that threw before ``stop()`` still ends it (SIGKILL: SIGTERM may be blocked in it).
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
