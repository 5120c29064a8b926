import Foundation
import Synchronization
import Testing

/// Stripe's part in the tests: the `Stripe-Signature` header Stripe's own library (the `stripe`
/// package `make test-tools` installs in `.build/venv`) makes for a webhook body.
public enum StripeSigner {
    public static let python = SampleStore.repository.appendingPathComponent(".build/venv/bin/python")

    /// Fails the test, saying what to run, when Stripe's library is missing.
    public static func requireLibrary() throws {
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "no \(python.path): run make test-tools (it installs stripe into that venv)")
    }

    /// The header for `body` under `secret`, signed now or at `timestamp`.
    public static func header(_ body: String, secret: String, timestamp: Int? = nil) async throws -> String {
        try requireLibrary()
        let request = try JSONSerialization.data(withJSONObject: ["body": body, "secret": secret, "timestamp": timestamp as Any? ?? NSNull()])
        struct Answer: Decodable { var header: String?, error: String? }
        let answer = try JSONDecoder().decode(Answer.self, from: try await offCooperativePool { try signer.ask(request) })
        return try #require(answer.header, "stripe_sign.py: \(answer.error ?? "no header")")
    }

    /// One `stripe_sign.py --serve` for the whole test run, started on first use. A process a
    /// signature spent 0.4 s starting Python and importing stripe: 256 signatures, 100 s of the
    /// Stripe suites' 113 (2026-11-30). It ends when the test process does (its standard input closes).
    private static let signer = LineServer(python, arguments: [SampleStore.repository.appendingPathComponent("scripts/stripe_sign.py").path, "--serve"])
}

/// A process that answers one JSON line for each JSON line it is sent, one request at a time.
final class LineServer: Sendable {
    private struct Running {
        var process: Process
        var input: FileHandle
        var output: FileHandle
        var buffered = Data()
    }

    private let program: URL
    private let arguments: [String]
    private let running = Mutex<Running?>(nil)

    init(_ program: URL, arguments: [String]) {
        self.program = program
        self.arguments = arguments
    }

    /// Sends `request` (one line of JSON, without its newline) and blocks until the answer's line.
    func ask(_ request: Data) throws -> Data {
        try running.withLock { running in
            if running == nil || running?.process.isRunning == false {
                let process = Process()
                process.executableURL = program
                process.arguments = arguments
                let input = Pipe(), output = Pipe()
                process.standardInput = input
                process.standardOutput = output
                try process.runAlone()
                // The child holds its own ends; ours stay open only where this process uses them.
                try input.fileHandleForReading.close()
                try output.fileHandleForWriting.close()
                running = Running(process: process, input: input.fileHandleForWriting, output: output.fileHandleForReading)
            }
            guard var server = running else { throw TestServiceError("\(program.lastPathComponent) did not start") }
            defer { running = server }
            try server.input.write(contentsOf: request + Data("\n".utf8))
            while !server.buffered.contains(UInt8(ascii: "\n")) {
                // availableData returns what one read(2) gives; read(upToCount:) waits for the count.
                let more = server.output.availableData
                guard !more.isEmpty else {
                    throw TestServiceError("\(arguments.first ?? program.path) ended without an answer")
                }
                server.buffered += more
            }
            let end = server.buffered.firstIndex(of: UInt8(ascii: "\n")) ?? server.buffered.endIndex
            let line = server.buffered[server.buffered.startIndex..<end]
            server.buffered = Data(server.buffered[server.buffered.index(after: end)...])
            return Data(line)
        }
    }
}
