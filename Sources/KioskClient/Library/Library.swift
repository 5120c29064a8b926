import Foundation
import KioskArchive
import KioskCore
import KioskTransfer
import Logging

/// What one run of the library's downloads did.
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

/// The library, the client's other owner: download rows, partial files, staging and `Library/`.
/// It claims due downloads for this process, runs them, checks the bytes, unpacks and installs
/// them, and schedules whatever failed for later; a download another live process has claimed is
/// never touched. It never reads or writes a purchase: what it needs of one (a receipt to present)
/// the flows hand it.
struct Library {
    let database: ClientDatabase
    let home: KioskHome
    let server: StoreServer
    let configuration: KioskClient.Configuration
    let owner: ClaimOwner
    let logger: Logger
    /// Signed URLs the store redirected to, reused by resumes until they stop working.
    let contentURLs: ContentURLs

    var installer: LibraryInstaller { LibraryInstaller(library: home.library) }
    /// This owner's rows; nothing else writes them.
    private var rows: DownloadRows { DownloadRows(database: database) }
    /// Updates that fetch only what changed; they build, this owner records and installs.
    private var updates: Updates { Updates(database: database, home: home, installer: installer, configuration: configuration, logger: logger) }

    func partialFile(_ productId: String) throws -> URL {
        try home.partialFile(productId)
    }

    /// Runs every due download (or only those of `only`) until none is due.
    ///
    /// - Parameter waitForOthers: when another live process holds one of them, wait for it to
    ///   finish (or die) and carry on, instead of downloading the same bytes twice.
    /// - Parameter progress: called about twice a second per download, as this run reads the transfers' reports.
    /// - Parameter keepingFree: bytes the downloads must leave free on the disk (the agent's storage
    ///   floor); one that would take the disk below it waits, as one that does not fit does.
    func run(only: Set<String>? = nil, waitForOthers: Bool = false, keepingFree: Int64 = 0, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) async throws -> DownloadRunReport {
        let server = try self.server.base()
        let lease = configuration.claimLease
        let heartbeat = Task { [rows, owner] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(lease / 3))
                try? rows.renewClaims(of: owner, lease: lease)
            }
        }
        defer { heartbeat.cancel() }

        var report = DownloadRunReport()
        // Rounds bound the immediate retries (a restart from zero, a first checksum mismatch).
        var rounds = 0
        var othersWaitedFor = Set<String>()
        while rounds < 4, !Task.isCancelled {
            let claimed = try inTurn(rows.claimDueDownloads(for: owner, only: only, lease: lease))
            if claimed.isEmpty {
                let others = try rows.downloadsClaimedByOthers(than: owner, only: only)
                guard waitForOthers, !others.isEmpty else { break }
                othersWaitedFor.formUnion(others.map(\.productId))
                try? await Task.sleep(for: .milliseconds(250))
                continue
            }
            rounds += 1
            let claims = Dictionary(claimed.map { ($0.claim.productId, $0.claim) }) { first, _ in first }
            let startable = try await prepare(claimed, claims: claims, server: server, keepingFree: keepingFree, report: &report)
            let (held, requests) = try openHeld(startable, claims: claims, server: server, report: &report)
            let ahead = unpackAhead(held, claims: claims)
            defer { for unpacking in ahead.values { unpacking.abandon() } }
            let outcomes = await transfer(requests, claims: claims, versions: Dictionary(held.map { ($0.productId, $0.sha256) }) { first, _ in first },
                                          ahead: ahead, progress: progress, report: &report)
            let signed = Set(requests.filter { !$0.url.hasPrefix(server + "/") }.map(\.key))
            for record in held {
                guard let claim = claims[record.productId] else { continue }
                try settle(record, outcomes[record.productId] ?? .transport(kind: .failed, message: "the download did not run"),
                           claim: claim, signedURL: signed.contains(record.productId), ahead: ahead[record.productId], report: &report)
            }
        }
        for id in othersWaitedFor.sorted() where !report.installed.contains(id) {
            if try rows.download(id)?.state == .installed { report.installedElsewhere.append(id) }
        }
        return report
    }

    /// A round's downloads in the order they start and take the disk's room: first what the reader
    /// bought or asked for (a purchase of the product itself, not yet installed), then issues newest
    /// first, then the rest (a subscription's older issues, updates) by product.
    private func inTurn(_ claimed: [DownloadRows.ClaimedDownload]) throws -> [DownloadRows.ClaimedDownload] {
        guard claimed.count > 1 else { return claimed }
        let installed = Set(try rows.libraryItems().map(\.productId))
        let keys = try claimed.map { download -> (own: Bool, day: Int, id: String) in
            let record = download.record
            let own = try record.transactionId.map { transaction in
                try database.read { db in
                    try Bool.fetchOne(db, sql: "SELECT 1 FROM payment WHERE transactionId = ? AND productId = ?", arguments: [transaction, record.productId]) ?? false
                }
            } ?? false
            let day = try database.cachedProduct(record.productId)?.publicationDate.flatMap(IssueDate.day) ?? Int.min
            return (own && !installed.contains(record.productId), day, record.productId)
        }
        return zip(claimed, keys).sorted { a, b in
            if a.1.own != b.1.own { return a.1.own }
            if a.1.day != b.1.day { return a.1.day > b.1.day }
            return a.1.id < b.1.id
        }.map(\.0)
    }

    /// Readies a round's claimed downloads: leftovers swept, a partial file another process left
    /// taken over, a resumed one checked against its manifest, the room checked, and the updates
    /// that fetch only what changed tried. Returns those left for the ordinary transfer.
    private func prepare(_ claimed: [DownloadRows.ClaimedDownload], claims: [String: DownloadClaim], server: String, keepingFree: Int64, report: inout DownloadRunReport) async throws -> [DownloadRecord] {
        var due: [DownloadRecord] = []
        for var download in claimed {
            installer.sweepLeftovers(of: download.claim.productId)
            if let noRoom = try takeOverPartial(&download) {
                try scheduleRetry(download.record, download.claim, retryAfter: nil, error: noRoom, report: &report)
                continue
            }
            try await checkPartial(&download, server: server)
            due.append(download.record)
        }
        let (spaced, short) = try checkSpace(due, keepingFree: keepingFree)
        for (record, message) in short {
            try scheduleRetry(record, claims[record.productId], retryAfter: nil, error: message, report: &report)
        }
        var startable: [DownloadRecord] = []
        for var record in spaced {
            guard let claim = claims[record.productId] else { continue }
            do {
                if try await updateByEntries(record, claim: claim, server: server, report: &report) { continue }
                if try await updateByChunks(&record, claim: claim, server: server, report: &report) { continue }
            } catch is IllegalTransition {
                try noteStoppedElsewhere(record, report: &report)
                continue
            }
            startable.append(record)
        }
        return startable
    }

    /// The requests of the downloads whose claim still holds once their partial file is open.
    ///
    /// Each partial file there is opened first and the claim checked after: a transfer writes
    /// only through the descriptor opened here (never by name). This process may have been
    /// stopped past its lease (in an update by entries, say); a claim taken over meanwhile is
    /// found gone here, and nothing is written, above all not the emptying of the file its
    /// new owner writes. A claim taken over after this check gives the new owner a file of
    /// its own under the name (``takeOverPartial``): these descriptors reach only the old one.
    /// Where there is no file, none is made here (a stopped process must not leave one
    /// behind): its transfer creates it, and refuses one that another process made since.
    /// A file that cannot be opened is left to the transfer, which fails with why.
    private func openHeld(_ startable: [DownloadRecord], claims: [String: DownloadClaim], server: String, report: inout DownloadRunReport) throws -> ([DownloadRecord], [DownloadRequest]) {
        var requests = try startable.map { try request(for: $0, server: server) }
        for index in requests.indices {
            do {
                requests[index].opened = try OpenedPartialFile.open(for: requests[index], .existing)
                requests[index].partialIsNew = requests[index].opened == nil
            } catch {
                continue
            }
        }
        var held: [Bool] = []
        for record in startable {
            guard let claim = claims[record.productId], try rows.holds(claim) else {
                try noteStoppedElsewhere(record, report: &report)
                held.append(false)
                continue
            }
            held.append(true)
        }
        return (zip(startable, held).filter(\.1).map(\.0), zip(requests, held).filter(\.1).map(\.0))
    }

    /// Runs the transfers on the ``Downloader`` and returns how each ended. Their reports come
    /// into a stream read here while they run (the download thread never waits on this process's
    /// database): each is published, recorded under its claim, and a transfer whose row is no
    /// longer this claim's is stopped.
    private func transfer(_ requests: [DownloadRequest], claims: [String: DownloadClaim], versions: [String: String], ahead: [String: UnpackAhead],
                          progress: @escaping @Sendable (DownloadProgress) -> Void, report: inout DownloadRunReport) async -> [String: DownloadOutcome] {
        let (updates, reporting) = AsyncStream.makeStream(of: DownloadProgress.self)
        let stops = DownloadStops()
        async let ran = Downloader(concurrency: configuration.concurrency, progressPeriod: configuration.progressPeriod)
            .run(requests, stops: stops, progress: reporting)
        // Read in a task of its own, which this run's cancellation does not end (a cancelled
        // task's stream reads nothing more): where each stopped transfer ended is recorded.
        let recording = Task { [rows, database, contentURLs] in
            var received = ReceivedBytes()
            for await update in updates {
                received.note(update)
                // Bytes of this attempt's answer are on disk: the partial file only grows now.
                if update.bytesReceived > 0 { ahead[update.key]?.beginReading() }
                if let url = update.redirectedTo, let version = versions[update.key] {
                    contentURLs.remember(url, for: update.key, version: version)
                }
                database.events.publish(.progress(update))
                progress(update)
                // The row no longer ours to write (paused, cancelled, or claimed by another process
                // after our lease lapsed): that transfer stops. A failed write (a busy or full disk)
                // does not stop it.
                guard let claim = claims[update.key],
                      (try? rows.recordProgress(claim, bytesOnDisk: update.bytesOnDisk, etag: update.etag)) ?? true
                else {
                    stops.stop(update.key)
                    continue
                }
            }
            return received
        }
        let outcomes = await ran
        report.bytesReceived += await recording.value.total
        return outcomes
    }

    /// What a transfer's end comes to: a complete file checked, unpacked and installed; an
    /// expired signed URL asked for again at once; anything else retried or failed.
    private func settle(_ record: DownloadRecord, _ outcome: DownloadOutcome, claim: DownloadClaim, signedURL: Bool, ahead: UnpackAhead?, report: inout DownloadRunReport) throws {
        do {
            if signedURL, case .httpError(let status, _, let message) = outcome, [401, 403, 410].contains(status) {
                // The signed URL expired (or was revoked at the edge): ask the store for a
                // fresh one at once and continue from the bytes on disk.
                contentURLs.forget(record.productId)
                try rows.requeueForFreshURL(claim, reason: "the signed content URL stopped working (\(status): \(message)); asking the store for a new one")
                return
            }
            if case .complete(let size, let sha256, _) = outcome {
                // Checked and unpacked into this claim's staging folder, then swapped in.
                if let tree = try checkedTree(record, claim: claim, size: size, sha256: sha256, ahead: ahead, report: &report) {
                    try install(record, claim: claim, tree, note: nil, report: &report)
                }
            } else {
                try handleUnfinished(outcome, for: record, claim: claim, report: &report)
            }
        } catch is IllegalTransition {
            // Paused or cancelled under us: the reader's word wins.
            try noteStoppedElsewhere(record, report: &report)
        }
    }

    // MARK: What is owed

    /// Downloads not yet started or stopped half-way switch to the version the catalog now names,
    /// rather than finish one the store has replaced.
    func retarget(_ changed: [String]) throws {
        for id in changed {
            if let content = try database.cachedProduct(id)?.content {
                try rows.retargetDownload(id, to: content)
            }
        }
    }

    /// Installed products; `updateAvailable` when the cached catalog has another content version.
    /// Each `path` is the product's folder in this home (`Library/ID`), whatever an older Kiosk
    /// stored: a home copied or moved elsewhere lists its own folders, never the old home's.
    func entries() throws -> [LibraryEntry] {
        try rows.libraryItems().map { stored in
            var item = stored
            item.path = try installer.installed(item.productId).path
            let product = try database.cachedProduct(item.productId)
            let latest = product?.content?.version
            return LibraryEntry(item: item, title: product?.title, updateAvailable: latest != nil && latest != item.version)
        }
    }

    /// Queues the catalog's newer version of every installed product that has one. Returns their IDs.
    func queueUpdates() throws -> [String] {
        var queued: [String] = []
        for entry in try entries() where entry.updateAvailable {
            guard let download = try rows.download(entry.item.productId),
                  let content = try database.cachedProduct(entry.item.productId)?.content else { continue }
            // This version failed for good (its checksum twice, say): it is not tried again on its
            // own, round after round, nor by the next resume; a newer version is, and `kiosk restore` asks again.
            if download.state == .failed && download.sha256 == content.sha256 { continue }
            let kind = download.proofKind.map(PurchaseProofKind.init(rawValue:)) ?? .kioskReceipt
            if try rows.enqueueDownload(productId: download.productId, content: content, receipt: download.receipt, transactionId: download.transactionId, proofKind: kind) {
                queued.append(download.productId)
            }
        }
        return queued
    }

    /// Requeues every installed product whose folder is missing or no longer matches what was
    /// installed (a file deleted, added or truncated), after sweeping what dead processes left
    /// behind. Returns their IDs.
    func checkLibrary(only products: Set<String>? = nil) throws -> [String] {
        var requeued: [String] = []
        installer.sweepLeftovers()
        PartialFile.sweepCopies(in: home.downloads)
        for item in try rows.libraryItems() where products?.contains(item.productId) ?? true {
            guard try rows.download(item.productId)?.state == .installed else { continue }
            let folder = try installer.installed(item.productId)
            let problem: String?
            if !FileManager.default.fileExists(atPath: folder.path) {
                problem = "the library folder is missing; downloading it again"
            } else if let expected = item.treeDigest, (try? LibraryInstaller.treeDigest(of: folder)) != expected {
                problem = "the library folder was changed or damaged; downloading it again"
            } else {
                problem = nil
            }
            if let problem {
                try rows.requeueInstalled(item.productId, reason: problem)
                requeued.append(item.productId)
            }
        }
        return requeued
    }

    /// Bytes the due downloads (or those of `only`) still need, and what the disk has free.
    func roomNeeded(now: Date = Date()) throws -> (needed: Int64, available: Int64?) {
        var needed: Int64 = 0
        for record in try rows.downloads() {
            let due = record.state == .queued || (record.state == .waiting && (record.nextAttemptAt ?? .distantPast) <= now)
            // The archive and its unpacked tree, as the floor counts them (checkSpace).
            if due { needed += max(0, record.size - (try bytesOnDisk(record.productId))) + record.size }
        }
        return (needed, DiskSpace.available(at: home.downloads))
    }

    /// The bytes an installed product's folder takes (its files' allocated blocks).
    func sizeOnDisk(_ productId: String) -> Int64 {
        guard let folder = try? installer.installed(productId),
              let walk = FileManager.default.enumerator(atPath: folder.path) else { return 0 }
        var total: Int64 = 0
        for case let relative as String in walk {
            var info = stat()
            // Blocks of 512 bytes, whatever the file system's own size (st_blocks).
            if lstat(folder.appendingPathComponent(relative).path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { total += Int64(info.st_blocks) * 512 }
        }
        return total
    }

    /// The free bytes of the disk the downloads go to, now.
    func freeSpace() -> Int64? {
        DiskSpace.available(at: home.downloads)
    }

    /// The storage floor when the reader set none: 5 % of the disk, at most 1 GiB (Android calls
    /// storage "low" about there).
    func defaultStorageFloor() -> Int64 {
        var info = statvfs()
        guard statvfs(home.downloads.path, &info) == 0 else { return 0 }
        return min(1 << 30, Int64(info.f_blocks) * Int64(info.f_frsize) / 20)
    }

    /// A product's download as stored now.
    func download(_ productId: String) throws -> DownloadRecord? {
        try rows.download(productId)
    }

    /// Every download of this home.
    func downloads() throws -> [DownloadRecord] {
        try rows.downloads()
    }

    /// Queues `content` for `productId` under the receipt that proves it was bought; true when a
    /// download was queued (none was, or the one there was for other content).
    @discardableResult
    func enqueue(_ productId: String, content: ContentDescriptor, receipt: String, transactionId: String?, proofKind: PurchaseProofKind = .kioskReceipt) throws -> Bool {
        try rows.enqueueDownload(productId: productId, content: content, receipt: receipt, transactionId: transactionId, proofKind: proofKind)
    }

    /// Pauses a download; a process running it stops at its next progress write and keeps its bytes.
    func pause(_ productId: String) throws -> DownloadRecord {
        try rows.pauseDownload(productId)
    }

    /// Puts every paused download back in the queue.
    func unpauseAll() throws {
        try rows.unpauseAll()
    }

    /// When the next waiting download is due, nil when none waits.
    func nextAttempt() throws -> Date? {
        try rows.nextDownloadAttempt()
    }

    /// The downloads (queued, running or installed) a purchase's receipt or transaction granted.
    func downloads(grantedBy purchase: PaymentRecord) throws -> [DownloadRecord] {
        try rows.downloads().filter { $0.transactionId == purchase.transactionId || $0.receipt == purchase.receipt }
    }

    /// Keeps a product's download (bytes and all) under another proof that still entitles it.
    func represent(_ productId: String, receipt: String, transactionId: String?) throws {
        try rows.represent(productId, receipt: receipt, transactionId: transactionId)
    }

    /// Takes a product's content out of the library: its download row, partial bytes and
    /// installed folder, in that order of commit (a process running it stops at its next progress write).
    func removeContent(_ productId: String) throws {
        let partial = try partialFile(productId)
        let removed = try rows.forgetContent(productId, removal: LibraryRemoval(installer: installer, productId: productId, owner: owner, partial: partial))
        if let removed { installer.discard(removed) }
    }

    /// Frees an installed product's files, keeping its purchase (``DownloadRows/removeInstalled(_:automatic:)``):
    /// the reader's removal (`kiosk cancel` of an installed product) or a keep rule's (`automatic`,
    /// which leaves a pinned one alone). Returns false when it was not removable now.
    @discardableResult
    func remove(_ productId: String, automatic: Bool) throws -> Bool {
        let removal = LibraryRemoval(installer: installer, productId: productId, owner: owner, partial: try partialFile(productId))
        guard let removed = try rows.removeInstalled(removal, automatic: automatic, beforeCommit: { configuration.crashPoint?(.midRemoval) }) else { return false }
        if let moved = removed.moved { installer.discard(moved) }
        return true
    }

    /// Queues a removed product again, or a waiting one now (`kiosk resume ID`).
    func reinstate(_ productId: String) throws -> DownloadRecord {
        try rows.reinstateRemoved(productId)
    }

    /// Pins (or unpins) a product: a pinned product's files are never removed by a rule; a removed
    /// one pinned is queued again.
    func setPinned(_ productId: String, _ pinned: Bool) throws -> DownloadRecord {
        try rows.setPinned(productId, pinned)
    }

    /// Cancels a download and deletes its partial bytes; a process running it stops at its next
    /// progress write (two a second).
    func cancel(_ productId: String) throws -> DownloadRecord {
        // The bytes go first: on a full disk they are what frees the room the state change needs.
        let partial = try partialFile(productId)
        try? FileManager.default.removeItem(at: partial)
        if let parked = PartialFile.parked(partial) { unlink(parked.file.path) }
        return try rows.cancelDownload(productId)
    }

    /// Splits claimed downloads into those the disk has room for and those it has not (with the
    /// message saying how much is needed and where), so none starts that cannot finish.
    private func checkSpace(_ due: [DownloadRecord], keepingFree floor: Int64) throws -> (startable: [DownloadRecord], short: [(DownloadRecord, String)]) {
        guard var available = DiskSpace.available(at: home.downloads) else { return (due, []) }
        available -= floor
        var startable: [DownloadRecord] = []
        var short: [(DownloadRecord, String)] = []
        for record in due {
            // Held to a floor, an archive counts with its unpacked tree, which the disk holds beside
            // it until the install: the floor holds at the peak, not only once the archive is gone.
            let needed = max(0, record.size - (try bytesOnDisk(record.productId))) + (floor > 0 ? record.size : 0)
            if needed > available {
                var message = DiskSpace.shortfall(needed: needed, available: max(0, available + floor), at: home.downloads, for: "the download of \(record.productId)")
                if floor > 0 { message += " (with its unpacked files, and \(ByteCount.text(floor)) more that automatic downloads keep free: kiosk config set keep-free)" }
                short.append((record, message))
            } else {
                available -= needed
                startable.append(record)
            }
        }
        return (startable, short)
    }

    private func bytesOnDisk(_ productId: String) throws -> Int64 {
        (try? FileManager.default.attributesOfItem(atPath: try partialFile(productId).path)[.size] as? Int64) ?? 0
    }

    /// A claim's partial file before its transfer: taken over from an owner that still lives, or
    /// taken back from where a takeover on a full disk parked it (``PartialFile/takeOver(_:committed:token:liveOwner:)``).
    /// - Returns: why the download must wait for room, or nil when it can go on.
    private func takeOverPartial(_ download: inout DownloadRows.ClaimedDownload) throws -> String? {
        let id = download.claim.productId
        let committed = download.record.partialETag == nil ? 0 : download.record.bytesDone
        let liveOwner = download.tookOverLiveOwner ? download.previousOwner ?? "" : nil
        switch PartialFile.takeOver(try partialFile(id), committed: committed, token: download.claim.token, liveOwner: liveOwner) {
        case .asItIs:
            return nil
        case .kept(let how):
            logger.info("\(how) the \(committed) committed bytes of \(id)")
            return nil
        case .noRoom:
            return DiskSpace.shortfall(needed: committed, available: DiskSpace.available(at: home.downloads) ?? 0, at: home.downloads,
                                       for: "keeping the \(ByteCount.text(committed)) already downloaded of \(id) (a stopped kiosk process may still write to them)")
        case .restart:
            // The bytes on disk are in doubt: the download starts again from its first byte.
            download.record.bytesDone = 0
            download.record.partialETag = nil
            _ = try rows.recordProgress(download.claim, bytesOnDisk: 0, etag: nil)
            return nil
        }
    }

    /// Cuts a resumed download's partial file back to where it stops matching its manifest
    /// (``Updates/checkedLength(of:partial:server:)``) and commits that progress with it.
    private func checkPartial(_ download: inout DownloadRows.ClaimedDownload, server: String) async throws {
        guard let etag = download.record.partialETag,
              let keep = try await updates.checkedLength(of: download.record, partial: try partialFile(download.record.productId), server: server)
        else { return }
        download.record.bytesDone = keep
        download.record.partialETag = keep > 0 ? etag : nil
        _ = try rows.recordProgress(download.claim, bytesOnDisk: keep, etag: etag)
    }

    /// The request for a download: to the store, with the receipt as proof and the version the
    /// catalog promised (whose SHA-256 is checked) as the only one that may arrive; or straight to
    /// the signed URL the store sent an earlier attempt to, which is proof enough and names the
    /// version's archive itself. The receipt never goes to an edge. Either way no more than the
    /// catalog's size for that version is ever written. ``run(only:waitForOthers:progress:)``
    /// opens its partial file and checks the claim before handing it over.
    private func request(for record: DownloadRecord, server: String) throws -> DownloadRequest {
        let id = record.productId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? record.productId
        var request: DownloadRequest
        if let signed = contentURLs.url(for: record.productId, version: record.sha256) {
            request = DownloadRequest(key: record.productId, url: signed, partialFile: try partialFile(record.productId), etag: record.partialETag)
        } else {
            request = DownloadRequest(
                key: record.productId, url: "\(server)/v1/content/\(id)?version=\(record.sha256)",
                headers: [record.authorization],
                partialFile: try partialFile(record.productId), etag: record.partialETag)
        }
        request.lowSpeedTime = configuration.stallSeconds
        request.maxReceiveSpeed = configuration.maxReceiveSpeed
        request.expectedSize = record.size
        return request
    }

    // MARK: Outcomes

    /// Every outcome but a complete transfer (which ``run(only:waitForOthers:progress:)`` installs):
    /// what is retried, when, and what fails for good.
    private func handleUnfinished(_ outcome: DownloadOutcome, for record: DownloadRecord, claim: DownloadClaim, report: inout DownloadRunReport) throws {
        let id = record.productId
        switch outcome {
        case .complete:
            return
        case .restart(let reason):
            try rows.restartFromZero(claim, reason: reason)
        case .httpError(412, _, let message):
            try scheduleRetry(record, claim, retryAfter: nil, error: "the content changed on the server (\(message))", report: &report)
            report.outdated.append(id)
        case .httpError(let status, let retryAfter, let message):
            if RetryRule.isTransient(status: status) {
                try scheduleRetry(record, claim, retryAfter: retryAfter, error: "the server answered \(status): \(message)", report: &report)
            } else {
                try fail(record, claim, "the server refused the download (\(status)): \(message)", report: &report)
            }
        case .transport(let kind, let message):
            switch kind {
            case _ where kind.isTransient:
                try scheduleRetry(record, claim, retryAfter: nil, error: message, report: &report)
            case .localWrite where message.hasPrefix("refusing to write"):
                // Something other than Kiosk's own file sits where the partial download goes: the
                // reader's to remove; space is not the problem.
                try scheduleRetry(record, claim, retryAfter: nil, error: "\(message); remove it and the download starts again", report: &report)
            case .localWrite:
                let needed = max(0, record.size - (try bytesOnDisk(id)))
                let available = DiskSpace.available(at: home.downloads) ?? 0
                try scheduleRetry(record, claim, retryAfter: nil, error: "\(message); " + DiskSpace.shortfall(
                    needed: needed, available: available, at: home.downloads, for: "the rest of the download"), report: &report)
            case .tooLarge:
                // More bytes than the catalog declares (an endless or wrong body): what was
                // written is in doubt, so it goes; a second time, the download fails.
                try discardMismatch(record, claim, from: .downloading, detail: message, report: &report)
            default:
                try fail(record, claim, message, report: &report)
            }
        case .stopped:
            if Task.isCancelled {
                // Interrupted by the reader (Ctrl-C) or the app: keep the bytes, due again at once.
                try rows.interrupt(claim)
                report.interrupted.append(id)
            } else {
                try noteStoppedElsewhere(record, report: &report)
            }
        }
    }

    /// A download this run held was paused or cancelled by another command (or claimed by another
    /// process after our claim lapsed).
    private func noteStoppedElsewhere(_ record: DownloadRecord, report: inout DownloadRunReport) throws {
        switch try rows.download(record.productId)?.state {
        case .cancelled?:
            let partial = try partialFile(record.productId)
            try rows.discardCancelledPartial(record.productId, partial: partial)
            report.cancelled.append(record.productId)
        case .paused?:
            report.paused.append(record.productId)
        default:
            break
        }
    }

    /// Tar archives start unpacking into their claims' staging folders as they download, when the
    /// library has room for them; the rest (zip, or a full disk) unpack after their check as before.
    private func unpackAhead(_ records: [DownloadRecord], claims: [String: DownloadClaim]) -> [String: UnpackAhead] {
        var ahead: [String: UnpackAhead] = [:]
        for record in records where configuration.unpackWhileDownloading && record.format.unpacksAsItArrives {
            guard let available = DiskSpace.available(at: home.library), available >= record.size,
                  let claim = claims[record.productId],
                  let partial = try? partialFile(record.productId),
                  let unpacking = try? installer.startUnpacking(partial, size: record.size, for: claim)
            else { continue }
            ahead[record.productId] = unpacking
        }
        return ahead
    }

    /// A content tree checked and ready in a claim's staging folder, to be swapped into the library.
    struct CheckedTree {
        let unpacked: LibraryInstaller.Unpacked
        let treeDigest: String
        /// The file clock's reading when the check began (see ``FileClock``).
        let checkedAt: Int64?
    }

    /// Checks a complete download against the catalog (size and SHA-256), then unpacks it (or
    /// takes what unpacked while it arrived) and checks the tree. Nil when it cannot be installed
    /// now: the download is then rescheduled or failed here, with why.
    private func checkedTree(_ record: DownloadRecord, claim: DownloadClaim, size: Int64, sha256: String, ahead: UnpackAhead?, report: inout DownloadRunReport) throws -> CheckedTree? {
        let id = record.productId
        try rows.beginVerifying(claim, size: size)
        let partial = try partialFile(id)
        let onDisk = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64) ?? -1
        guard size == record.size, onDisk == record.size, sha256 == record.sha256 else {
            let detail = "expected \(record.size) bytes with SHA-256 \(record.sha256.prefix(12))…, got \(size) bytes with \(sha256.prefix(12))…"
            try discardMismatch(record, claim, from: .verifying, detail: detail, report: &report)
            return nil
        }
        // Unpacked content takes at least as much room as the archive: check before writing any.
        if let available = DiskSpace.available(at: home.library), available < record.size {
            try scheduleRetry(record, claim, retryAfter: nil, error: DiskSpace.shortfall(
                needed: record.size, available: available, at: home.library, for: "unpacking \(id)"), report: &report, from: .verifying)
            return nil
        }
        try rows.beginUnpacking(claim)
        let unpacked: LibraryInstaller.Unpacked
        let treeDigest: String
        let checkedAt: Int64?
        do {
            if record.format.deliveredAsFile {
                ahead?.abandon()
                unpacked = try installer.place(partial, as: record.fileName ?? "", size: record.size, sha256: record.sha256, for: claim)
            } else {
                unpacked = try installer.unpacked(ahead, orElse: partial, expecting: record.sha256, for: claim)
            }
            checkedAt = FileClock.boundary(in: home.root)
            treeDigest = try installer.check(unpacked)
        } catch UnpackError.noSpace(let entry) {
            let available = DiskSpace.available(at: home.library) ?? 0
            try scheduleRetry(record, claim, retryAfter: nil, error: "the disk filled while unpacking\(entry.map { " \"\($0)\"" } ?? ""); " + DiskSpace.shortfall(
                needed: record.size, available: available, at: home.library, for: "unpacking \(id)"), report: &report, from: .unpacking)
            return nil
        } catch let error as UnpackError where !error.isHostile {
            try scheduleRetry(record, claim, retryAfter: nil, error: error.description, report: &report, from: .unpacking)
            return nil
        } catch {
            try fail(record, claim, "\(error)", report: &report, from: .unpacking, discardingPartial: true)
            return nil
        }
        return CheckedTree(unpacked: unpacked, treeDigest: treeDigest, checkedAt: checkedAt)
    }

    /// Swaps a checked staging folder into the library, names the product installed, and keeps
    /// the installed version's manifest for the next update.
    private func install(_ record: DownloadRecord, claim: DownloadClaim, _ tree: CheckedTree, note: String?, report: inout DownloadRunReport) throws {
        let id = record.productId
        let unpacked = tree.unpacked
        let partial = try partialFile(id)
        // Stored relative to the home, so the record stays true when the home is moved.
        let item = LibraryItem(productId: id, version: record.version, sha256: record.sha256, path: LibraryItem.relativePath(id), installedAt: Date(), treeDigest: tree.treeDigest)
        let replaced: URL?
        let manifestFile = try home.installedManifest(id)
        let statusFile = try home.installedStatus(id)
        do {
            // The old version's manifest goes before the swap: a crash after it leaves no manifest
            // (an update then reads the installed files), never one of another version.
            let swap = LibrarySwap(installer: installer, staging: unpacked.staging, productId: id, staleFiles: [statusFile, manifestFile], partial: partial)
            replaced = try rows.markInstalled(item, claim: claim, note: note, swap: swap).replaced
        } catch let error as UnpackError {
            // The move into the library failed (nothing was committed): try again later.
            installer.discard(unpacked.staging)
            try scheduleRetry(record, claim, retryAfter: nil, error: error.description, report: &report, from: .unpacking)
            return
        } catch {
            // Lost the claim: this claim's folder goes, the library is as it was.
            installer.discard(unpacked.staging)
            throw error
        }
        var stamp = tree.checkedAt
        if let replaced {
            // An update's unchanged files are hard links shared with the old tree: removing it moves
            // their status change time to now, and the next update would read them all again. The
            // stamp moves past the removal when nothing else changed a file since the check began.
            let removalStarted = FileClock.boundary(in: home.root)
            installer.discard(replaced)
            if let checkedAt = tree.checkedAt, let removalStarted, let removed = FileClock.boundary(in: home.root),
               FileClock.noFileChanged(in: try installer.installed(id), between: checkedAt, and: removalStarted) {
                stamp = removed
            }
        }
        saveInstalledManifest(unpacked.manifest, to: manifestFile)
        // Taken now, while the stamp is a few milliseconds old: a file whose status changed before
        // it was read by the check (or only lost the old tree's link since).
        InstalledStatus.save(InstalledStatus.record(tree: try installer.installed(id), before: stamp), to: statusFile, logger: logger)
        report.installed.append(id)
    }

    /// A hint for the next update, not a proof (the tree is checked anyway): failing to keep it is logged.
    private func saveInstalledManifest(_ manifest: ArchiveManifest, to file: URL) {
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            // Written in place, not through a temporary file: a process killed while writing
            // leaves a torn manifest, which an update cannot decode and so treats as none (it
            // reads every installed file), where a temporary file would stay in manifests/ forever.
            try JSONEncoder.kiosk.encode(manifest).write(to: file)
        } catch {
            logger.info("could not keep the installed manifest; the next update reads the installed files instead", metadata: ["file": "\(file.path)", "error": "\(error)"])
        }
    }

    /// Installs an update of an installed zip product from only the entries that changed
    /// (``Updates/byEntries(_:installed:claim:server:)``). False when it must be downloaded whole.
    private func updateByEntries(_ record: DownloadRecord, claim: DownloadClaim, server: String, report: inout DownloadRunReport) async throws -> Bool {
        guard let result = try await updates.byEntries(record, installed: try installedItem(record.productId), claim: claim, server: server) else { return false }
        report.bytesReceived += result.bytesFetched
        do {
            try rows.beginVerifying(claim, size: record.size)
            try rows.beginUnpacking(claim)
            try install(record, claim: claim, CheckedTree(unpacked: result.unpacked, treeDigest: result.treeDigest, checkedAt: result.checkedAt),
                        note: result.summary, report: &report)
        } catch {
            installer.discard(result.unpacked.staging)
            throw error
        }
        logger.info("updated by entries", metadata: ["product": "\(record.productId)", "cost": "\(result.summary)"])
        return true
    }

    /// Installs an update of an installed publication file built from the chunks the installed
    /// file holds and ranges for the rest (``Updates/byChunks(_:_:partial:progress:)``). False when
    /// the ordinary download is to finish it (the partial file then holds a checked prefix, which
    /// the download continues: `record` then says its bytes and ETag, which its request resumes
    /// from). True when it is done with the download: installed, stopped elsewhere, interrupted,
    /// or rescheduled (a disk that filled, say: as a transfer's local write error is).
    private func updateByChunks(_ record: inout DownloadRecord, claim: DownloadClaim, server: String, report: inout DownloadRunReport) async throws -> Bool {
        let id = record.productId
        guard let plan = try updates.chunkPlan(record, installed: try installedItem(id), server: server) else { return false }
        // Opened first, the claim checked after: only this descriptor is written (see `run`).
        guard let partial = try? OpenedPartialFile.open(for: try request(for: record, server: server), .existingOrNew) else { return false }
        guard try rows.holds(claim) else {
            try noteStoppedElsewhere(record, report: &report)
            return true
        }
        let outcome = try await updates.byChunks(record, plan, partial: partial) { [rows] bytes in
            (try? rows.recordProgress(claim, bytesOnDisk: bytes, etag: plan.etag)) ?? true
        }
        switch outcome {
        case .continueWhole(let kept):
            // Skippable on a full disk (the next attempt checks the partial file's chunks anyway).
            _ = try? rows.recordProgress(claim, bytesOnDisk: kept, etag: plan.etag)
            record.bytesDone = kept
            record.partialETag = kept > 0 ? plan.etag : nil
            return false
        case .stoppedElsewhere:
            try noteStoppedElsewhere(record, report: &report)
        case .interrupted(let kept):
            _ = try? rows.recordProgress(claim, bytesOnDisk: kept, etag: plan.etag)
            try rows.interrupt(claim)
            report.interrupted.append(id)
        case .diskFull(let kept, let error):
            _ = try? rows.recordProgress(claim, bytesOnDisk: kept, etag: plan.etag)
            let available = DiskSpace.available(at: home.downloads) ?? 0
            try scheduleRetry(record, claim, retryAfter: nil, error: "\(error); " + DiskSpace.shortfall(
                needed: max(0, record.size - kept), available: available, at: home.downloads, for: "the rest of the update"), report: &report)
        case .built(let result):
            report.bytesReceived += result.bytesFetched
            // Built to be the catalog's version: the installer's check reads the file back and
            // compares its SHA-256 with the catalog's before anything is installed (a mismatch is
            // retried, the partial file checked chunk by chunk and cut back first).
            if let tree = try checkedTree(record, claim: claim, size: result.fileSize, sha256: record.sha256, ahead: nil, report: &report) {
                try install(record, claim: claim, tree, note: result.summary, report: &report)
                if report.installed.last == id { try updates.keepChunks(result, of: record, plan) }
                logger.info("updated by chunks", metadata: ["product": "\(id)", "cost": "\(result.summary)", "installedChunksKnown": "\(plan.known != nil)"])
            }
        }
        return true
    }

    /// The library entry installed for `productId`, if any.
    private func installedItem(_ productId: String) throws -> LibraryItem? {
        try rows.libraryItems().first { $0.productId == productId }
    }

    /// Bytes that are not the catalog's: the partial file goes and the download starts again
    /// from zero; the second time in a row, it fails.
    private func discardMismatch(_ record: DownloadRecord, _ claim: DownloadClaim, from state: DownloadState, detail: String, report: inout DownloadRunReport) throws {
        let partial = try partialFile(record.productId)
        if record.mismatches >= 1 {
            try fail(record, claim, "the content failed its checksum twice (\(detail)); run kiosk sync, then kiosk restore downloads it again", report: &report, from: state, mismatch: true, discardingPartial: true)
        } else {
            try rows.requeueAfterMismatch(claim, from: state, mismatches: record.mismatches + 1,
                                          reason: "checksum mismatch (\(detail)); downloading again from zero", discarding: partial)
        }
    }

    private func scheduleRetry(_ record: DownloadRecord, _ claim: DownloadClaim?, retryAfter: TimeInterval?, error: String, report: inout DownloadRunReport, from state: DownloadState = .downloading) throws {
        guard let claim else { return }
        let attempts = record.attempts + 1
        let delay = configuration.backoff.delay(afterAttempts: attempts, retryAfter: retryAfter)
        try rows.scheduleRetry(claim, from: state, attempts: attempts, at: Date().addingTimeInterval(delay), error: error)
        report.waiting.append(record.productId)
    }

    private func fail(_ record: DownloadRecord, _ claim: DownloadClaim, _ reason: String, report: inout DownloadRunReport, from state: DownloadState = .downloading, mismatch: Bool = false, discardingPartial: Bool = false) throws {
        let partial = try partialFile(record.productId)
        try rows.failDownload(claim, from: state, attempts: record.attempts + 1, mismatches: record.mismatches + (mismatch ? 1 : 0), reason: reason,
                              discarding: discardingPartial ? partial : nil)
        report.failed.append(record.productId)
    }
}

/// Bytes received per download in one run, as the transfers report them.
struct ReceivedBytes {
    private var byKey: [String: Int64] = [:]
    /// The partial file the last progress report was about.
    private(set) var partialIdentity: FileIdentity?

    mutating func note(_ progress: DownloadProgress) {
        byKey[progress.key] = max(byKey[progress.key] ?? 0, progress.bytesReceived)
        partialIdentity = progress.partialIdentity ?? partialIdentity
    }

    var total: Int64 { byKey.values.reduce(0, +) }
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
