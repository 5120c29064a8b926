import Foundation
import KioskCommandLine

/// `kiosk serve`, `kiosk publish` and `kiosk keys` run `kiosk-server`, the way `git foo` runs
/// `git-foo`: the process image is replaced (`execv`), so the PID, signals, standard streams and
/// exit status are the server's own, as if it had been started directly.
///
/// Why two programs: a reader's `kiosk fetch` of 1 GiB peaked at 40 MiB with the server linked in
/// (Hummingbird, NIO, PostgreSQL, a second SQLite); the client alone stays under 32 MiB.
enum ServerHandoff {
    static let commands: Set<String> = ["serve", "publish", "keys"]
    /// The `kiosk admin` commands `kiosk-server` runs: they open the database and content themselves.
    static let adminCommands: Set<String> = ["backup", "check", "restore"]

    /// Replaces this process with `kiosk-server` when `arguments` name one of its commands (or
    /// `help` for one); returns otherwise. Exits 1 with one line when `kiosk-server` is missing.
    static func handOffIfServerCommand(_ arguments: [String], environment: [String: String]) {
        guard arguments.count > 1 else { return }
        let named = arguments[1] == "help" && arguments.count > 2 ? arguments[2] : arguments[1]
        // `kiosk admin backup|check|restore` work on the store's files, not over its admin API.
        let adminOnFiles = arguments[1] == "admin" && arguments.count > 2 && adminCommands.contains(arguments[2])
        guard commands.contains(named) || adminOnFiles else { return }
        let candidates = [Self.besideThisProgram()] + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/kiosk-server" }
        guard let server = candidates.compactMap({ $0 }).first(where: { access($0, X_OK) == 0 }) else {
            BufferedLog.standardError.write("kiosk: \(named) is run by kiosk-server, which is neither beside this kiosk nor on PATH; install it with kiosk\n")
            exit(1)
        }
        var argv: [UnsafeMutablePointer<CChar>?] = ([server] + arguments.dropFirst()).map { strdup($0) }
        argv.append(nil)
        execv(server, argv)
        BufferedLog.standardError.write("kiosk: cannot run \(server): \(String(cString: strerror(errno)))\n")
        exit(1)
    }

    /// `kiosk-server` in the folder this executable is in (symbolic links resolved).
    private static func besideThisProgram() -> String? {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("kiosk-server").path
    }
}
