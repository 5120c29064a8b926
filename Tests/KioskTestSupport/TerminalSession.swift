import Foundation

/// A real terminal: a detached tmux session on a server of its own (`tmux -L`), running one shell
/// command, whose screen a test reads as a person would see it.
public final class TerminalSession: @unchecked Sendable {
    public static let tmux = "/usr/bin/tmux"
    private let socket: String
    /// tmux's socket folder (`TMUX_TMPDIR`), the test's own: tmux otherwise makes /tmp/tmux-UID and
    /// leaves it there after its server ends.
    private let socketFolder: TemporaryDirectory
    private let name = "kiosk"
    /// The pane's shell, killed with its children at the end: the tmux server outlives the test.
    private var shell: pid_t = 0

    /// Starts `command` (run by `sh -c`) in a `columns`×`rows` terminal with `TERM=xterm-256color`.
    /// - Throws: ``KioskCommand/MissingTool`` when tmux is not installed (`make test-tools` installs it).
    public init(_ command: String, columns: Int = 160, rows: Int = 40) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.tmux) else {
            throw KioskCommand.MissingTool(message: "tmux (\(Self.tmux)) is missing: `make test-tools` installs it (apt-get install tmux)")
        }
        socket = "kiosk-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        socketFolder = try TemporaryDirectory("tmux")
        let started = try tmux(["-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "\(columns)", "-y", "\(rows)",
                                             "env", "TERM=xterm-256color", "sh", "-c", command])
        guard started.status == 0 else {
            throw KioskCommand.MissingTool(message: "tmux did not start a session: \(started.output)")
        }
        shell = pid_t(try tmux(["display-message", "-p", "-t", name, "#{pane_pid}"]).output
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    deinit {
        if shell > 0 {
            // The shell's children first (kiosk, sleep), then the shell; then the server.
            _ = try? Self.run("/usr/bin/pkill", ["-KILL", "-P", "\(shell)"])
            kill(shell, SIGKILL)
        }
        _ = try? tmux(["kill-server"])
    }

    /// The visible screen, one string per row, trailing blanks and empty rows at the end removed.
    public func screen() throws -> [String] {
        let captured = try tmux(["capture-pane", "-p", "-t", name])
        var lines = captured.output.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.reversed().drop { $0 == " " }.reversed())
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Types keys as tmux names them (`C-c`, `Enter`, or text).
    public func send(_ keys: String...) throws {
        _ = try tmux(["send-keys", "-t", name] + keys)
    }

    /// Reads the screen until `condition` holds for it, or `timeout` passes; returns the last screen.
    @discardableResult
    public func waitForScreen(timeout: Duration = .seconds(20), _ condition: ([String]) -> Bool) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        var lines = try screen()
        while !condition(lines), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            lines = try screen()
        }
        return lines
    }

    /// Runs one tmux command with `posix_spawn` and `waitpid`. Its output goes to a file, not a
    /// pipe: the tmux server that `new-session` starts lives on with the descriptors it was given.
    /// (Foundation's `Process` waited past the client's exit here.)
    private func tmux(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try Self.run(Self.tmux, ["-L", socket] + arguments, environment: ["TMUX_TMPDIR": socketFolder.url.path])
    }

    private static func run(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tmux-\(UUID().uuidString.prefix(8)).out")
        defer { try? FileManager.default.removeItem(at: file) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = [program] + arguments
        var cArgv = argv.map { strdup($0) } + [nil]
        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        var cEnv = env.map { strdup($0) } + [nil]
        defer { (cArgv + cEnv).forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, program, &actions, nil, &cArgv, &cEnv) == 0 else {
            throw KioskCommand.MissingTool(message: "\(program) could not be started")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return ((status >> 8) & 0xff, (try? String(contentsOf: file, encoding: .utf8)) ?? "")
    }
}
