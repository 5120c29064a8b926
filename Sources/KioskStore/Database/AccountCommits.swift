import Logging
import Tracing
import SQLKit
import Synchronization

/// PostgreSQL only: one account's purchase statements that arrive while one of its statements is
/// committing wait and then commit together, in one statement (``StatementBatch``), one
/// transaction, one WAL flush for all of them.
///
/// Each purchase updates its account's row, so PostgreSQL runs one account's purchases one after
/// another, each holding the row's lock through its own commit's flush: one account's rate was the
/// disk's flush rate and its 32 waiting clients queued behind it. Sharing a commit, the lock is
/// held for the batch's one round trip and one flush.
///
/// A statement that writes nothing (the account moved: a compare-and-set that did not hold) is
/// no error: its caller decides again, as it would have alone. A statement PostgreSQL refuses
/// (a unique index: a replayed key) aborts its whole transaction, so the batch is rolled back and
/// each of its statements is run again alone, each answered with its own outcome: all or nothing
/// for each caller, as before. A failure of the connection or the pool fails the batch's callers
/// with it, as it would have failed each alone, rather than retrying them one after another.
///
/// A batch's statements run in the order of their products, not of their arrival (concurrent
/// requests have no order of their own): each also adds to the day's sales row of its product in
/// the account's slot (``SalesSlot``), shared with other accounts, and a batch holds those rows to
/// its commit. Taken in one order by every batch, they cannot deadlock two batches; other accounts
/// of the slot buying the same product wait for a batch's commit where they waited for one
/// statement's. SQLite needs none of this (``GroupCommit`` shares every write's commit there).
///
/// **Performance layer.** Replaces one commit per purchase of an account (a single statement on
/// a pooled connection). The figure (`BENCH_ONLY=purchases`, one account, 32 clients, 5 windows
/// of 8 s, 2026-11-27): 847–953 purchases a second at p99 133–158 ms before, 1,245 /s at p99 44 ms
/// after (`make bench-compare BEFORE=7c48494`, 16:42; docs/benchmarks.md). Its statements then
/// went a round trip each; since they go as one (``StatementBatch``), see the figures there.
final class AccountCommits: Sendable {
    private struct Job: Sendable {
        let purchase: RecordPurchase
        let finish: @Sendable (Result<(TransactionRecord, credits: Int)?, any Error>) -> Void
        /// What orders a batch: the product the statement sells.
        var order: String { purchase.record.productId }
    }

    /// The most statements one commit carries, so that one account holds a connection, and the
    /// sales rows it shares, for a short while at most.
    static let maxBatch = 32

    private let database: ServerDatabase
    private let logger: Logger
    private let batch = StatementBatch.recordPurchases
    private let queues = Mutex<[String: [Job]]>([:])
    /// Commits of more than one statement so far, for the tests that show statements share them.
    let sharedCommits = Atomic<Int>(0)

    init(database: ServerDatabase, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Records `purchase` in the next commit of its account's purchases, once that commit is durable.
    /// - Returns: the transaction as recorded and the account's new balance, or nil when it wrote
    ///   nothing (the account had moved on).
    func record(_ purchase: RecordPurchase) async throws -> (TransactionRecord, credits: Int)? {
        guard ServiceContext.current != nil else { return try await enqueue(purchase) }
        return try await withSpan("database purchase commit", ofKind: .client) { span in
            span.attributes["db.system.name"] = database.engine == .postgres ? "postgresql" : "sqlite"
            return try await enqueue(purchase)
        }
    }

    private func enqueue(_ purchase: RecordPurchase) async throws -> (TransactionRecord, credits: Int)? {
        let account = purchase.record.accountId
        return try await withCheckedThrowingContinuation { continuation in
            let job = Job(purchase: purchase) { continuation.resume(with: $0) }
            let starts = queues.withLock { queues -> Bool in
                if queues[account] != nil {
                    queues[account]?.append(job)
                    return false
                }
                queues[account] = []
                return true
            }
            guard starts else { return }
            // The drain commits other requests' purchases too: its own spans belong to no one request's trace.
            Task { await ServiceContext.$current.withValue(nil) { await self.drain(account, first: job) } }
        }
    }

    /// Runs `first` alone, then whatever of the account arrived meanwhile, a batch at a time,
    /// until nothing waits; then the account has no queue and its next statement starts afresh.
    private func drain(_ account: String, first: Job) async {
        await commit([first])
        while true {
            let batch = queues.withLock { queues -> [Job] in
                let waiting = queues[account] ?? []
                let batch = Array(waiting.prefix(Self.maxBatch))
                if batch.isEmpty {
                    queues[account] = nil
                } else {
                    queues[account] = Array(waiting.dropFirst(batch.count))
                }
                return batch
            }
            guard !batch.isEmpty else { return }
            await commit(batch)
        }
    }

    private func commit(_ arrived: [Job]) async {
        if arrived.count == 1 {
            await alone(arrived[0])
            return
        }
        let jobs = arrived.enumerated().sorted { ($0.element.order, $0.offset) < ($1.element.order, $1.offset) }.map(\.element)
        let answers: [[Int64]?]
        do {
            answers = try await database.statement { [batch] db in try await batch.run(jobs.map(\.purchase.plan), on: db) }
            sharedCommits.add(1, ordering: .relaxed)
        } catch where database.isStatementRefusal(error) {
            // Nothing of the batch was written: each statement again, alone, for its own outcome.
            // A replayed key is expected; anything else (the function dropped or not ours to run)
            // costs every batch a round trip until mended, so it is said. A function dropped since
            // the start (by hand) is put back for the batches after this.
            if !database.isUniqueViolation(error) {
                logger.warning("a batch of one account's purchases was refused; they were written one by one",
                               metadata: ["problem": "\(ServerDatabase.describe(error))", "purchases": "\(jobs.count)"])
            }
            if database.sqlState(of: error) == "42883" { try? await batch.install(on: database) }
            for job in jobs { await alone(job) }
            return
        } catch {
            for job in jobs { job.finish(.failure(error)) }
            return
        }
        for (job, answer) in zip(jobs, answers) { job.finish(.success(answer.map(job.purchase.recorded))) }
    }

    private func alone(_ job: Job) async {
        do {
            job.finish(.success(try await database.statement { db in try await TransactionRows(db).record(job.purchase) }))
        } catch {
            job.finish(.failure(error))
        }
    }
}
