import Foundation
internal import GRDB
import KioskCore

/// The transitions of a download, and the claims that keep two processes off the same one.
///
/// A process claims a download by writing itself as `owner` with a lease; only the owner moves a
/// claimed download on (`downloading → verifying → unpacking → installed | waiting | failed`),
/// and anyone may pause or cancel it, which the owner notices at its next progress report. A
/// claim lapses when its lease runs out or its owner's process is gone.
///
/// The download and library rows of `kiosk.sqlite`, written by nothing else: ``Library`` holds
/// the one instance and is the only caller, so every change of a download is one of its transitions.
struct DownloadRows: Sendable {
    let database: ClientDatabase

    // MARK: Reads

    func downloads() throws -> [DownloadRecord] {
        try database.read { try DownloadRow.order(DownloadRecord.Columns.productId).fetchAll($0).map(\.value) }
    }

    func download(_ productId: String) throws -> DownloadRecord? {
        try database.read { try DownloadRow.fetchOne($0, key: productId)?.value }
    }

    func libraryItems() throws -> [LibraryItem] {
        try database.read { try LibraryItemRow.order(Column("productId")).fetchAll($0).map(\.value) }
    }

    /// When the earliest waiting download is due.
    func nextDownloadAttempt() throws -> Date? {
        try database.read { db in
            try Date.fetchOne(db, DownloadRow
                .filter(DownloadRecord.Columns.state == DownloadState.waiting.rawValue)
                .select(min(DownloadRecord.Columns.nextAttemptAt)))
        }
    }

    // MARK: Queueing

    /// Queues `content` for `productId` with `receipt` as proof.
    ///
    /// Nothing changes when that version is installed, claimed by a running process, or paused
    /// by the reader; anything else (new, waiting, failed, cancelled, an older version) is queued.
    /// - Returns: true when the download was queued.
    @discardableResult
    /// - Parameter proofKind: the scheme `receipt` is presented under.
    func enqueueDownload(productId: String, content: ContentDescriptor, receipt: String, transactionId: String?, proofKind: PurchaseProofKind = .kioskReceipt) throws -> Bool {
        let kind = proofKind == .kioskReceipt ? nil : proofKind.rawValue
        guard ProductID.isValid(productId) else { throw ClientError.unsafeProductID(productId, source: "a download") }
        let now = Date()
        let record = try database.write { db -> DownloadRecord? in
            if var existing = try DownloadRow.fetchOne(db, key: productId)?.value {
                let sameVersion = existing.sha256 == content.sha256
                // A running owner finishes what it has; a newer version is queued after it installs.
                if DownloadState.claimed.contains(existing.state) { return nil }
                if sameVersion, [.installed, .queued, .paused].contains(existing.state) { return nil }
                // Freed by the reader or a keep rule: only the reader brings it back (reinstateRemoved),
                // or a new purchase of it (another transaction), which is delivered as any is.
                if existing.state == .removed, existing.transactionId == transactionId { return nil }
                existing.state = .queued
                existing.sha256 = content.sha256
                existing.size = content.size
                existing.version = content.version
                existing.format = content.format
                existing.fileName = content.fileName
                existing.receipt = receipt
                existing.proofKind = kind
                existing.transactionId = transactionId
                existing.attempts = 0
                existing.mismatches = 0
                existing.nextAttemptAt = nil
                existing.lastError = nil
                existing.owner = nil
                existing.leaseUntil = nil
                existing.leaseBoot = nil
                existing.leaseDeadline = nil
                if !sameVersion { existing.partialETag = nil; existing.bytesDone = 0 }
                existing.updatedAt = now
                try DownloadRow(existing).update(db)
                return existing
            }
            let record = DownloadRecord(
                productId: productId, state: .queued, sha256: content.sha256, size: content.size,
                version: content.version, format: content.format, receipt: receipt, bytesDone: 0,
                partialETag: nil, attempts: 0, nextAttemptAt: nil, lastError: nil, mismatches: 0,
                createdAt: now, updatedAt: now, owner: nil, leaseUntil: nil, transactionId: transactionId, proofKind: kind,
                fileName: content.fileName)
            var row = DownloadRow(record)
            try row.insert(db)
            return record
        }
        if let record { database.events.publish(.download(record)) }
        return record != nil
    }

    /// `installed → queued`: the installed folder is missing or damaged, so it is downloaded again.
    func requeueInstalled(_ productId: String, reason: String) throws {
        _ = try moveDownload(productId, claim: nil, from: [.installed], to: .queued, [
            DownloadRecord.Columns.lastError.set(to: reason),
            DownloadRecord.Columns.attempts.set(to: 0),
            Column("bytesDone").set(to: 0),
            Column("partialETag").set(to: nil),
        ])
    }

    /// Points a download nobody is running at the version the catalog now names, dropping the
    /// bytes of the old one: `queued | waiting | failed → queued`, `paused` stays paused. A claimed
    /// download finishes its version first and is updated after it installs.
    /// - Returns: true when the download was retargeted.
    @discardableResult
    func retargetDownload(_ productId: String, to content: ContentDescriptor) throws -> Bool {
        let record = try database.write { db -> DownloadRecord? in
            guard var record = try DownloadRow.fetchOne(db, key: productId)?.value, record.sha256 != content.sha256,
                  [.queued, .waiting, .failed, .paused].contains(record.state) else { return nil }
            if record.state != .paused { record.state = .queued }
            record.sha256 = content.sha256
            record.size = content.size
            record.version = content.version
            record.format = content.format
            record.partialETag = nil
            record.bytesDone = 0
            record.attempts = 0
            record.mismatches = 0
            record.nextAttemptAt = nil
            record.lastError = nil
            record.updatedAt = Date()
            try DownloadRow(record).update(db)
            return record
        }
        if let record { database.events.publish(.download(record)) }
        return record != nil
    }

    /// `paused → queued` for every paused download: `kiosk resume`.
    func unpauseAll() throws {
        let resumed = try database.write { db -> [DownloadRecord] in
            let paused = try DownloadRow.filter(DownloadRecord.Columns.state == DownloadState.paused.rawValue).fetchAll(db).map(\.value)
            try DownloadRow.filter(DownloadRecord.Columns.state == DownloadState.paused.rawValue)
                .updateAll(db, DownloadRecord.Columns.state.set(to: DownloadState.queued.rawValue), DownloadRecord.Columns.updatedAt.set(to: Date()))
            return paused.map { var record = $0; record.state = .queued; return record }
        }
        for record in resumed { database.events.publish(.download(record)) }
    }

    /// `queued | waiting | downloading | failed → paused`, keeping its bytes; a running owner stops.
    func pauseDownload(_ productId: String) throws -> DownloadRecord {
        try moveDownload(productId, claim: nil, from: [.queued, .waiting, .downloading, .failed, .paused], to: .paused, [])
    }

    /// `queued | waiting | downloading | paused | failed → cancelled`; a running owner stops.
    func cancelDownload(_ productId: String) throws -> DownloadRecord {
        try moveDownload(productId, claim: nil, from: [.queued, .waiting, .downloading, .paused, .failed, .cancelled], to: .cancelled, [
            Column("bytesDone").set(to: 0), Column("partialETag").set(to: nil),
        ])
    }

    /// Forgets a product's download and library entry (its purchase was revoked). `removal` takes
    /// the content out of the library inside the same transaction, so no install can slip in
    /// between; the folder it moved aside is returned, to delete after the commit.
    func forgetContent(_ productId: String, removal: LibraryRemoval) throws -> URL? {
        let (forgotten, removed) = try database.write { db -> (DownloadRecord?, URL?) in
            let record = try DownloadRow.fetchOne(db, key: productId)?.value
            _ = try DownloadRow.deleteOne(db, key: productId)
            _ = try LibraryItemRow.deleteOne(db, key: productId)
            return (record, try removal.installer.perform(removal))
        }
        if let forgotten { database.events.publish(.downloadRemoved(forgotten)) }
        return removed
    }

    // MARK: The newsstand's (``Newsstand``)

    /// `installed → removed`: its files go (the folder moved aside inside this transaction, as a
    /// revocation's are, so no install slips in between); the purchase and this row stay, and
    /// `kiosk resume ID` queues it again. A keep rule's removal (`automatic`) leaves a pinned
    /// download alone, decided here, under the write lock: a pin committed first always wins.
    /// - Returns: the record as removed and the folder to delete after the commit; nil when it
    ///   was not removable now (no longer installed, pinned, or another process's).
    /// - Parameter beforeCommit: called with the folder moved aside and the row not yet committed (a test's crash point).
    func removeInstalled(_ removal: LibraryRemoval, automatic: Bool, beforeCommit: () -> Void = {}) throws -> (record: DownloadRecord, moved: URL?)? {
        let result = try database.write { db -> (record: DownloadRecord, moved: URL?)? in
            guard var record = try DownloadRow.fetchOne(db, key: removal.productId)?.value, record.state == .installed,
                  !(automatic && record.pinnedAt != nil) else { return nil }
            record.state = .removed
            record.pinnedAt = nil
            record.bytesDone = 0
            record.partialETag = nil
            record.lastError = nil
            record.updatedAt = Date()
            try DownloadRow(record).update(db)
            _ = try LibraryItemRow.deleteOne(db, key: removal.productId)
            let moved = try removal.installer.perform(removal)
            beforeCommit()
            return (record, moved)
        }
        if let result { database.events.publish(.removed(result.record)) }
        return result
    }

    /// `removed | waiting → queued`: the reader wants it now (`kiosk resume ID`, a pin), not at its next retry.
    func reinstateRemoved(_ productId: String) throws -> DownloadRecord {
        try moveDownload(productId, claim: nil, from: [.removed, .waiting], to: .queued, [
            DownloadRecord.Columns.attempts.set(to: 0), DownloadRecord.Columns.lastError.set(to: nil),
            DownloadRecord.Columns.nextAttemptAt.set(to: nil),
        ])
    }

    /// Pins or unpins a download (any state but cancelled); a removed one pinned is queued again.
    func setPinned(_ productId: String, _ pinned: Bool) throws -> DownloadRecord {
        let record = try database.write { db -> DownloadRecord in
            guard var record = try DownloadRow.fetchOne(db, key: productId)?.value, record.state != .cancelled else {
                throw ClientError.invalidRequest("\(productId) has no download on this device: buy it, or kiosk restore if it was bought on another")
            }
            record.pinnedAt = pinned ? (record.pinnedAt ?? Date()) : nil
            if pinned, record.state == .removed {
                record.state = .queued
                record.attempts = 0
                record.lastError = nil
                record.nextAttemptAt = nil
            }
            record.updatedAt = Date()
            try DownloadRow(record).update(db)
            return record
        }
        database.events.publish(.download(record))
        return record
    }

    /// Points a download at another standing transaction of the same product (the one it used was revoked).
    func represent(_ productId: String, receipt: String, transactionId: String?) throws {
        let record = try database.write { db -> DownloadRecord? in
            _ = try DownloadRow.filter(key: productId).updateAll(db, [
                Column("receipt").set(to: receipt), DownloadRecord.Columns.transactionId.set(to: transactionId),
                Column("proofKind").set(to: nil),
            ])
            return try DownloadRow.fetchOne(db, key: productId)?.value
        }
        if let record { database.events.publish(.download(record)) }
    }

    // MARK: Claims

    /// A download this process just claimed, and what the claim took over.
    struct ClaimedDownload {
        var record: DownloadRecord
        let claim: DownloadClaim
        /// The claim lapsed while its owner process still lives (stopped, or too slow to renew):
        /// that process may still hold the partial file open and write to it once it runs again.
        let tookOverLiveOwner: Bool
        /// That owner's token, when it lives.
        var previousOwner: String? = nil
    }

    /// Claims every due download (or those of `only`) for `owner`, in one transaction:
    /// queued ones, waiting ones whose time has come (by the wall clock: a schedule survives a
    /// restart), and claimed ones whose lease has lapsed on the monotonic clock or whose owner is gone.
    func claimDueDownloads(for owner: ClaimOwner, only: Set<String>?, lease: TimeInterval, now: Date = Date(), clock: LeaseClock = .system) throws -> [ClaimedDownload] {
        let claimed = try database.write { db -> [ClaimedDownload] in
            let candidates = try DownloadRow
                .filter([DownloadState.queued, .waiting].map(\.rawValue).contains(DownloadRecord.Columns.state)
                    || DownloadState.claimed.map(\.rawValue).contains(DownloadRecord.Columns.state))
                .order(DownloadRecord.Columns.productId)
                .fetchAll(db).map(\.value)
            var claimed: [ClaimedDownload] = []
            for var record in candidates where only?.contains(record.productId) ?? true {
                var liveOwner = false
                let previous = record.owner
                switch record.state {
                case .queued: break
                case .waiting: guard (record.nextAttemptAt ?? .distantPast) <= now else { continue }
                default:
                    guard clock.hasLapsed(owner: record.owner, boot: record.leaseBoot, deadline: record.leaseDeadline) else { continue }
                    liveOwner = record.owner.map { !ClaimOwner.isGone($0) } ?? false
                }
                // Compare-and-set on the state and generation read above: of two claimers, one
                // wins, and the generation it writes fences off every holder before it.
                let generation = record.claimGeneration + 1
                let deadline = clock.now().adding(seconds: lease)
                let changed = try DownloadRow
                    .filter(key: record.productId)
                    .filter(DownloadRecord.Columns.state == record.state.rawValue)
                    .filter(DownloadRecord.Columns.claimGeneration == record.claimGeneration)
                    .updateAll(db, [
                        DownloadRecord.Columns.state.set(to: DownloadState.downloading.rawValue),
                        DownloadRecord.Columns.owner.set(to: owner.id),
                        DownloadRecord.Columns.claimGeneration.set(to: generation),
                        DownloadRecord.Columns.leaseBoot.set(to: deadline.boot),
                        DownloadRecord.Columns.leaseDeadline.set(to: deadline.nanoseconds),
                        DownloadRecord.Columns.leaseUntil.set(to: now.addingTimeInterval(lease)),
                        DownloadRecord.Columns.updatedAt.set(to: now),
                    ])
                guard changed == 1 else { continue }
                record.state = .downloading
                record.owner = owner.id
                record.claimGeneration = generation
                record.leaseBoot = deadline.boot
                record.leaseDeadline = deadline.nanoseconds
                record.leaseUntil = now.addingTimeInterval(lease)
                claimed.append(ClaimedDownload(record: record, claim: DownloadClaim(productId: record.productId, owner: owner, generation: generation),
                                               tookOverLiveOwner: liveOwner, previousOwner: liveOwner ? previous : nil))
            }
            return claimed
        }
        for download in claimed { database.events.publish(.download(download.record)) }
        return claimed
    }

    /// Products among `only` (or any) that another live process is working on now.
    func downloadsClaimedByOthers(than owner: ClaimOwner, only: Set<String>?, clock: LeaseClock = .system) throws -> [DownloadRecord] {
        try database.read { db in
            try DownloadRow
                .filter(DownloadState.claimed.map(\.rawValue).contains(DownloadRecord.Columns.state))
                .fetchAll(db).map(\.value)
                .filter { record in
                    (only?.contains(record.productId) ?? true) && record.owner != owner.id
                        && !clock.hasLapsed(owner: record.owner, boot: record.leaseBoot, deadline: record.leaseDeadline)
                }
        }
    }

    /// Extends the lease of every download `owner` holds.
    func renewClaims(of owner: ClaimOwner, lease: TimeInterval, clock: LeaseClock = .system) throws {
        let deadline = clock.now().adding(seconds: lease)
        try database.write(mayUseReserve: false) { db in
            _ = try DownloadRow
                .filter(DownloadRecord.Columns.owner == owner.id)
                .filter(DownloadState.claimed.map(\.rawValue).contains(DownloadRecord.Columns.state))
                .updateAll(db, [
                    DownloadRecord.Columns.leaseBoot.set(to: deadline.boot),
                    DownloadRecord.Columns.leaseDeadline.set(to: deadline.nanoseconds),
                    DownloadRecord.Columns.leaseUntil.set(to: Date().addingTimeInterval(lease)),
                ])
        }
    }

    /// True while `claim` is the download's current claim.
    func holds(_ claim: DownloadClaim) throws -> Bool {
        try database.read { db in try Self.claimed(claim, db).fetchCount(db) == 1 }
    }

    /// The row of `claim`'s download, if the claim still holds it (in any claimed state).
    private static func claimed(_ claim: DownloadClaim, _ db: Database) -> QueryInterfaceRequest<DownloadRow> {
        DownloadRow
            .filter(key: claim.productId)
            .filter(DownloadRecord.Columns.owner == claim.owner.id && DownloadRecord.Columns.claimGeneration == claim.generation)
            .filter(DownloadState.claimed.map(\.rawValue).contains(DownloadRecord.Columns.state))
    }

    /// Commits the holder's progress. Returns false when the download is no longer the claim's to
    /// run: paused or cancelled by another command, or claimed by another process.
    func recordProgress(_ claim: DownloadClaim, bytesOnDisk: Int64, etag: String?) throws -> Bool {
        try database.write(mayUseReserve: false) { db in
            try Self.claimed(claim, db)
                .filter(DownloadRecord.Columns.state == DownloadState.downloading.rawValue)
                .updateAll(db, [
                    Column("bytesDone").set(to: bytesOnDisk),
                    Column("partialETag").set(to: bytesOnDisk > 0 ? etag : nil),
                    DownloadRecord.Columns.updatedAt.set(to: Date()),
                ]) == 1
        }
    }

    // MARK: The holder's transitions (each checks the claim in its own transaction)

    /// `downloading → queued`, bytes and If-Range tag kept: the signed edge URL stopped working,
    /// so the next round asks the store for a fresh one. Not counted as an attempt.
    func requeueForFreshURL(_ claim: DownloadClaim, reason: String) throws {
        try moveDownload(claim.productId, claim: claim, from: [.downloading], to: .queued, [DownloadRecord.Columns.lastError.set(to: reason)])
    }

    /// `downloading → queued` from zero: the server's bytes cannot continue the partial file
    /// (which the transfer already emptied).
    func restartFromZero(_ claim: DownloadClaim, reason: String) throws {
        try moveDownload(claim.productId, claim: claim, from: [.downloading], to: .queued, [
            Column("partialETag").set(to: nil), Column("bytesDone").set(to: 0), DownloadRecord.Columns.lastError.set(to: reason),
        ])
    }

    /// `downloading → waiting`, due at once, bytes kept: the reader or the app stopped the run.
    func interrupt(_ claim: DownloadClaim) throws {
        try moveDownload(claim.productId, claim: claim, from: [.downloading], to: .waiting, [
            DownloadRecord.Columns.nextAttemptAt.set(to: Date()), DownloadRecord.Columns.lastError.set(to: "interrupted"),
        ])
    }

    /// `downloading → verifying`: every byte arrived.
    func beginVerifying(_ claim: DownloadClaim, size: Int64) throws {
        try moveDownload(claim.productId, claim: claim, from: [.downloading], to: .verifying, [Column("bytesDone").set(to: size)])
    }

    /// `verifying → unpacking`: the size and SHA-256 are the catalog's.
    func beginUnpacking(_ claim: DownloadClaim) throws {
        try moveDownload(claim.productId, claim: claim, from: [.verifying], to: .unpacking, [])
    }

    /// `downloading | verifying | unpacking → waiting` after a transient failure, with the attempt
    /// count and when to try again.
    func scheduleRetry(_ claim: DownloadClaim, from state: DownloadState, attempts: Int, at next: Date, error: String) throws {
        try moveDownload(claim.productId, claim: claim, from: [state], to: .waiting, [
            DownloadRecord.Columns.attempts.set(to: attempts),
            DownloadRecord.Columns.nextAttemptAt.set(to: next),
            DownloadRecord.Columns.lastError.set(to: error),
        ])
    }

    /// `downloading | verifying → queued` from zero after bytes that are not the catalog's (a
    /// checksum mismatch, a body past the declared size); the `partial` file goes while the claim holds.
    func requeueAfterMismatch(_ claim: DownloadClaim, from state: DownloadState, mismatches: Int, reason: String, discarding partial: URL) throws {
        try moveDownload(claim.productId, claim: claim, from: [state], to: .queued, [
            Column("mismatches").set(to: mismatches), Column("partialETag").set(to: nil), Column("bytesDone").set(to: 0),
            DownloadRecord.Columns.lastError.set(to: reason),
        ], discarding: partial)
    }

    /// `downloading | verifying | unpacking → failed` for good, with the reason; with a `partial`
    /// file to discard, it goes while the claim holds and the row forgets its bytes.
    func failDownload(_ claim: DownloadClaim, from state: DownloadState, attempts: Int, mismatches: Int, reason: String, discarding partial: URL? = nil) throws {
        try moveDownload(claim.productId, claim: claim, from: [state], to: .failed, [
            DownloadRecord.Columns.attempts.set(to: attempts),
            DownloadRecord.Columns.lastError.set(to: reason),
            DownloadRecord.Columns.nextAttemptAt.set(to: nil),
            Column("mismatches").set(to: mismatches),
        ] + (partial == nil ? [] : [Column("partialETag").set(to: nil), Column("bytesDone").set(to: 0)]), discarding: partial)
    }

    /// Moves a download `claim` holds (or, with `claim` nil, any download) from one of `allowed` to
    /// `target`. Leaving the claimed states releases the claim. The `discarding` file (a partial
    /// file) is removed inside the same transaction once the move is known to be allowed: that must
    /// not happen after another process has claimed the download.
    /// - Throws: ``IllegalTransition`` when the row is elsewhere (for a claim: paused or cancelled
    ///   under it, or claimed by someone else since).
    @discardableResult
    private func moveDownload(_ productId: String, claim: DownloadClaim?, from allowed: Set<DownloadState>, to target: DownloadState, _ assignments: [ColumnAssignment], discarding partial: URL? = nil) throws -> DownloadRecord {
        var all = assignments + [DownloadRecord.Columns.state.set(to: target.rawValue), DownloadRecord.Columns.updatedAt.set(to: Date())]
        if !DownloadState.claimed.contains(target) {
            all += Self.releasingClaim
        }
        let record = try database.write { db -> DownloadRecord in
            var request = DownloadRow.filter(key: productId).filter(allowed.map(\.rawValue).contains(DownloadRecord.Columns.state))
            if let claim {
                request = request.filter(DownloadRecord.Columns.owner == claim.owner.id && DownloadRecord.Columns.claimGeneration == claim.generation)
            }
            let changed = try request.updateAll(db, all)
            let current = try DownloadRow.fetchOne(db, key: productId)?.value
            guard changed == 1, let current else {
                var state = current?.state.rawValue
                if let claim, let current, current.owner != claim.owner.id || current.claimGeneration != claim.generation, DownloadState.claimed.contains(current.state) {
                    state = "\(current.state.rawValue) by another process"
                }
                throw IllegalTransition(subject: "the download of \(productId)", current: state, target: target.rawValue)
            }
            if let partial { unlink(partial.path) }
            return current
        }
        database.events.publish(.download(record))
        return record
    }

    private static var releasingClaim: [ColumnAssignment] { [
        DownloadRecord.Columns.owner.set(to: nil), DownloadRecord.Columns.leaseUntil.set(to: nil),
        DownloadRecord.Columns.leaseBoot.set(to: nil), DownloadRecord.Columns.leaseDeadline.set(to: nil),
    ] }

    /// `unpacking → installed` with its library entry, in one transaction that first checks the
    /// claim still holds, then performs `swap` (which moves the checked folder into the library)
    /// while the database's write lock keeps every other process from claiming, installing or
    /// removing the product. A holder that lost its claim gets ``IllegalTransition`` and swaps
    /// nothing. `note` says what the install cost when it was not the whole archive (an update by
    /// entries). Returns the replaced version's folder, to delete after the commit.
    func markInstalled(_ item: LibraryItem, claim: DownloadClaim, note: String? = nil, swap: LibrarySwap) throws -> (record: DownloadRecord, replaced: URL?) {
        let (record, replaced) = try database.write { db -> (DownloadRecord, URL?) in
            let changed = try Self.claimed(claim, db)
                .filter(DownloadRecord.Columns.state == DownloadState.unpacking.rawValue)
                .updateAll(db, Self.releasingClaim + [
                    DownloadRecord.Columns.state.set(to: DownloadState.installed.rawValue),
                    DownloadRecord.Columns.lastError.set(to: nil), Column("partialETag").set(to: nil),
                    DownloadRecord.Columns.updatedAt.set(to: Date()), DownloadRecord.Columns.transferNote.set(to: note),
                ])
            let current = try DownloadRow.fetchOne(db, key: item.productId)?.value
            guard changed == 1, let current else {
                throw IllegalTransition(subject: "the download of \(item.productId)", current: current?.state.rawValue, target: DownloadState.installed.rawValue)
            }
            let replaced = try swap.installer.perform(swap)
            var row = LibraryItemRow(item)
            try row.save(db)
            return (current, replaced)
        }
        database.events.publish(.download(record))
        return (record, replaced)
    }

    /// Removes a cancelled download's partial file, unless the download was queued again since
    /// (then the file is someone else's to keep).
    func discardCancelledPartial(_ productId: String, partial: URL) throws {
        try database.write { db in
            if try DownloadRow.fetchOne(db, key: productId)?.value.state == .cancelled { unlink(partial.path) }
        }
    }
}
