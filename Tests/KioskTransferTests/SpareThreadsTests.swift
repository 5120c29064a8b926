import Dispatch
import Foundation
import Synchronization
@testable import KioskTransfer
import Testing

@Suite("Spare threads for blocking calls")
struct SpareThreadsTests {
    /// Runs `body` on `threads` and waits for it.
    static func run<T: Sendable>(_ threads: SpareThreads, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { done in threads.run(named: "test") { done.resume(returning: body()) } }
    }

    @Test("work after work runs on the thread the first left idle: 20 calls in turn start one thread")
    func reuse() async throws {
        let threads = SpareThreads(keep: .seconds(60))
        for _ in 0..<20 {
            _ = await Self.run(threads) { true }
            // The thread goes back to waiting just after it answered: the next call is for it.
            for _ in 0..<1_200 where threads.idleCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(threads.started.load(ordering: .relaxed) == 1, "20 calls in turn started \(threads.started.load(ordering: .relaxed)) threads")
    }

    @Test("eight calls that all block at once get a thread each, none waiting for another")
    func growth() {
        let threads = SpareThreads(keep: .seconds(60))
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<8 {
            threads.run(named: "test") {
                started.signal()
                release.wait()
                finished.signal()
            }
        }
        // A pool that queued work behind busy threads would never start all eight.
        for _ in 0..<8 { #expect(started.wait(timeout: .now() + 60) == .success, "every blocking call started without waiting for another") }
        for _ in 0..<8 { release.signal() }
        for _ in 0..<8 { #expect(finished.wait(timeout: .now() + 60) == .success) }
        #expect(threads.started.load(ordering: .relaxed) == 8)
    }

    @Test("idle threads end after their keep, and work still runs after they did")
    func idleThreadsEnd() async throws {
        let threads = SpareThreads(keep: .milliseconds(50))
        _ = await Self.run(threads) { true }
        for _ in 0..<1_200 where threads.idleCount > 0 || threads.started.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(threads.idleCount == 0, "an idle thread ends after its keep")
        #expect(await Self.run(threads) { true })
    }

    @Test("2,000 calls with a keep that runs out as work is handed over: each runs once, none is lost")
    func handOverAtTheTimeout() async throws {
        let threads = SpareThreads(keep: .microseconds(50))
        let ran = Atomic<Int>(0)
        for _ in 0..<2_000 {
            _ = await Self.run(threads) { ran.add(1, ordering: .relaxed) }
        }
        #expect(ran.load(ordering: .relaxed) == 2_000)
    }
}
