import Foundation

extension Process {
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
