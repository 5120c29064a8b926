import ArgumentParser
import Foundation
import Logging
import Synchronization

/// What `kiosk` and `kiosk-server` share as command-line tools: how they start, exit and log.
public enum CommandMain {
    /// Parses and runs `root`'s command, giving usage errors exit status 2 as documented
    /// (ArgumentParser would use 64). `logLevel` is the level `KIOSK_LOG_LEVEL` names, if any.
    public static func run<Root: ParsableCommand>(_ root: Root.Type, logLevel: Logger.Level?) async {
        LogSetup.configure(level: logLevel)
        do {
            var command = try root.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if root.exitCode(for: error) == .validationFailure {
                BufferedLog.standardError.write(root.fullMessage(for: error) + "\n")
                Foundation.exit(ExitCode.usage.rawValue)
            }
            root.exit(withError: error)
        }
    }
}

/// Logs go to stderr so that stdout carries only what a command reports; info lines (the
/// server's request log) are buffered for up to a second, warnings are written at once.
public enum LogSetup {
    private static let level = Mutex<Logger.Level?>(nil)
    private static let bootstrapped: Void = {
        let configured = level.withLock { $0 }
        LoggingSystem.bootstrap { label in
            BufferedLogHandler(label: label, output: .standardError, logLevel: configured ?? (label == "kiosk.server" ? .info : .warning))
        }
    }()

    static func configure(level: Logger.Level?) {
        self.level.withLock { $0 = level }
    }

    public static func bootstrap() { _ = bootstrapped }
}

/// Exit status 2 for a usage error, 3 when the work is saved and a later command completes it.
extension ExitCode {
    public static let usage = ExitCode(2)
    public static let partlyDone = ExitCode(3)
}

/// Runs a command body, turning any error into one line on stderr and exit status 1.
public func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
    } catch is CancellationError {
        // Ctrl-C or SIGTERM while a request was under way: what was saved before it stands.
        BufferedLog.standardError.write("kiosk: interrupted; whatever was saved is completed by the next kiosk command\n")
        throw ExitCode(130)
    } catch let error as CocoaError {
        // Foundation's own description is a dump of its user info: say what and where instead.
        let path = error.filePath ?? error.url?.path ?? "a file"
        let reason = (error.underlying as? POSIXError).map { String(cString: strerror($0.code.rawValue)) } ?? error.localizedDescription
        BufferedLog.standardError.write("kiosk: \(path): \(reason); check the path and its permissions, then try again\n")
        throw ExitCode.failure
    } catch {
        BufferedLog.standardError.write("kiosk: \(error)\n")
        throw ExitCode.failure
    }
}
