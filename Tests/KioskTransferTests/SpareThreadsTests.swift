import Dispatch
import Foundation
import Synchronization
@testable import KioskTransfer
import Testing

@Suite("Spare threads for blocking calls")
struct SpareThreadsTests {
    /// The thread a piece of work ran on, as a number that stays the same while it lives.
    static func threadNumber() -> UInt { UInt(bitPattern: ObjectIdentifier(Thread.current).hashValue) }

    @Test("work after work runs on the thread the first left idle; work that all blocks at once gets a thread each, none waiting for another; an idle thread ends after its keep")
    func reuseAndGrowth() async throws {
        let threads = SpareThreads(keep: .milliseconds(300))
        // One after another, each once the thread before is back waiting: one thread.
        var seen: Set<UInt> = []
        for _ in 0..<20 {
            seen.insert(await withCheckedContinuation { done in threads.run(named: "test") { done.resume(returning: Self.threadNumber()) } })
            for _ in 0..<600 where threads.idleCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(seen.count == 1, "20 calls in turn ran on \(seen.count) threads")
        // Eight at once, each waiting until all eight run: a pool that queued work would never finish.
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let numbers = Mutex<Set<UInt>>([])
        for _ in 0..<8 {
            threads.run(named: "test") {
                numbers.withLock { _ = $0.insert(Self.threadNumber()) }
                started.signal()
                release.wait()
                finished.signal()
            }
        }
        for _ in 0..<8 { #expect(started.wait(timeout: .now() + 30) == .success, "every blocking call started without waiting for another") }
        for _ in 0..<8 { release.signal() }
        for _ in 0..<8 { #expect(finished.wait(timeout: .now() + 30) == .success) }
        #expect(numbers.withLock { $0.count } == 8)
        // They are idle now, then end once their keep runs out.
        for _ in 0..<300 where threads.idleCount > 0 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(threads.idleCount == 0, "idle threads end after their keep")
        // And work still runs after they ended.
        let ran = await withCheckedContinuation { done in threads.run(named: "test") { done.resume(returning: true) } }
        #expect(ran)
    }
}
