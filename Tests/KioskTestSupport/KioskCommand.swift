import Foundation
import Synchronization

/// The built `kiosk` executable, run as a person would run it.
public enum KioskCommand {
    /// The `kiosk` binary beside the test bundle (both live in the same build folder).
    public static var executable: URL {
        let beside = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("kiosk")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return SampleStore.repository.appendingPathComponent(".build/debug/kiosk")
    }

    public struct Result: Sendable {
        public var status: Int32
        /// True when the process died of a signal (`status` is then the signal's number).
        public var killed: Bool
        public var stdout: String
        public var stderr: String
    }

    /// Runs `kiosk arguments…` to the end, waiting on a thread of its own.
    /// `program` runs in place of the built `kiosk` (a copy of it elsewhere, say).
    /// - Parameter input: what the command reads on standard input (none: it reads an empty pipe).
    public static func run(_ arguments: [String], environment: [String: String] = [:], in folder: URL? = nil, program: URL? = nil, input: String? = nil) async throws -> Result {
        try await offCooperativePool { try runBlocking(arguments, environment: environment, in: folder, program: program ?? executable, input: input) }
    }

    /// Runs `kiosk arguments…` and also returns its peak resident memory in bytes, measured by GNU
    /// time (`make test` installs it).
    ///
    /// Why not wait4(2)'s own figure: a child started by posix_spawn (a vfork) inherits the test
    /// process's peak as its starting "maximum resident set", and the test process grows to
    /// hundreds of MiB over a run, so the figure would be the test's, not kiosk's. GNU time is a
    /// small process that forks kiosk itself, so what it inherits is GNU time's own 2 MiB.
    public static func runMeasured(_ arguments: [String], environment: [String: String] = [:], in folder: URL) async throws -> (Result, peakBytes: Int) {
        let time = "/usr/bin/time"
        guard FileManager.default.isExecutableFile(atPath: time) else {
            throw MissingTool(message: "GNU time (\(time)) is missing: `make test` installs it (apt-get install time)")
        }
        return try await offCooperativePool {
            let out = folder.appendingPathComponent(".measured-\(UUID().uuidString.prefix(6)).out")
            let err = folder.appendingPathComponent(".measured-\(UUID().uuidString.prefix(6)).err")
            let peak = folder.appendingPathComponent(".measured-\(UUID().uuidString.prefix(6)).rss")
            defer {
                for file in [out, err, peak] { try? FileManager.default.removeItem(at: file) }
            }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, out.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, err.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let argv = [time, "-f", "%M", "-o", peak.path, executable.path] + arguments
            let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
            var cArgv = argv.map { strdup($0) } + [nil]
            var cEnv = env.map { strdup($0) } + [nil]
            defer { (cArgv + cEnv).forEach { free($0) } }
            var pid: pid_t = 0
            guard posix_spawn(&pid, time, &actions, nil, &cArgv, &cEnv) == 0 else {
                throw CocoaError(.executableLoad)
            }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0, errno == EINTR {}
            // GNU time writes "Command exited with non-zero status N" or "Command terminated by
            // signal N" before the figure, and exits with kiosk's status.
            let report = ((try? String(contentsOf: peak, encoding: .utf8)) ?? "").split(separator: "\n")
            let signal = report.first { $0.hasPrefix("Command terminated by signal ") }.flatMap { Int32($0.split(separator: " ").last ?? "") }
            guard let kilobytes = report.last.flatMap({ Int($0) }) else {
                throw MissingTool(message: "GNU time gave no peak for kiosk \(arguments.joined(separator: " ")): \(report)")
            }
            let result = Result(
                status: signal ?? (status >> 8) & 0xff, killed: signal != nil,
                stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
            return (result, kilobytes * 1024)
        }
    }

    /// A tool a test needs is not installed.
    public struct MissingTool: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The longest any one `kiosk` command of a test may run before it is killed: the longest
    /// (a 64 MiB download throttled on purpose) take under a minute here.
    static let commandLimit: Double = 240

    static func runBlocking(_ arguments: [String], environment: [String: String], in folder: URL? = nil, program: URL = executable, input: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = program
        if let folder { process.currentDirectoryURL = folder }
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        // The pipes are made and the command started with no other start under way (``Spawning``).
        let (stdout, stderr, stdin) = try Spawning.alone { () throws -> (Pipe, Pipe, Pipe?) in
            let stdout = Pipe()
            let stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            let stdin = input == nil ? nil : Pipe()
            if let stdin { process.standardInput = stdin }
            do {
                try process.run()
            } catch {
                Pipes.close([stdout, stderr, stdin].compactMap { $0 })
                throw error
            }
            return (stdout, stderr, stdin)
        }
        // Every end closed once the command is done: left to Foundation, about one descriptor in
        // two commands stayed open, 1,095 pipes in a run of the command line's suites, and
        // Process.run then crashed reading the long /proc/self/fd (swift-corelibs-foundation#5472).
        defer { Pipes.close([stdout, stderr, stdin].compactMap { $0 }) }
        if let input, let stdin {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
        let deadline = ProcessDeadline(process, seconds: commandLimit)
        defer { deadline.cancel() }
        // Read both pipes before waiting, so a chatty process cannot block on a full pipe.
        let errorData = ReadToEnd(stderr.fileHandleForReading)
        let outputData = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        return Result(
            status: process.terminationStatus,
            killed: process.terminationReason == .uncaughtSignal,
            stdout: String(decoding: outputData, as: UTF8.self),
            stderr: String(decoding: errorData.wait(), as: UTF8.self))
    }
}

/// Closes pipes a finished process used, both ends (an end already closed stays closed).
public enum Pipes {
    public static func close(_ pipes: [Pipe]) {
        for pipe in pipes {
            try? pipe.fileHandleForReading.close()
            try? pipe.fileHandleForWriting.close()
        }
    }
}

/// Reads a file handle to its end on a background thread.
final class ReadToEnd: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        DispatchQueue.global().async {
            self.data = handle.readDataToEndOfFile()
            self.done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}

/// `kiosk serve` running in the background on a free port.
public final class ServerProcess: @unchecked Sendable {
    public let process = Process()
    public private(set) var url = ""
    private let stderrLog: URL

    /// Starts `kiosk serve --port 0` and waits for its `listening on` line.
    /// `program` serves in place of the built `kiosk` (the previous release's `kiosk-server`, say),
    /// given the same arguments.
    public static func start(_ store: SampleStore, extraArguments: [String] = [], log: URL, program: URL? = nil) async throws -> ServerProcess {
        try await offCooperativePool { try ServerProcess(store, extraArguments: extraArguments, log: log, program: program ?? KioskCommand.executable) }
    }

    init(_ store: SampleStore, extraArguments: [String] = [], log: URL, program: URL = KioskCommand.executable) throws {
        stderrLog = log
        FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = program
        process.arguments = [
            "serve", "--catalog", store.catalog.path, "--content", store.content.path,
            "--data", store.data.path, "--port", "0",
        ] + extraArguments
        // bcrypt's least cost, unless the test chose one: sign-ins take milliseconds, not a quarter
        // second. A production store takes no less than 10.
        let cost = extraArguments.contains("production") ? "10" : "4"
        process.environment = ProcessInfo.processInfo.environment.merging(["KIOSK_PASSWORD_COST": cost]) { own, _ in own }
        // Made and started with no other start under way (``Spawning``): a descriptor of another
        // command passed into the server would hide that command's end until the server stops.
        let stdout = try Spawning.alone { () throws -> Pipe in
            let stdout = Pipe()
            process.standardOutput = stdout
            let logHandle = try FileHandle(forWritingTo: log)
            process.standardError = logHandle
            // The server writes through its own copy; this one would stay open after the log's folder is gone.
            defer { try? logHandle.close() }
            try process.run()
            return stdout
        }
        url = try Self.listeningURL(process, stdout: stdout, log: log)
    }

    /// The address a just-started server prints as `listening on URL`; a server that neither
    /// listens nor exits within 90 seconds (stuck starting) is killed, so the read ends.
    static func listeningURL(_ process: Process, stdout: Pipe, log: URL) throws -> String {
        let deadline = ProcessDeadline(process, seconds: 90)
        defer { deadline.cancel() }
        let text = firstLine(of: stdout)
        guard text.hasPrefix("listening on ") else {
            process.waitForExit()
            throw ServerDidNotStart(stdout: text, stderr: (try? String(contentsOf: log, encoding: .utf8)) ?? "")
        }
        return String(text.dropFirst("listening on ".count))
    }

    /// The first line a started process writes to `pipe` (a byte at a time: nothing after it is
    /// taken from the pipe), without its newline; what there was when the pipe closed.
    public static func firstLine(of pipe: Pipe) -> String {
        var line = Data()
        while true {
            let byte = pipe.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    public var log: String { (try? String(contentsOf: stderrLog, encoding: .utf8)) ?? "" }

    public func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Sends SIGTERM and waits; returns the exit status. A server still running 30 seconds later
    /// is killed (status 9, a signal), which fails any test that expects it to stop cleanly.
    @discardableResult
    public func stop() async -> Int32 {
        (try? await offCooperativePool { [self] in
            if process.isRunning {
                let deadline = ProcessDeadline(process, seconds: 30)
                defer { deadline.cancel() }
                signal(SIGTERM)
                process.waitForExit(seconds: 45)
            }
            // Foundation never saw it end (see waitForExit): no status to give.
            return process.isRunning ? -1 : process.terminationStatus
        }) ?? -1
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    public struct ServerDidNotStart: Error, CustomStringConvertible {
        public var stdout: String
        public var stderr: String
        public var description: String { "the server did not start: stdout=\(stdout) stderr=\(stderr)" }
    }
}

/// Kills a child process still running after a time limit. A test waits on its children, and a
/// child that hangs must fail that test with its output, not stall the whole run (CI's limit
/// leaves no clue and lands nothing).
final class ProcessDeadline: Sendable {
    private let finished = Atomic<Bool>(false)

    init(_ process: Process, seconds: Double) {
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            // Until cancel(), the process is our unwaited child, so its PID cannot be reused.
            if !finished.load(ordering: .acquiring) { kill(pid, SIGKILL) }
        }
    }

    /// Call once the process has been waited for (or the wait is over), before it can be reaped.
    func cancel() { finished.store(true, ordering: .releasing) }
}

/// Runs blocking work (waiting for a process, reading a pipe) on a thread of its own.
///
/// Swift's cooperative pool has one thread per core; a test that blocks them starves the
/// in-process servers of the tests running beside it.
public func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}
