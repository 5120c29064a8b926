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
    /// Paused or cancelled by another command while this run had them.
    public var paused: [String] = []
    public var cancelled: [String] = []
    /// Stopped because the run itself was cancelled (Ctrl-C, an app's Task); due again at once.
    public var interrupted: [String] = []
    /// Installed by another process while this run waited for it.
    public var installedElsewhere: [String] = []
    /// The server no longer has the version asked for (412): the catalog must be synced first.
    public var outdated: [String] = []
    /// Bytes received over the network in this run, across restarts.
    public var bytesReceived: Int64 = 0

    public init(installed: [String] = [], waiting: [String] = [], failed: [String] = [], bytesReceived: Int64 = 0) {
        self.installed = installed
        self.waiting = waiting
        self.failed = failed
        self.bytesReceived = bytesReceived
    }

    /// Adds a later run over some of the same downloads: their latest outcome replaces this one's.
    mutating func absorb(_ later: DownloadRunReport) {
        let rerun = Set(later.installed + later.waiting + later.failed + later.paused + later.cancelled + later.interrupted + later.installedElsewhere)
        func merged(_ mine: [String], _ theirs: [String]) -> [String] { mine.filter { !rerun.contains($0) } + theirs }
        installed = merged(installed, later.installed)
        waiting = merged(waiting, later.waiting)
        failed = merged(failed, later.failed)
        paused = merged(paused, later.paused)
        cancelled = merged(cancelled, later.cancelled)
        interrupted = merged(interrupted, later.interrupted)
        installedElsewhere = merged(installedElsewhere, later.installedElsewhere)
        outdated = later.outdated
        bytesReceived += later.bytesReceived
    }
}

/// The download queue: claims due downloads for this process, runs them, checks the bytes,
/// unpacks and installs them, and schedules whatever failed for later. Every state change goes
/// through ``ClientDatabase``; a download another live process has claimed is never touched.
struct DownloadQueue {
    let database: ClientDatabase
    let home: KioskHome
    let server: String
    let configuration: KioskClient.Configuration
    let owner: ClaimOwner
    let logger: Logger
    /// Signed URLs the store redirected to, reused by resumes until they stop working.
    let contentURLs: ContentURLs

    var installer: LibraryInstaller { LibraryInstaller(library: home.library) }

    func partialFile(_ productId: String) throws -> URL {
        try home.partialFile(productId)
    }

    /// Runs every due download (or only those of `only`) until none is due.
    ///
    /// - Parameter waitForOthers: when another live process holds one of them, wait for it to
    ///   finish (or die) and carry on, instead of downloading the same bytes twice.
    /// - Parameter progress: called on the download thread about twice a second per download.
    func run(only: Set<String>? = nil, waitForOthers: Bool = false, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        let lease = configuration.claimLease
        let heartbeat = Task { [database, owner] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(lease / 3))
                try? database.renewClaims(of: owner, lease: lease)
            }
        }
        defer { heartbeat.cancel() }

        var report = DownloadRunReport()
        // Rounds bound the immediate retries (a restart from zero, a first checksum mismatch).
        var rounds = 0
        var othersWaitedFor = Set<String>()
        while rounds < 4, !Task.isCancelled {
            let due = try database.claimDueDownloads(for: owner, only: only, lease: lease)
            if due.isEmpty {
                let others = try database.downloadsClaimedByOthers(than: owner, only: only)
                guard waitForOthers, !others.isEmpty else { break }
                othersWaitedFor.formUnion(others.map(\.productId))
                try? await Task.sleep(for: .milliseconds(250))
                continue
            }
            rounds += 1
            let (startable, short) = try checkSpace(due)
            for (record, message) in short {
                try scheduleRetry(record, retryAfter: nil, error: message, report: &report)
            }
            let received = ReceivedBytes()
            let requests = try startable.map(request(for:))
            let versions = Dictionary(startable.map { ($0.productId, $0.sha256) }) { first, _ in first }
            let ahead = unpackAhead(startable)
            defer { for unpacking in ahead.values { unpacking.abandon() } }
            let outcomes = await Downloader(concurrency: configuration.concurrency, progressPeriod: configuration.progressPeriod)
                .run(requests) { [database, owner, contentURLs] update in
                    received.note(update)
                    // Bytes of this attempt's answer are on disk: the partial file only grows now.
                    if update.bytesReceived > 0 { ahead[update.key]?.beginReading() }
                    if let url = update.redirectedTo, let version = versions[update.key] {
                        contentURLs.remember(url, for: update.key, version: version)
                    }
                    database.events.publish(.progress(update))
                    progress(update)
                    // A failed write (a busy or full disk) must not stop the transfer itself.
                    return (try? database.recordProgress(update.key, owner: owner, bytesOnDisk: update.bytesOnDisk, etag: update.etag)) ?? true
                }
            report.bytesReceived += received.total
            let signed = Set(requests.filter { !$0.url.hasPrefix(server + "/") }.map(\.key))
            for record in startable {
                let outcome = outcomes[record.productId] ?? .transport(kind: .failed, message: "the download did not run")
                do {
                    if signed.contains(record.productId), case .httpError(let status, _, let message) = outcome, [401, 403, 410].contains(status) {
                        // The signed URL expired (or was revoked at the edge): ask the store for a
                        // fresh one at once and continue from the bytes on disk.
                        contentURLs.forget(record.productId)
                        try move(record.productId, from: [.downloading], to: .queued, [
                            DownloadRecord.Columns.lastError.set(to: "the signed content URL stopped working (\(status): \(message)); asking the store for a new one"),
                        ])
                        continue
                    }
                    try await handle(outcome, for: record, ahead: ahead[record.productId], report: &report)
                } catch is IllegalTransition {
                    // Paused or cancelled under us: the reader's word wins.
                    try noteStoppedElsewhere(record, report: &report)
                }
            }
        }
        for id in othersWaitedFor.sorted() where !report.installed.contains(id) {
            if try database.download(id)?.state == .installed { report.installedElsewhere.append(id) }
        }
        return report
    }

    /// Splits claimed downloads into those the disk has room for and those it has not (with the
    /// message saying how much is needed and where), so none starts that cannot finish.
    private func checkSpace(_ due: [DownloadRecord]) throws -> (startable: [DownloadRecord], short: [(DownloadRecord, String)]) {
        guard var available = DiskSpace.available(at: home.downloads) else { return (due, []) }
        var startable: [DownloadRecord] = []
        var short: [(DownloadRecord, String)] = []
        for record in due {
            let partial = try partialFile(record.productId)
            let onDisk = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64) ?? 0
            let needed = max(0, record.size - onDisk)
            if needed > available {
                short.append((record, DiskSpace.shortfall(needed: needed, available: available, at: home.downloads, for: "the download of \(record.productId)")))
            } else {
                available -= needed
                startable.append(record)
            }
        }
        return (startable, short)
    }

    /// The request for a download: to the store, with the receipt as proof and the version the
    /// catalog promised (whose SHA-256 is checked) as the only one that may arrive; or straight to
    /// the signed URL the store sent an earlier attempt to, which is proof enough and names the
    /// version's archive itself. The receipt never goes to an edge.
    private func request(for record: DownloadRecord) throws -> DownloadRequest {
        let id = record.productId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? record.productId
        var request: DownloadRequest
        if let signed = contentURLs.url(for: record.productId, version: record.sha256) {
            request = DownloadRequest(key: record.productId, url: signed, partialFile: try partialFile(record.productId), etag: record.partialETag)
        } else {
            request = DownloadRequest(
                key: record.productId, url: "\(server)/v1/content/\(id)?version=\(record.sha256)",
                headers: [("Authorization", "Receipt \(record.receipt)")],
                partialFile: try partialFile(record.productId), etag: record.partialETag)
        }
        request.lowSpeedTime = configuration.stallSeconds
        request.maxReceiveSpeed = configuration.maxReceiveSpeed
        return request
    }

    // MARK: Outcomes

    private func handle(_ outcome: DownloadOutcome, for record: DownloadRecord, ahead: UnpackAhead?, report: inout DownloadRunReport) async throws {
        let id = record.productId
        switch outcome {
        case .complete(let size, let sha256, _):
            try verifyAndInstall(record, size: size, sha256: sha256, ahead: ahead, report: &report)
        case .restart(let reason):
            try move(id, from: [.downloading], to: .queued, [Column("partialETag").set(to: nil), Column("bytesDone").set(to: 0), DownloadRecord.Columns.lastError.set(to: reason)])
        case .httpError(412, _, let message):
            try scheduleRetry(record, retryAfter: nil, error: "the content changed on the server (\(message))", report: &report)
            report.outdated.append(id)
        case .httpError(let status, let retryAfter, let message):
            if status == 408 || status == 429 || status >= 500 {
                try scheduleRetry(record, retryAfter: retryAfter, error: "the server answered \(status): \(message)", report: &report)
            } else {
                try fail(record, "the server refused the download (\(status)): \(message)", report: &report)
            }
        case .transport(let kind, let message):
            switch kind {
            case .unreachable, .timedOut, .interrupted, .aborted:
                try scheduleRetry(record, retryAfter: nil, error: message, report: &report)
            case .localWrite:
                let partial = try partialFile(id)
                let onDisk = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64) ?? 0
                let needed = max(0, record.size - onDisk)
                let available = DiskSpace.available(at: home.downloads) ?? 0
                try scheduleRetry(record, retryAfter: nil, error: "\(message); " + DiskSpace.shortfall(
                    needed: needed, available: available, at: home.downloads, for: "the rest of the download"), report: &report)
            case .failed, .tooLarge:
                try fail(record, message, report: &report)
            }
        case .stopped:
            if Task.isCancelled {
                // Interrupted by the reader (Ctrl-C) or the app: keep the bytes, due again at once.
                try move(id, from: [.downloading], to: .waiting, [
                    DownloadRecord.Columns.nextAttemptAt.set(to: Date()),
                    DownloadRecord.Columns.lastError.set(to: "interrupted"),
                ])
                report.interrupted.append(id)
            } else {
                try noteStoppedElsewhere(record, report: &report)
            }
        }
    }

    /// A download this run held was paused or cancelled by another command (or claimed by another
    /// process after our claim lapsed).
    private func noteStoppedElsewhere(_ record: DownloadRecord, report: inout DownloadRunReport) throws {
        switch try database.download(record.productId)?.state {
        case .cancelled?:
            try? FileManager.default.removeItem(at: try partialFile(record.productId))
            report.cancelled.append(record.productId)
        case .paused?:
            report.paused.append(record.productId)
        default:
            break
        }
    }

    /// Tar archives start unpacking into their staging folders as they download, when the library
    /// has room for them; the rest (zip, or a full disk) unpack after their check as before.
    private func unpackAhead(_ records: [DownloadRecord]) -> [String: UnpackAhead] {
        var ahead: [String: UnpackAhead] = [:]
        for record in records where configuration.unpackWhileDownloading && record.format.unpacksAsItArrives {
            guard let available = DiskSpace.available(at: home.library), available >= record.size,
                  let partial = try? partialFile(record.productId),
                  let unpacking = try? installer.startUnpacking(partial, size: record.size, as: record.productId)
            else { continue }
            ahead[record.productId] = unpacking
        }
        return ahead
    }

    private func verifyAndInstall(_ record: DownloadRecord, size: Int64, sha256: String, ahead: UnpackAhead?, report: inout DownloadRunReport) throws {
        let id = record.productId
        try move(id, from: [.downloading], to: .verifying, [Column("bytesDone").set(to: size)])
        let partial = try partialFile(id)
        let onDisk = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64) ?? -1
        guard size == record.size, onDisk == record.size, sha256 == record.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            let detail = "expected \(record.size) bytes with SHA-256 \(record.sha256.prefix(12))…, got \(size) bytes with \(sha256.prefix(12))…"
            if record.mismatches >= 1 {
                try fail(record, "the content failed its checksum twice (\(detail)); run kiosk sync, then kiosk resume", report: &report, from: .verifying, mismatch: true)
            } else {
                try move(id, from: [.verifying], to: .queued, [
                    Column("mismatches").set(to: record.mismatches + 1), Column("partialETag").set(to: nil), Column("bytesDone").set(to: 0),
                    DownloadRecord.Columns.lastError.set(to: "checksum mismatch (\(detail)); downloading again from zero"),
                ])
            }
            return
        }
        // Unpacked content takes at least as much room as the archive: check before writing any.
        if let available = DiskSpace.available(at: home.library), available < record.size {
            try scheduleRetry(record, retryAfter: nil, error: DiskSpace.shortfall(
                needed: record.size, available: available, at: home.library, for: "unpacking \(id)"), report: &report, from: .verifying)
            return
        }
        try move(id, from: [.verifying], to: .unpacking, [])
        let installed: (folder: URL, treeDigest: String)
        do {
            installed = try ahead.map { try installer.install($0, orElse: partial, as: id) } ?? installer.install(partial, as: id)
        } catch UnpackError.noSpace(let entry) {
            let available = DiskSpace.available(at: home.library) ?? 0
            try scheduleRetry(record, retryAfter: nil, error: "the disk filled while unpacking\(entry.map { " \"\($0)\"" } ?? ""); " + DiskSpace.shortfall(
                needed: record.size, available: available, at: home.library, for: "unpacking \(id)"), report: &report, from: .unpacking)
            return
        } catch let error as UnpackError where !error.isHostile {
            try scheduleRetry(record, retryAfter: nil, error: error.description, report: &report, from: .unpacking)
            return
        } catch {
            try? FileManager.default.removeItem(at: partial)
            try fail(record, "\(error)", report: &report, from: .unpacking)
            return
        }
        let item = LibraryItem(productId: id, version: record.version, sha256: record.sha256, path: installed.folder.path, installedAt: Date(), treeDigest: installed.treeDigest)
        _ = try database.markInstalled(item, owner: owner)
        try? FileManager.default.removeItem(at: partial)
        report.installed.append(id)
    }

    private func scheduleRetry(_ record: DownloadRecord, retryAfter: TimeInterval?, error: String, report: inout DownloadRunReport, from state: DownloadState = .downloading) throws {
        let attempts = record.attempts + 1
        let delay = configuration.backoff.delay(afterAttempts: attempts, retryAfter: retryAfter)
        try move(record.productId, from: [state], to: .waiting, [
            DownloadRecord.Columns.attempts.set(to: attempts),
            DownloadRecord.Columns.nextAttemptAt.set(to: Date().addingTimeInterval(delay)),
            DownloadRecord.Columns.lastError.set(to: error),
        ])
        report.waiting.append(record.productId)
    }

    private func fail(_ record: DownloadRecord, _ reason: String, report: inout DownloadRunReport, from state: DownloadState = .downloading, mismatch: Bool = false) throws {
        try move(record.productId, from: [state], to: .failed, [
            DownloadRecord.Columns.attempts.set(to: record.attempts + 1),
            DownloadRecord.Columns.lastError.set(to: reason),
            DownloadRecord.Columns.nextAttemptAt.set(to: nil),
            Column("mismatches").set(to: record.mismatches + (mismatch ? 1 : 0)),
        ])
        report.failed.append(record.productId)
    }

    private func move(_ productId: String, from: Set<DownloadState>, to target: DownloadState, _ assignments: [ColumnAssignment]) throws {
        try database.moveDownload(productId, owner: owner, from: from, to: target, assignments)
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

/// The URLs the store redirected downloads to (signed, short-lived), per product and version.
///
/// Kept in memory only: a URL outlives neither its expiry nor the process, and the store hands
/// out a new one on every request.
final class ContentURLs: @unchecked Sendable {
    private let lock = NSLock()
    private var byProduct: [String: (version: String, url: String)] = [:]

    func remember(_ url: String, for productId: String, version: String) {
        lock.withLock { byProduct[productId] = (version, url) }
    }

    func url(for productId: String, version: String) -> String? {
        lock.withLock { byProduct[productId].flatMap { $0.version == version ? $0.url : nil } }
    }

    func forget(_ productId: String) {
        lock.withLock { _ = byProduct.removeValue(forKey: productId) }
    }
}
