import Dispatch
import Foundation
import Synchronization

/// Threads for blocking libcurl calls, kept a few seconds after their work in case more comes.
///
/// A blocking call must not hold one of Swift's or libdispatch's few pool threads, so each gets a
/// thread of its own (``HTTPClient``). Nothing waits for a free one: work that finds no idle
/// thread starts a new one, as before; a thread whose work is done waits ``keep`` for the next,
/// then ends.
///
/// **Performance layer.** Replaces a thread started and ended per call. The notification outbox
/// deals each pass to up to 32 threads, twice a second or more under purchases: 0.41 threads were
/// started a purchase (`perf stat`, `syscalls:sys_enter_clone3`), each a stack mapped and
/// unmapped; with this, 0.0015 (10 in 6,569 purchases). The CPU a purchase did not move beyond the
/// run-to-run spread of ±10 % (docs/benchmarks.md, 6c, 2026-11-30).
final class SpareThreads: Sendable {
    static let shared = SpareThreads(keep: .seconds(5))

    /// How long a thread waits for more work before it ends.
    let keep: DispatchTimeInterval

    init(keep: DispatchTimeInterval) {
        self.keep = keep
    }

    private typealias Work = @Sendable () -> Void

    /// An idle thread: where to put its next work (and the thread's name while it runs), and the
    /// signal that it is there.
    private final class Idle: Sendable {
        let arrived = DispatchSemaphore(value: 0)
        let work = Mutex<(name: String, work: Work)?>(nil)
    }

    private let idle = Mutex<[Idle]>([])
    /// Threads started so far (for the tests: work after work must not start new ones).
    let started = Atomic<Int>(0)

    /// The threads waiting for work now.
    var idleCount: Int { idle.withLock(\.count) }

    /// Runs `work` on an idle thread, or on a new one when none is idle.
    func run(named name: String, _ work: @escaping @Sendable () -> Void) {
        let taken = idle.withLock { $0.popLast() }
        if let taken {
            taken.work.withLock { $0 = (name, work) }
            taken.arrived.signal()
            return
        }
        started.add(1, ordering: .relaxed)
        let thread = Thread { [self] in
            var next: (name: String, work: Work)? = (name, work)
            while let current = next {
                if Thread.current.name != current.name { Thread.current.name = current.name }
                current.work()
                next = waitForMore()
            }
        }
        thread.start()
    }

    /// Waits up to ``keep`` for more work; nil when none came and the thread should end.
    private func waitForMore() -> (name: String, work: Work)? {
        let me = Idle()
        idle.withLock { $0.append(me) }
        if me.arrived.wait(timeout: .now() + keep) == .timedOut {
            // Still in the list: nobody took it, so it leaves the list and ends. Gone from it:
            // `run` took it just as the wait ran out and is about to signal, so take that work.
            let ended = idle.withLock { list -> Bool in
                guard let index = list.firstIndex(where: { $0 === me }) else { return false }
                list.remove(at: index)
                return true
            }
            if ended { return nil }
            me.arrived.wait()
        }
        return me.work.withLock { work in
            defer { work = nil }
            return work
        }
    }
}
