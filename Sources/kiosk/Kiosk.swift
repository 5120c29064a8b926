import ArgumentParser
import Foundation
import Logging

/// The `kiosk` command: a content store's server and its reader's client in one tool.
@main
struct Kiosk: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kiosk",
        abstract: "A server-delivered content store for books and magazines.",
        discussion: """
            Run `kiosk serve` over a Catalog/ and Content/ folder; run the other commands as a reader.

            Exit status: 0 done, 1 failed, 2 usage error, 3 partly done (saved, to be completed by a later command).

            Example: kiosk sync --server http://127.0.0.1:8080 && kiosk buy com.kiosk.books.river-of-maps
            """,
        subcommands: [
            Serve.self, Publish.self, Keys.self, Sync.self, Products.self, Buy.self, Redeem.self, Transactions.self, Balance.self,
            Restore.self, Account.self, Config.self, Admin.self, Downloads.self, Resume.self, Pause.self, Cancel.self, Library.self, Fetch.self, Unpack.self,
        ]
    )

    /// Runs the command, giving usage errors exit status 2 as documented (ArgumentParser would use 64).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                BufferedLog.standardError.write(fullMessage(for: error) + "\n")
                Foundation.exit(ExitCode.usage.rawValue)
            }
            exit(withError: error)
        }
    }
}

/// Logs go to stderr so that stdout carries only what a command reports; info lines (the
/// server's request log) are buffered for up to a second, warnings are written at once.
enum LogSetup {
    private static let bootstrapped: Void = {
        let level = ProcessInfo.processInfo.environment["KIOSK_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
        LoggingSystem.bootstrap { label in
            BufferedLogHandler(label: label, output: .standardError, logLevel: level ?? (label == "kiosk.server" ? .info : .warning))
        }
    }()

    static func bootstrap() { _ = bootstrapped }
}

/// Exit status 3: the work is saved and a later command completes it.
extension ExitCode {
    static let usage = ExitCode(2)
    static let partlyDone = ExitCode(3)
}

/// Runs a command body, turning any error into one line on stderr and exit status 1.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
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
