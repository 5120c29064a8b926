import Foundation
import Synchronization
import KioskCommandLine
import KioskClient
import KioskTransfer

/// Shows a command's downloads as they run and says how they ended: progress goes to stderr (a
/// bar on a terminal, a line every few seconds otherwise, as curl does), outcomes to stdout.
/// Progress comes from the engine's event stream.
struct DownloadRunner {
    let client: KioskClient

    /// Runs `body` (which downloads) while printing progress from the client's events. Ctrl-C or
    /// SIGTERM cancels the command (see `Kiosk.main`), which stops the transfers at once with
    /// their bytes kept.
    func showingProgress<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let display = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb")
        let events = client.events
        let watcher = Task {
            for await event in events {
                if case .progress(let progress) = event { display.show(progress) }
            }
        }
        defer {
            watcher.cancel()
            display.finish()
        }
        return try await body()
    }

    /// Prints what was installed, waits, failed or stopped (the exit status is the engine's
    /// ``WorkOutcome``, not decided here).
    func report(_ report: DownloadRunReport) {
        let library = (try? client.library()) ?? []
        let downloads = (try? client.downloads()) ?? []
        for id in report.installed {
            let path = library.first { $0.item.productId == id }?.item.path ?? "the library"
            print("installed \(id) in \(path)")
        }
        for id in report.installedElsewhere {
            print("installed \(id) (downloaded by another kiosk process)")
        }
        if report.bytesReceived > 0 {
            print("received \(report.bytesReceived) bytes")
        }
        for id in report.waiting {
            let record = downloads.first { $0.productId == id }
            let when = record?.nextAttemptAt.map { "retrying after \(Self.time($0))" } ?? "retrying later"
            print("\(id): \(record?.lastError ?? "interrupted"); \(when) (kiosk resume)")
        }
        for id in report.interrupted {
            let kept = downloads.first { $0.productId == id }.map { ProgressDisplay.size($0.bytesDone) } ?? "its bytes"
            print("\(id): interrupted; \(kept) kept, kiosk resume continues from there")
        }
        for id in report.paused {
            let kept = downloads.first { $0.productId == id }.map { ProgressDisplay.size($0.bytesDone) } ?? "its bytes"
            print("\(id): paused by another command; \(kept) kept (kiosk resume)")
        }
        for id in report.cancelled {
            print("\(id): cancelled by another command; its partial bytes were deleted")
        }
        for id in report.failed {
            let record = downloads.first { $0.productId == id }
            standardError("\(id): \(record?.lastError ?? "the download failed")")
        }
    }

    static func time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: date)
    }
}

/// Runs `body` in a task that the first SIGINT or SIGTERM cancels; a second one, a moment later,
/// ends the process. The same signal arriving twice at once is one request: `timeout` and a
/// terminal's Ctrl-C send it to the process and to its process group.
func cancellingOnInterrupt<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    let first = Mutex<ContinuousClock.Instant?>(nil)
    let sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            let now = ContinuousClock.now
            let again = first.withLock { earlier -> Bool in
                guard let earlier else {
                    earlier = now
                    return false
                }
                return now - earlier > .milliseconds(500)
            }
            if again {
                // To the process, not this thread (raise(3) would target a dispatch thread that
                // blocks the signal, and it would only sit there pending).
                signal(number, SIG_DFL)
                kill(getpid(), number)
            }
            task.cancel()
        }
        source.resume()
        return source
    }
    defer {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
    return try await task.value
}

/// Progress as a person reads it: bytes, rate and time left.
final class ProgressDisplay: @unchecked Sendable {
    private let interactive: Bool
    private let lock = NSLock()
    private let started = Date()
    private var lastLine = Date.distantPast
    private var shown = false

    init(interactive: Bool) {
        self.interactive = interactive
    }

    func show(_ progress: DownloadProgress) {
        lock.withLock {
            let now = Date()
            guard now.timeIntervalSince(lastLine) >= (interactive ? 0.2 : 2) else { return }
            lastLine = now
            let elapsed = max(0.001, now.timeIntervalSince(started))
            let rate = Double(progress.bytesReceived) / elapsed
            var line = "\(progress.key): \(Self.size(progress.bytesOnDisk))"
            if let total = progress.totalBytes, total > 0 {
                let percent = Int(Double(progress.bytesOnDisk) * 100 / Double(total))
                line += " of \(Self.size(total)) (\(percent)%)"
                if rate > 0 { line += ", \(Int(Double(total - progress.bytesOnDisk) / rate)) s left" }
            }
            line += ", \(Self.size(Int64(rate)))/s"
            if interactive {
                BufferedLog.standardError.write("\r\u{1B}[K\(line)")
                shown = true
            } else {
                BufferedLog.standardError.write("\(line)\n")
            }
        }
    }

    func finish() {
        lock.withLock {
            if shown { BufferedLog.standardError.write("\r\u{1B}[K") }
        }
    }

    /// "0 B", "512 B", "1.5 KiB", "8.0 MiB": binary units, and no "Zero KB".
    static func size(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(String(format: "%.1f", value)) \(units[unit])"
    }
}
