import Foundation

/// One of the repository's small servers in Python (scripts/smtp_sink.py, scripts/otlp_sink.py),
/// run with the tests' venv, which holds the library it is built on: started, its `port=N` line
/// read, stopped by PID. A missing venv fails the test with what installs it.
public final class ScriptServer: @unchecked Sendable {
    public let process = Process()
    public let port: Int

    /// - Parameters:
    ///   - script: the script's name in scripts/.
    ///   - library: what `make test-tools` installs for it, for the message when the venv is missing.
    public init(_ script: String, _ arguments: [String], library: String) throws {
        let python = StripeSigner.python
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw TestServiceError("no \(python.path): run make test-tools (it installs \(library) into that venv)")
        }
        process.executableURL = python
        process.arguments = [SampleStore.repository.appendingPathComponent("scripts/\(script)").path] + arguments
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.runAlone()
        let text = ServerProcess.firstLine(of: stdout)
        guard text.hasPrefix("port="), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            throw TestServiceError("scripts/\(script) did not start: \(text)")
        }
        self.port = port
    }

    public func stop() {
        if process.isRunning { process.terminate() }
        _ = process.waitForExit()
    }
}
