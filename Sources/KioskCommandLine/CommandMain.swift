import ArgumentParser
import Foundation
import Logging
import Synchronization

/// What `kiosk` and `kiosk-server` share as command-line tools: how they start, exit and log.
public enum CommandMain {
    /// Parses and runs `root`'s command, giving usage errors exit status 2 as documented
    /// (ArgumentParser would use 64). `logLevel` is the level `KIOSK_LOG_LEVEL` names, if any.
    /// - Parameter alsoCommands: subcommands handled before parsing (handed to another program),
    ///   counted as known when a mistyped one is matched.
    public static func run<Root: ParsableCommand>(_ root: Root.Type, logLevel: Logger.Level?, alsoCommands: [String] = []) async {
        LogSetup.configure(level: logLevel)
        if let unknown = UnknownCommand(root, arguments: Array(CommandLine.arguments.dropFirst()), alsoCommands: alsoCommands) {
            BufferedLog.standardError.write(unknown.message + "\n")
            Foundation.exit(ExitCode.usage.rawValue)
        }
        do {
            var command = try root.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if root.exitCode(for: error) == .validationFailure {
                // One line, as every other error: what is wrong, and where the usage is.
                let tool = root.configuration.commandName ?? "kiosk"
                let message = root.message(for: error).split(whereSeparator: \.isNewline).joined(separator: "; ")
                BufferedLog.standardError.write("\(tool): \(message) (--help shows the usage)\n")
                end(ExitCode.usage.rawValue)
            }
            let code = root.exitCode(for: error)
            let message = root.fullMessage(for: error)
            if !message.isEmpty {
                if code == .success {
                    print(message)
                } else {
                    BufferedLog.standardError.write(message + "\n")
                }
            }
            end(code.rawValue)
        }
        end(ExitCode.success.rawValue)
    }

    /// Ends the process once its output is written, without running the C library's exit
    /// handlers: OpenSSL's (libcurl's TLS) freed its tables while a worker thread still cleaned
    /// up a transfer's handle, and `kiosk admin refund` crashed in libcrypto after its work was
    /// done (seen once in four full test runs). Everything the commands keep is committed before
    /// they return; nothing waits for an exit handler.
    public static func end(_ status: Int32) -> Never {
        fflush(nil)
        BufferedLog.standardError.flush()
        _exit(status)
    }
}

/// A first word that names no subcommand, with the closest one, as git says it:
/// `kiosk: 'byu' is not a kiosk command; did you mean 'buy'? (kiosk --help lists them)`.
struct UnknownCommand {
    let message: String

    init?<Root: ParsableCommand>(_ root: Root.Type, arguments: [String], alsoCommands: [String]) {
        let configuration = root.configuration
        // `kiosk help byu` is the same mistake as `kiosk byu`.
        let arguments = arguments.first == "help" && arguments.count > 1 ? Array(arguments.dropFirst()) : arguments
        guard let word = arguments.first, !word.hasPrefix("-"), !configuration.subcommands.isEmpty,
              configuration.defaultSubcommand == nil else { return nil }
        let known = configuration.subcommands.map { $0._commandName } + alsoCommands + ["help"]
        guard !known.contains(word) else { return nil }
        let tool = configuration.commandName ?? "kiosk"
        let ranked = known.map { (name: $0, distance: Self.distance(word.lowercased(), $0)) }
            .filter { $0.distance <= max(1, min(2, word.count / 3)) || ($0.name.hasPrefix(word.lowercased()) && word.count >= 2) }
            .sorted { ($0.distance, $0.name) < ($1.distance, $1.name) }
        if let best = ranked.first {
            message = "\(tool): '\(word)' is not a \(tool) command; did you mean '\(best.name)'? (\(tool) --help lists them)"
        } else {
            message = "\(tool): '\(word)' is not a \(tool) command; \(tool) --help lists them"
        }
    }

    /// Edit distance (insert, delete, substitute, and swapping two neighbours, git's commonest typo).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
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
