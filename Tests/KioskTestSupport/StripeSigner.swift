import Foundation
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
        let directory = try TemporaryDirectory()
        let file = directory.path("body.json")
        try Data(body.utf8).write(to: file)
        var arguments = [SampleStore.repository.appendingPathComponent("scripts/stripe_sign.py").path, file.path, secret]
        if let timestamp { arguments.append(String(timestamp)) }
        let signed = try await KioskCommand.run(arguments, program: python)
        try #require(signed.status == 0, "stripe_sign.py failed: \(signed.stderr)")
        return signed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
