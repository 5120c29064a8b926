import Foundation
import SQLKit
import Synchronization

/// Group commit for SQLite, the way databases do it for their log: write transactions that arrive
/// while one is committing wait for the next commit, which runs them one after another in a single
/// transaction, each in a savepoint of its own, and answers them all after its one fsync.
///
/// Each caller keeps all-or-nothing: a body that throws is rolled back to its savepoint and gets
/// its error, the others commit; a commit that fails fails every body of the batch (none of it
/// was written). A caller is answered only once its writes are durable. Bodies run in arrival
/// order, each seeing what the earlier ones wrote, exactly as if they had committed one by one.
/// PostgreSQL needs none of this: it groups the WAL flushes of concurrent commits itself.
///
/// **Performance layer.** Replaces one SQLite transaction, and one fsync, per write (SQLiteNIO's
/// pool, then). No before/after of this layer alone is on record: the purchases bench was added
/// in the same commit (5c4fbe1). What is on record (docs/benchmarks.md, 2026-11-23): an fsync
/// here takes 0.6–0.8 ms in a good minute, so writes that each wait for their own are paced by
/// the disk; once concurrent credit packs of one account shared commits instead of taking turns,
/// that account's rate went from 680–960 /s to 1,775–2,448 /s (`GroupCommitTests` shows 16 such
/// writes in fewer than 16 commits).
final class GroupCommit: Sendable {
    typealias Job = CommitJob

    /// The most bodies one commit carries, so that one batch cannot hold the writer for long.
    static let maxBatch = 128

    private let writer: InlineSQLite
    private let checkpointer: WALCheckpointer?
    private let state = Mutex<(queue: [Job], draining: Bool)>(([], false))
    /// Commits made so far (each one fsync), for the tests that show bodies share them.
    let commits = Atomic<Int>(0)

    /// - Parameter checkpointer: copies the WAL into the database file after commits; without one,
    ///   the writer's automatic checkpoint does, inside its commits.
    init(writer: InlineSQLite, checkpointer: WALCheckpointer? = nil) {
        self.writer = writer
        self.checkpointer = checkpointer
    }

    /// Closes the writer's connection and the checkpointer's; no write may follow.
    func close() async {
        await checkpointer?.stop()
        writer.close()
    }

    /// Runs `body` in the next commit and returns its result once that commit is durable.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await CommitJob.awaiting(body) { submit($0) }
    }

    private func submit(_ job: Job) {
        let start = state.withLock { state -> Bool in
            state.queue.append(job)
            guard !state.draining else { return false }
            state.draining = true
            return true
        }
        if start {
            Task { await self.drain() }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { state -> [Job] in
                let batch = Array(state.queue.prefix(Self.maxBatch))
                state.queue.removeFirst(batch.count)
                if batch.isEmpty { state.draining = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            await commit(batch)
        }
    }

    private func commit(_ batch: [Job]) async {
        var outcomes: [(any Error)?] = []
        do {
            try await writer.begin()
            do {
                for job in batch {
                    try writer.run("SAVEPOINT kiosk_job")
                    do {
                        try await job.run(writer)
                        try writer.run("RELEASE kiosk_job")
                        outcomes.append(nil)
                    } catch {
                        try writer.run("ROLLBACK TO kiosk_job")
                        try writer.run("RELEASE kiosk_job")
                        outcomes.append(error)
                    }
                }
                try await writer.commit()
                commits.add(1, ordering: .relaxed)
                checkpointer?.committed()
            } catch {
                await writer.rollback()
                throw error
            }
        } catch {
            for job in batch { job.finish(error) }
            return
        }
        for (job, outcome) in zip(batch, outcomes) { job.finish(outcome) }
    }
}
