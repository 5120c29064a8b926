import Foundation

/// One spawn at a time in a test process. Foundation on Linux learns that a child ended when the
/// socket it hands the child closes, and it makes that socket (like a `Pipe`) without close-on-exec;
/// a second `Process.run()` on another thread at that moment can pass both into its own child
/// (swift-corelibs-foundation#4795). When that child is a server, the first command's end is not
/// seen until the server stops: `isRunning` stays true, or its output never reaches its end. A
/// make test hung so (2026-11-30 23:09): UpgradeTests starts a server while a `kiosk buy` starts,
/// and the lane went silent until its watchdog stopped it. The helpers that start `kiosk` and the
/// servers make their pipes and start their process inside ``alone(_:)``; every other start in the
/// tests goes through ``Foundation/Process/runAlone()``.
public enum Spawning {
    private static let lock = NSLock()

    /// Runs `body`, which makes a process's pipes and starts it, while no other start of this
    /// process runs.
    public static func alone<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

extension Process {
    /// `run()`, one start at a time with every other start of the tests (``Spawning``).
    public func runAlone() throws {
        try Spawning.alone { try run() }
    }

    /// Waits for the process to end, for at most `seconds`; one still running then is killed, and
    /// waited for a few seconds more. The one wait of the tests and their tools, in place of
    /// `waitUntilExit`, which has no bound: Foundation on Linux can miss the exit of one of several
    /// children started and stopped at once, and its wait then never returns (a `make test` run
    /// hung in ScaleOutTests with the server it waited for long gone). Polling `isRunning` ends by
    /// the deadline whatever happened, and a test that meets it fails on the status, not by hanging.
    /// - Returns: the exit status, or -1 when Foundation never saw it end.
    @discardableResult
    public func waitForExit(seconds: Double = 240) -> Int32 {
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while isRunning, ContinuousClock.now < end { usleep(10_000) }
        if isRunning {
            kill(processIdentifier, SIGKILL)
            let grace = ContinuousClock.now + .seconds(5)
            while isRunning, ContinuousClock.now < grace { usleep(10_000) }
        }
        return isRunning ? -1 : terminationStatus
    }
}
