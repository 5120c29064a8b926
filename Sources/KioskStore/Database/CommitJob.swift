import SQLKit
import Synchronization

/// A write waiting for a commit it shares with others (``GroupCommit``, ``AccountCommits``): its
/// body runs in the shared transaction, and its caller is answered once that commit is durable,
/// with the body's result, or with the error of the body or of the commit.
struct CommitJob: Sendable {
    let run: @Sendable (any SQLDatabase) async throws -> Void
    let finish: @Sendable ((any Error)?) -> Void

    /// Hands a job running `body` to `submit` and waits for its `finish`.
    static func awaiting<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T, submit: (CommitJob) -> Void) async throws -> T {
        let slot = ResultSlot<T>()
        return try await withCheckedThrowingContinuation { continuation in
            submit(CommitJob(
                run: { db in slot.store(try await body(db)) },
                finish: { error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let value = slot.take() {
                        continuation.resume(returning: value)
                    } else {
                        continuation.resume(throwing: CancellationError())
                    }
                }))
        }
    }
}

/// Where a body's result waits for its commit.
private final class ResultSlot<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    func store(_ result: T) { value.withLock { $0 = result } }
    func take() -> T? { value.withLock { $0.take() } }
}
