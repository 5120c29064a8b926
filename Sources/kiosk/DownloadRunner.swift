import Foundation
import Synchronization
import KioskCommandLine
import KioskClient
import KioskCore
import KioskTransfer

/// Shows a command's downloads as they run and says how they ended: progress goes to stderr (a
/// bar on a terminal, a line every few seconds otherwise, as curl does), outcomes to stdout.
/// Progress, and the moment a purchase's receipt is saved, come from the engine's event stream.
struct DownloadRunner {
    /// Where the outcome lines are read, which decides what they suggest doing next.
    enum Context {
        /// `buy`, `redeem`, `restore`: a later `kiosk resume` carries on what waits.
        case command
        /// `kiosk resume` itself (`waits` with --wait): it never tells the reader to run kiosk resume.
        case resume(waits: Bool)
    }

    let client: KioskClient
    var context = Context.command
    /// Says "transaction …: purchased …; receipt saved" as soon as that is true (buy, redeem):
    /// the one place that says it, from the event that brings the committed receipt.
    var announcesPurchases = false
    /// The progress line: taken off the terminal before any outcome line is printed, so an outcome
    /// never runs into it.
    let display = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb")

    /// Runs `body` (which downloads) while printing progress from the client's events. Ctrl-C or
    /// SIGTERM cancels the command (see `Kiosk.main`), which stops the transfers at once with
    /// their bytes kept.
    func showingProgress<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let watch = watch()
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        await watch.end()
        return try outcome.get()
    }

    /// Progress (and, for `buy` and `redeem`, the purchase's line) shown from the client's events
    /// from now until ``Watch/end()``: a command calls the engine itself between the two.
    func watch() -> Watch {
        let display = display
        let subscription = client.subscribe()
        let announces = announcesPurchases
        let watcher = Task {
            for await event in subscription.events {
                switch event {
                case .progress(let progress):
                    display.show(progress)
                case .transaction(let record) where announces && record.state == .purchased && record.idempotencyKey != nil
                        && record.paymentMethod != PaymentRecord.notCharged:
                    // (A re-buy the store charged nothing for is said by the report: "already owned".)
                    // The receipt is committed: say so now, before the download that follows.
                    display.clear()
                    Self.printPurchased(record)
                    fflush(nil)  // stdout may be a pipe: the line must be out now, not at exit
                default:
                    continue
                }
            }
        }
        return Watch(subscription: subscription, watcher: watcher, display: display)
    }

    /// The events being shown for one command's work.
    struct Watch {
        let subscription: EventSubscription
        let watcher: Task<Void, Never>
        let display: ProgressDisplay

        /// Ends the watch after the events the work published, which are still shown (the
        /// receipt's line among them), so nothing it prints can come after the report.
        func end() async {
            subscription.end()
            await watcher.value
            display.finish()
        }
    }

    /// Prints what was installed, waits, failed or stopped (the exit status is the engine's
    /// ``WorkOutcome``, not decided here).
    func report(_ report: DownloadRunReport) {
        display.clear()
        let library = (try? client.libraryEntries()) ?? []
        let downloads = (try? client.downloads()) ?? []
        for id in report.installed {
            let path = library.first { $0.item.productId == id }?.item.path ?? "the library"
            let note = downloads.first { $0.productId == id }?.transferNote.map { " (\($0))" } ?? ""
            print("installed \(id) in \(path)\(note)")
        }
        for id in report.installedElsewhere {
            print("installed \(id) (downloaded by another kiosk process)")
        }
        if report.bytesReceived > 0 {
            print("received \(report.bytesReceived) bytes")
        }
        for id in report.waiting {
            let record = downloads.first { $0.productId == id }
            let reason = record?.lastError ?? "interrupted"
            let when = record?.nextAttemptAt.map(Self.time)
            switch context {
            case .command:
                print("\(id): \(reason); \(when.map { "retrying after \($0)" } ?? "retrying later") (kiosk resume)")
            case .resume(waits: true):
                print("\(id): \(reason); \(when.map { "retrying after \($0)" } ?? "retrying later")")
            case .resume(waits: false):
                print("\(id): \(reason); \(when.map { "due again after \($0)" } ?? "due again later") (--wait waits for it)")
            }
        }
        for id in report.interrupted {
            let kept = downloads.first { $0.productId == id }.map { ByteCount.text($0.bytesDone) } ?? "its bytes"
            switch context {
            case .command: print("\(id): interrupted; \(kept) kept, kiosk resume continues from there")
            case .resume: print("\(id): interrupted; \(kept) kept, the same command continues from there")
            }
        }
        for id in report.paused {
            let kept = downloads.first { $0.productId == id }.map { ByteCount.text($0.bytesDone) } ?? "its bytes"
            switch context {
            case .command: print("\(id): paused by another command; \(kept) kept (kiosk resume)")
            case .resume: print("\(id): paused by another command; \(kept) kept until it is resumed")
            }
        }
        for id in report.cancelled {
            print("\(id): cancelled by another command; its partial bytes were deleted")
        }
        for id in report.failed {
            let record = downloads.first { $0.productId == id }
            standardError("\(id): \(record?.lastError ?? "the download failed")")
        }
    }

    /// Prints one outcome line on stdout, off the progress line.
    func say(_ line: String) {
        display.clear()
        print(line)
        fflush(nil)
    }

    static func time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: date)
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later; call it
/// from `main` before any other thread exists. A blocked signal waits, pending, until
/// ``cancellingOnInterrupt(_:)``'s sources read it (libdispatch reads signals through a signalfd,
/// which sees only signals every thread blocks). It replaces `signal(SIG_IGN)` before each source:
/// a Ctrl-C that came in the 5 ms between that and libdispatch's signalfd was thrown away, and the
/// command went on as if none had come (2 of 41 tries at 10–11 ms after start).
func blockInterrupts() {
    var interrupts = sigset_t()
    sigemptyset(&interrupts)
    sigaddset(&interrupts, SIGINT)
    sigaddset(&interrupts, SIGTERM)
    pthread_sigmask(SIG_BLOCK, &interrupts, nil)
}

/// Runs `body` in a task that the first SIGINT or SIGTERM cancels; a second one, a moment later,
/// ends the process. The same signal arriving twice at once is one request: `timeout` and a
/// terminal's Ctrl-C send it to the process and to its process group. The signals must be
/// blocked already (``blockInterrupts()``), and they stay blocked when it returns, with nothing
/// left to read them: `kiosk` ends the process inside `body` (``CommandMain/run``), so a caller
/// that goes on afterwards must unblock them itself.
func cancellingOnInterrupt<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    let first = Mutex<ContinuousClock.Instant?>(nil)
    let sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
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
                // Dies of the signal, as it would have without this: unblocked in this thread
                // alone and raised to this thread, so the signalfd cannot read it first.
                signal(number, SIG_DFL)
                var only = sigset_t()
                sigemptyset(&only)
                sigaddset(&only, number)
                pthread_sigmask(SIG_UNBLOCK, &only, nil)
                raise(number)
            }
            task.cancel()
        }
        source.resume()
        return source
    }
    defer {
        for source in sources { source.cancel() }
    }
    // The body runs in its own Task so a signal can cancel it; a cancellation of the caller's task
    // (an outer `cancellingOnInterrupt`, an app's task) reaches it as well.
    return try await withTaskCancellationHandler {
        try await task.value
    } onCancel: {
        task.cancel()
    }
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
        // "0 B, 0 B/s" says nothing, and would come before a one-line error such as a 404.
        guard progress.bytesOnDisk > 0 || progress.bytesReceived > 0 else { return }
        lock.withLock {
            let now = Date()
            guard now.timeIntervalSince(lastLine) >= (interactive ? 0.2 : 2) else { return }
            lastLine = now
            let elapsed = max(0.001, now.timeIntervalSince(started))
            let rate = Double(progress.bytesReceived) / elapsed
            var line = "\(progress.key): \(ByteCount.text(progress.bytesOnDisk))"
            if let total = progress.totalBytes, total > 0 {
                let percent = Int(Double(progress.bytesOnDisk) * 100 / Double(total))
                line += " of \(ByteCount.text(total)) (\(percent)%)"
                if rate > 0 { line += ", \(Int(Double(total - progress.bytesOnDisk) / rate)) s left" }
            }
            line += ", \(ByteCount.text(Int64(rate)))/s"
            if interactive {
                BufferedLog.standardError.write("\r\u{1B}[K\(line)")
                shown = true
            } else {
                BufferedLog.standardError.write("\(line)\n")
            }
        }
    }

    func finish() {
        clear()
    }

    /// Takes the progress line off the terminal, so a line printed now stands alone; the next
    /// progress report draws it again.
    func clear() {
        lock.withLock {
            if shown {
                BufferedLog.standardError.write("\r\u{1B}[K")
                BufferedLog.standardError.flush()
                shown = false
            }
        }
    }
}
