import Foundation
import GRDB
import KioskArchive
import KioskCore
import KioskTransfer
import Logging

/// What one run of the download queue did.
public struct DownloadRunReport: Sendable, Equatable {
    public var installed: [String] = []
    public var waiting: [String] = []
    public var failed: [String] = []
    /// Bytes received over the network in this run, across restarts.
    public var bytesReceived: Int64 = 0

    public init(installed: [String] = [], waiting: [String] = [], failed: [String] = [], bytesReceived: Int64 = 0) {
        self.installed = installed
        self.waiting = waiting
        self.failed = failed
        self.bytesReceived = bytesReceived
    }
}

/// Transfer settings from the environment, for slow links and for tests that interrupt downloads.
public struct DownloadTuning: Sendable {
    public var lowSpeedTime = 30
    public var maxReceiveSpeed: Int64?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let value = environment["KIOSK_STALL_SECONDS"].flatMap(Int.init) { lowSpeedTime = value }
        maxReceiveSpeed = environment["KIOSK_MAX_RECEIVE_SPEED"].flatMap(Int64.init)
    }
}

/// The download queue: runs due downloads, checks the bytes, unpacks and installs them, and
/// schedules whatever failed for later, persisting every state change.
struct DownloadQueue {
    let database: ClientDatabase
    let home: KioskHome
    let server: String
    let logger: Logger
    var concurrency = 3
    var backoff = Backoff()
    var tuning = DownloadTuning()

    func partialFile(_ productId: String) -> URL {
        home.downloads.appendingPathComponent("\(productId).partial")
    }

    // MARK: Queueing

    /// Queues the content of `product`, presenting `receipt`; nothing to do if that version is installed.
    func enqueue(_ product: Product, receipt: String) async throws {
        guard let content = product.content else { return }
        let now = Date()
        try await database.pool.write { db in
            if var existing = try DownloadRecord.fetchOne(db, key: product.id) {
                guard existing.state != .installed || existing.sha256 != content.sha256 else { return }
                if [.downloading, .verifying, .unpacking].contains(existing.state), existing.sha256 == content.sha256 { return }
                existing.state = .queued
                existing.sha256 = content.sha256
                existing.size = content.size
                existing.version = content.version
                existing.format = content.format
                existing.receipt = receipt
                existing.attempts = 0
                existing.mismatches = 0
                existing.nextAttemptAt = nil
                existing.lastError = nil
                existing.updatedAt = now
                try existing.update(db)
            } else {
                try DownloadRecord(
                    productId: product.id, state: .queued, sha256: content.sha256, size: content.size,
                    version: content.version, format: content.format, receipt: receipt, bytesDone: 0,
                    partialETag: nil, attempts: 0, nextAttemptAt: nil, lastError: nil, mismatches: 0,
                    createdAt: now, updatedAt: now
                ).insert(db)
            }
        }
    }

    /// Stops a download; it keeps its bytes and continues from them after `kiosk resume`.
    func pause(_ productId: String) async throws -> DownloadRecord {
        try await setState(productId, to: .paused, allowedFrom: [.queued, .waiting, .downloading, .failed])
    }

    /// Cancels a download and deletes its partial bytes.
    func cancel(_ productId: String) async throws -> DownloadRecord {
        let record = try await setState(productId, to: .cancelled, allowedFrom: [.queued, .waiting, .downloading, .paused, .failed])
        try? FileManager.default.removeItem(at: partialFile(productId))
        return record
    }

    /// Puts paused downloads back in the queue.
    func unpauseAll() async throws {
        try await database.pool.write { db in
            try DownloadRecord.filter(DownloadRecord.Columns.state == DownloadState.paused.rawValue)
                .updateAll(db, Column("state").set(to: DownloadState.queued.rawValue))
        }
    }

    private func setState(_ productId: String, to state: DownloadState, allowedFrom: [DownloadState]) async throws -> DownloadRecord {
        try await database.pool.write { db in
            guard var record = try DownloadRecord.fetchOne(db, key: productId) else {
                throw ClientError.invalidRequest("no download of \(productId); see `kiosk downloads`")
            }
            guard allowedFrom.contains(record.state) else {
                throw ClientError.invalidRequest("the download of \(productId) is \(record.state.rawValue) and cannot be \(state.rawValue)")
            }
            record.state = state
            record.updatedAt = Date()
            try record.update(db)
            return record
        }
    }

    /// When the next waiting download is due, if any is waiting.
    func nextAttempt() async throws -> Date? {
        try await database.pool.read { db in
            try Date.fetchOne(db, DownloadRecord
                .filter(DownloadRecord.Columns.state == DownloadState.waiting.rawValue)
                .select(min(DownloadRecord.Columns.nextAttemptAt)))
        }
    }

    // MARK: Running

    /// Runs every due download (or only `only`), retrying at once after a restart or a first mismatch.
    func runDue(only: Set<String>? = nil, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        LibraryInstaller(library: home.library).recoverInterruptedSwaps()
        var report = DownloadRunReport()
        // Rounds bound the immediate retries (a restart from zero, a first checksum mismatch).
        for _ in 0..<4 {
            let due = try await claimDue(only: only)
            guard !due.isEmpty else { break }
            let requests = due.map(request(for:))
            let database = self.database
            let received = ReceivedBytes()
            let outcomes = await Downloader(concurrency: concurrency).run(requests) { update in
                received.note(update)
                progress(update)
                return Self.recordProgress(update, in: database)
            }
            report.bytesReceived += received.total
            for record in due {
                let outcome = outcomes[record.productId] ?? .transport(kind: .failed, message: "the download did not run")
                try await handle(outcome, for: record, report: &report)
            }
        }
        return report
    }

    /// Marks due downloads `downloading` in one transaction and returns them.
    private func claimDue(only: Set<String>?) async throws -> [DownloadRecord] {
        let now = Date()
        return try await database.pool.write { db in
            let ready = [DownloadState.queued] + DownloadState.interrupted
            var due = try DownloadRecord
                .filter(ready.map(\.rawValue).contains(DownloadRecord.Columns.state)
                    || (DownloadRecord.Columns.state == DownloadState.waiting.rawValue && DownloadRecord.Columns.nextAttemptAt <= now))
                .order(DownloadRecord.Columns.productId)
                .fetchAll(db)
            if let only { due = due.filter { only.contains($0.productId) } }
            for index in due.indices {
                due[index].state = .downloading
                due[index].updatedAt = now
                try due[index].update(db)
            }
            return due
        }
    }

    private func request(for record: DownloadRecord) -> DownloadRequest {
        let id = record.productId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? record.productId
        var request = DownloadRequest(
            key: record.productId, url: "\(server)/v1/content/\(id)",
            headers: [("Authorization", "Receipt \(record.receipt)")],
            partialFile: partialFile(record.productId), etag: record.partialETag)
        request.lowSpeedTime = tuning.lowSpeedTime
        request.maxReceiveSpeed = tuning.maxReceiveSpeed
        return request
    }

    /// Commits progress (called on the download thread) and says whether to go on: a download
    /// paused or cancelled by another command stops at its next progress report.
    static func recordProgress(_ progress: DownloadProgress, in database: ClientDatabase) -> Bool {
        let state = try? database.pool.write { db -> DownloadState? in
            guard var record = try DownloadRecord.fetchOne(db, key: progress.key) else { return nil }
            record.bytesDone = progress.bytesOnDisk
            record.partialETag = progress.bytesOnDisk > 0 ? progress.etag : nil
            record.updatedAt = Date()
            try record.update(db)
            return record.state
        }
        return state == nil || state == .downloading
    }

    // MARK: Outcomes

    private func handle(_ outcome: DownloadOutcome, for record: DownloadRecord, report: inout DownloadRunReport) async throws {
        switch outcome {
        case .complete(let size, let sha256, _):
            try await verifyAndInstall(record, size: size, sha256: sha256, report: &report)
        case .restart(let reason):
            try await update(record.productId) { $0.state = .queued; $0.partialETag = nil; $0.bytesDone = 0; $0.lastError = reason }
        case .httpError(let status, let retryAfter, let message):
            if status == 408 || status == 429 || status >= 500 {
                try await scheduleRetry(record, retryAfter: retryAfter, error: "the server answered \(status): \(message)", report: &report)
            } else {
                try await fail(record, "the server refused the download (\(status)): \(message)", report: &report)
            }
        case .transport(let kind, let message):
            switch kind {
            case .unreachable, .timedOut, .interrupted, .aborted:
                try await scheduleRetry(record, retryAfter: nil, error: message, report: &report)
            case .localWrite:
                try await scheduleRetry(record, retryAfter: nil, error: "\(message); free some disk space, then run kiosk resume", report: &report)
            case .failed:
                try await fail(record, message, report: &report)
            }
        case .stopped:
            if try await database.pool.read({ try DownloadRecord.fetchOne($0, key: record.productId)?.state }) == .cancelled {
                try? FileManager.default.removeItem(at: partialFile(record.productId))
            }
        }
    }

    private func verifyAndInstall(_ record: DownloadRecord, size: Int64, sha256: String, report: inout DownloadRunReport) async throws {
        try await update(record.productId) { $0.state = .verifying; $0.bytesDone = size }
        let partial = partialFile(record.productId)
        guard size == record.size, sha256 == record.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            let detail = "expected \(record.size) bytes with SHA-256 \(record.sha256.prefix(12))…, got \(size) bytes with \(sha256.prefix(12))…"
            if record.mismatches >= 1 {
                try await fail(record, "the content failed its checksum twice (\(detail)); run kiosk sync, then kiosk resume", report: &report, mismatch: true)
            } else {
                try await update(record.productId) {
                    $0.state = .queued; $0.mismatches += 1; $0.partialETag = nil; $0.bytesDone = 0
                    $0.lastError = "checksum mismatch (\(detail)); downloading again from zero"
                }
            }
            return
        }
        try await update(record.productId) { $0.state = .unpacking }
        let installed: URL
        do {
            installed = try LibraryInstaller(library: home.library).install(partial, as: record.productId)
        } catch let error as UnpackError where !error.isHostile {
            try await scheduleRetry(record, retryAfter: nil, error: error.description, report: &report)
            return
        } catch {
            try? FileManager.default.removeItem(at: partial)
            try await fail(record, "\(error)", report: &report)
            return
        }
        try? FileManager.default.removeItem(at: partial)
        let now = Date()
        try await database.pool.write { db in
            try LibraryItem(productId: record.productId, version: record.version, sha256: record.sha256, path: installed.path, installedAt: now).save(db)
            guard var current = try DownloadRecord.fetchOne(db, key: record.productId) else { return }
            current.state = .installed
            current.lastError = nil
            current.partialETag = nil
            current.updatedAt = now
            try current.update(db)
        }
        report.installed.append(record.productId)
    }

    private func scheduleRetry(_ record: DownloadRecord, retryAfter: TimeInterval?, error: String, report: inout DownloadRunReport) async throws {
        let attempts = record.attempts + 1
        let delay = backoff.delay(afterAttempts: attempts, retryAfter: retryAfter)
        try await update(record.productId) {
            $0.state = .waiting
            $0.attempts = attempts
            $0.nextAttemptAt = Date().addingTimeInterval(delay)
            $0.lastError = error
        }
        report.waiting.append(record.productId)
    }

    private func fail(_ record: DownloadRecord, _ reason: String, report: inout DownloadRunReport, mismatch: Bool = false) async throws {
        try await update(record.productId) {
            $0.state = .failed
            $0.attempts += 1
            $0.lastError = reason
            $0.nextAttemptAt = nil
            if mismatch { $0.mismatches += 1 }
        }
        report.failed.append(record.productId)
    }

    private func update(_ productId: String, _ change: @escaping @Sendable (inout DownloadRecord) -> Void) async throws {
        try await database.pool.write { db in
            guard var record = try DownloadRecord.fetchOne(db, key: productId) else { return }
            // A pause or cancel from another command wins over what this run found.
            if record.state == .paused || record.state == .cancelled { return }
            change(&record)
            record.updatedAt = Date()
            try record.update(db)
        }
    }
}

/// Bytes received per download in one run, noted from the download thread.
final class ReceivedBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: Int64] = [:]

    func note(_ progress: DownloadProgress) {
        lock.withLock { byKey[progress.key] = max(byKey[progress.key] ?? 0, progress.bytesReceived) }
    }

    var total: Int64 {
        lock.withLock { byKey.values.reduce(0, +) }
    }
}
