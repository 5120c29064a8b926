import Logging

/// Copies what the group commit wrote to the WAL into the database file, on a connection of its
/// own, after commits (at most every ``pause``), so the writer rarely has to.
///
/// SQLite checkpoints automatically inside the commit that takes the WAL past 1,000 pages, on the
/// committing connection: for the group commit's writer that was 41 % of a commit's time (perf),
/// while every purchase of the next batch waited. A checkpoint on another connection runs beside
/// the writer's transactions (WAL mode lets it); the writer still checkpoints itself past
/// ``writerBackstopPages``, which is what lets the WAL start over from its beginning under a load
/// that never pauses, and by then this one has copied nearly everything.
///
/// Purchases on SQLite (100 accounts, `wrk -c32`, 3 alternating rounds of each, 2026-11-27):
/// 2,643–3,145 a second at p99 18–23 ms with the checkpoint in the writer's commits; 2,987–3,396
/// at p99 18–19 ms with this, pausing 20 ms; 3,402–3,622 at p99 25–34 ms pausing 250 ms (the
/// writer's backstop then has more left to copy); 3,090–3,539 at p99 13–16 ms with no checkpoint
/// at all (a WAL of 1.5 GB after 30 s, not an option).
final class WALCheckpointer: Sendable {
    /// The writer's own automatic checkpoint: a bound on the WAL (about 80 MB), not the rule.
    static let writerBackstopPages = 20_000
    /// The least time between two checkpoints: a burst of commits asks for one, not one each.
    static let pause: Duration = .milliseconds(20)

    private let commits: AsyncStream<Void>.Continuation
    private let task: Task<Void, Never>

    /// - Parameter connection: a connection to the store's file of its own, closed by ``stop()``.
    init(connection: InlineSQLite, logger: Logger) {
        let (stream, commits) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.commits = commits
        task = Task {
            for await _ in stream {
                do {
                    try await connection.checkpoint()
                } catch {
                    // Another checkpoint (the writer's backstop) holds the lock: the next commit asks again.
                    logger.debug("a background checkpoint did not run", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: Self.pause)
            }
            connection.close()
        }
    }

    /// A commit added pages to the WAL.
    func committed() {
        commits.yield()
    }

    /// Lets a running checkpoint finish, then closes the connection.
    func stop() async {
        commits.finish()
        await task.value
    }

    /// A checkpointer dropped without ``stop()`` (its database was not closed) still ends its task
    /// and closes its connection.
    deinit {
        commits.finish()
    }
}
