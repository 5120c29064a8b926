import Foundation
import KioskArchive
import KioskCore
import KioskTransfer
import Logging

/// Updates an installed zip product to a new version by fetching only the entries that changed.
///
/// The new version's manifest is fetched and checked against the SHA-256 the catalog gives for
/// it. The claim's staging folder is then built from the installed files the new version keeps
/// (hard links where the file system allows, copies otherwise) and the added or changed entries,
/// fetched as byte ranges of the new archive on one connection, each unpacked and checked
/// against its SHA-256 as it arrives. The whole tree is then checked against the new manifest,
/// every file read back, as a full install is; a kept file that turns out to differ (edited by
/// hand) is fetched too. Whatever does not fit throws ``Fallback``, the staging folder goes, and
/// the caller downloads the whole archive: the library never gets a tree spliced from two versions.
struct DeltaUpdate {
    let installer: LibraryInstaller
    let home: KioskHome
    let logger: Logger

    /// The largest entry fetched into memory on its own; a larger changed entry means a full download.
    static let maxEntryBytes: Int64 = 256 << 20
    /// The largest manifest accepted.
    static let maxManifestBytes = 64 << 20

    /// Why an update is downloaded whole instead; logged, never shown as a failure.
    struct Fallback: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A checked tree in staging, and what it cost.
    struct Result {
        let unpacked: LibraryInstaller.Unpacked
        let treeDigest: String
        /// When the tree's check began, on the file system's clock.
        let checkedAt: Int64?
        /// Bytes received: the manifest and the fetched entries.
        let bytesFetched: Int64
        let filesChanged: Int
        let archiveSize: Int64

        /// "update 1.2 MiB of 202.2 MiB (3 files changed)".
        var summary: String {
            "update \(ByteCount.text(bytesFetched)) of \(ByteCount.text(archiveSize)) (\(filesChanged) file\(filesChanged == 1 ? "" : "s") changed)"
        }
    }

    typealias Source = UpdateSource

    /// Builds and checks the new version of `record`'s product in the claim's staging folder.
    /// - Throws: ``Fallback`` when only a full download can install it (the staging folder is removed);
    ///   `CancellationError` when cancelled.
    func run(_ record: DownloadRecord, claim: DownloadClaim, manifestSha256: String, source: Source) async throws -> Result {
        let (manifest, manifestBytes) = try await Self.fetchManifest(from: source.manifestURL, headers: source.headers, sha256: manifestSha256, record: record)
        try Self.requireEntryRanges(manifest)
        let staging = try installer.staging(for: claim)
        installer.discard(staging)
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            return try await build(manifest, in: staging, record: record, source: source, manifestBytes: manifestBytes)
        } catch {
            installer.discard(staging)
            if error is CancellationError || error is Fallback { throw error }
            throw Fallback("\(error)")
        }
    }

    /// Fetches the manifest of `record`'s version and checks it is the one the catalog names
    /// (`sha256`) and describes that version. Returns it and its size.
    /// - Throws: ``Fallback`` when there is no such manifest to use.
    static func fetchManifest(from url: String, headers: [(name: String, value: String)], sha256: String, record: DownloadRecord) async throws -> (ContentManifest, Int64) {
        let response: HTTPResponse
        do {
            response = try await HTTPClient().send(HTTPRequest(url: url, headers: headers, timeout: 120, maxResponseBytes: Self.maxManifestBytes))
        } catch let error as TransferError {
            throw Fallback("the manifest could not be fetched: \(error)")
        }
        guard response.status == 200 else {
            throw Fallback("the server answered \(response.status) for the manifest")
        }
        guard FileDigest.sha256(of: response.body) == sha256 else {
            throw Fallback("the manifest is not the one the catalog names (SHA-256 differs)")
        }
        let manifest: ContentManifest
        do {
            manifest = try JSONDecoder().decode(ContentManifest.self, from: response.body)
        } catch {
            throw Fallback("the manifest cannot be read (\(error))")
        }
        guard manifest.archiveSha256 == record.sha256, manifest.archiveSize == record.size else {
            throw Fallback("the manifest describes another archive")
        }
        return (manifest, Int64(response.body.count))
    }

    /// - Throws: ``Fallback`` unless every file entry of `manifest` can be fetched on its own (a zip's).
    static func requireEntryRanges(_ manifest: ContentManifest) throws {
        guard manifest.format == .zip, manifest.hasRanges else {
            throw Fallback("a \(manifest.format.rawValue) archive's entries cannot be fetched on their own")
        }
    }

    private func build(_ manifest: ContentManifest, in staging: URL, record: DownloadRecord, source: Source, manifestBytes: Int64) async throws -> Result {
        let installed = try installer.installed(record.productId)
        let manifestFile = try home.installedManifest(record.productId)
        let previous = (try? Data(contentsOf: manifestFile)).flatMap { try? JSONDecoder().decode(ArchiveManifest.self, from: $0) }
        // Each installed file's status (inode and change time) when the installed tree was checked
        // (see `Library.install`): a file whose status is exactly that still holds the bytes
        // the check read. Equal, not older: a clock stepped back stamps an edit with an older time,
        // never with the very one recorded.
        let trusted = previous == nil ? [:] : InstalledStatus.load(try home.installedStatus(record.productId))
        var plan = try plan(manifest, in: staging, installed: installed, previous: previous, trusted: trusted)
        let checkable = manifest.checkable
        var fetched: Int64 = manifestBytes
        // Changed: fetched (added or changed) and removed files.
        var changed = plan.toFetch.count + (previous?.entries.filter { $0.kind == .file && !plan.seen.contains($0.path) }.count ?? 0)
        // Rounds: the planned entries, then kept files the check finds changed by hand.
        for _ in 0..<4 {
            try Task.checkCancellation()
            if !plan.toFetch.isEmpty {
                fetched += try await fetch(plan.toFetch, into: staging, source: source, archiveSize: manifest.archiveSize)
            }
            let checkStarted = FileClock.boundary(in: home.root)
            do {
                // A kept file written to since it was linked (a hand edit of the installed file
                // while this update ran: they share the inode) is read after all.
                let stillUnchanged = Set(plan.unchanged.filter { path, linked in
                    InstalledStatus.Status(staging.appendingPathComponent(path).path, size: linked.size) == linked
                }.keys)
                try checkable.check(staging, unchangedSinceChecked: stillUnchanged)
                let digest = try LibraryInstaller.treeDigest(of: staging)
                return Result(unpacked: LibraryInstaller.Unpacked(staging: staging, manifest: checkable), treeDigest: digest, checkedAt: checkStarted,
                              bytesFetched: fetched, filesChanged: changed, archiveSize: manifest.archiveSize)
            } catch let mismatch as ArchiveManifest.Mismatch {
                guard plan.reused.contains(mismatch.path), let entry = manifest.entries.first(where: { $0.path == mismatch.path }) else {
                    throw Fallback("the updated tree does not match the new version (\(mismatch))")
                }
                logger.info("an installed file differs from what was installed; fetching it", metadata: ["product": "\(record.productId)", "path": "\(mismatch.path)"])
                unlink(staging.appendingPathComponent(mismatch.path).path)
                plan.reused.remove(mismatch.path)
                plan.unchanged[mismatch.path] = nil
                plan.toFetch = [entry]
                changed += 1
            }
        }
        throw Fallback("too many installed files differ from what was installed")
    }

    /// What the installed version gives the new one, and what must be fetched.
    private struct Plan {
        /// Every path the new manifest names.
        var seen = Set<String>()
        var toFetch: [ContentManifest.Entry] = []
        /// Kept files linked (or copied) into staging from the installed tree.
        var reused = Set<String>()
        /// Kept files trusted unread, with their status once linked into staging.
        var unchanged: [String: InstalledStatus.Status] = [:]
    }

    /// Lays out the new version's folders in `staging` and links into it each installed file the
    /// new manifest keeps (any of the right size when the installed version's manifest is gone);
    /// the rest is to be fetched.
    /// - Throws: ``Fallback`` for a manifest this update cannot build from (a link, an odd or
    ///   repeated path, an entry too large to fetch on its own).
    private func plan(_ manifest: ContentManifest, in staging: URL, installed: URL, previous: ArchiveManifest?, trusted: [String: String]) throws -> Plan {
        let kept = Dictionary((previous?.entries ?? []).map { ($0.path, $0) }) { first, _ in first }

        // Folders made so far: most files share theirs, and asking the file system each time costs.
        var made: Set<String> = [staging.path]
        func makeFolder(_ folder: URL) throws {
            guard made.insert(folder.path).inserted else { return }
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        // Installed folders found to be folders, not links: a folder replaced by a link to one outside
        // the home would have its files linked into the library (the link call follows every part
        // of the path but the last).
        var realFolders: Set<String> = []
        func foldersAreReal(_ folders: ArraySlice<String>, under root: URL) -> Bool {
            var path = root.path
            for folder in [""] + folders {
                if !folder.isEmpty { path += "/" + folder }
                if realFolders.contains(path) { continue }
                var info = stat()
                guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return false }
                realFolders.insert(path)
            }
            return true
        }
        var plan = Plan()
        for entry in manifest.entries {
            let parts = try ArchiveExtractor.checkedRelativePath(entry.path)
            guard parts.joined(separator: "/") == entry.path, plan.seen.insert(entry.path).inserted else {
                throw Fallback("the manifest names \"\(entry.path)\" oddly or twice")
            }
            let target = staging.appendingPathComponent(entry.path)
            switch entry.kind {
            case .directory:
                try makeFolder(target)
            case .symlink:
                throw Fallback("the manifest holds a link, which only a full download installs")
            case .file:
                try makeFolder(target.deletingLastPathComponent())
                guard entry.length.map({ $0 <= Self.maxEntryBytes }) == true, entry.sha256 != nil else {
                    throw Fallback("\"\(entry.path)\" is too large to fetch on its own")
                }
                let old = installed.appendingPathComponent(entry.path)
                // Without a manifest of the installed version, any file of the right size is tried:
                // the check below reads it and fetches it after all when it differs.
                let same = previous == nil ? true : kept[entry.path].map { $0.kind == .file && $0.sha256 == entry.sha256 } == true
                if same, foldersAreReal(parts.dropLast(), under: installed), let before = InstalledStatus.Status(old.path, size: entry.size), Self.linkOrCopy(old, to: target) {
                    plan.reused.insert(entry.path)
                    // Unread only when its status is the one recorded after the installed tree's check
                    // and nothing wrote to it between that look and the link (a write moves the
                    // modification time; a link moves only the change time).
                    if trusted[entry.path] == before.recorded, let linked = InstalledStatus.Status(target.path, size: entry.size),
                       linked.inode == before.inode, linked.modified == before.modified {
                        plan.unchanged[entry.path] = linked
                    }
                } else {
                    plan.toFetch.append(entry)
                }
            }
        }
        return plan
    }

    /// Fetches `entries` (adjacent ones in one range), unpacking and checking each as its bytes
    /// complete. Returns the bytes received.
    private func fetch(_ entries: [ContentManifest.Entry], into staging: URL, source: Source, archiveSize: Int64) async throws -> Int64 {
        let sorted = entries.sorted { ($0.offset ?? 0) < ($1.offset ?? 0) }
        var groups: [[ContentManifest.Entry]] = []
        for entry in sorted {
            if let last = groups.last?.last, let lastOffset = last.offset, let lastLength = last.length, lastOffset + lastLength == entry.offset {
                groups[groups.count - 1].append(entry)
            } else {
                groups.append([entry])
            }
        }
        let ranges = groups.map { group -> (offset: Int64, length: Int64) in
            let first = group[0].offset ?? 0
            return (first, group.reduce(0) { $0 + ($1.length ?? 0) })
        }
        let assembler = EntryAssembler(groups: groups, staging: staging)
        var fetcher = RangeFetcher(url: source.contentURL, headers: source.headers, totalSize: archiveSize)
        fetcher.lowSpeedTime = source.stallSeconds
        fetcher.maxReceiveSpeed = source.maxReceiveSpeed
        do {
            let received = try await fetcher.fetch(ranges) { index, bytes in try assembler.add(bytes, group: index) }
            try assembler.finish()
            return received
        } catch let failure as RangeFetcher.Failure {
            throw Fallback("\(failure)")
        } catch let mismatch as ZipEntryReader.Mismatch {
            throw Fallback("\(mismatch)")
        }
    }


    /// A hard link costs no bytes and no time; the tree check reads it back all the same.
    private static func linkOrCopy(_ source: URL, to destination: URL) -> Bool {
        if link(source.path, destination.path) == 0 { return true }
        return (try? FileManager.default.copyItem(at: source, to: destination)) != nil
    }
}

/// Splits range answers into their entries and unpacks each one as soon as its bytes are whole.
final class EntryAssembler: @unchecked Sendable {
    private let groups: [[ContentManifest.Entry]]
    private let staging: URL
    private var group = 0
    private var entry = 0
    private var buffer = Data()

    init(groups: [[ContentManifest.Entry]], staging: URL) {
        self.groups = groups
        self.staging = staging
    }

    func add(_ bytes: UnsafeRawBufferPointer, group index: Int) throws {
        guard index == group else { throw RangeFetcher.Failure.wrongRange("answers arrived out of order") }
        var rest = bytes[...]
        while !rest.isEmpty {
            guard entry < groups[group].count else { throw RangeFetcher.Failure.wrongRange("more bytes than the manifest's entries") }
            let current = groups[group][entry]
            let wanted = Int(current.length ?? 0) - buffer.count
            let take = min(wanted, rest.count)
            let chunk = UnsafeRawBufferPointer(rebasing: rest.prefix(take))
            if let base = chunk.baseAddress { buffer.append(base.assumingMemoryBound(to: UInt8.self), count: chunk.count) }
            rest = rest.dropFirst(take)
            if buffer.count == Int(current.length ?? 0) {
                try ZipEntryReader().unpack(buffer, as: current, to: staging.appendingPathComponent(current.path))
                buffer.removeAll(keepingCapacity: true)
                entry += 1
                if entry == groups[group].count {
                    group += 1
                    entry = 0
                }
            }
        }
    }

    func finish() throws {
        guard group == groups.count, buffer.isEmpty else { throw RangeFetcher.Failure.wrongRange("the answers ended before every entry arrived") }
    }
}

/// An installed file's status, `inode:ctime-in-ns`: what an update compares to trust a kept file
/// without reading it.
///
/// The status change time cannot be set by anyone (any write, rename, link or mode change moves
/// it to the clock's now), so a file whose inode and change time are exactly those recorded after
/// the tree was checked was not touched since. Compared for equality only: a comparison of times
/// (older than the check) is inverted by a clock stepped back, which stamps a later edit with an
/// older time.
enum InstalledStatus {
    /// What `lstat` says of a regular file.
    struct Status: Equatable {
        var inode: UInt64
        var changed: Int64
        var modified: Int64
        var size: Int64

        /// The status of a regular file of `size` bytes, or nil (not there, not a regular file, other size).
        init?(_ path: String, size: Int64) {
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == size else { return nil }
            inode = UInt64(info.st_ino)
            changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
            modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            self.size = size
        }

        /// As the status file keeps it: `inode:ctime`.
        var recorded: String { "\(inode):\(changed)" }
    }

    /// Every regular file under `tree` whose status last changed before `stamp` (the file clock's
    /// boundary taken before the tree's check read it), by relative path; none without a stamp.
    static func record(tree: URL, before stamp: Int64?) -> [String: String] {
        guard let stamp, let walker = FileManager.default.enumerator(atPath: tree.path) else { return [:] }
        var statuses: [String: String] = [:]
        var info = stat()
        while let relative = walker.nextObject() as? String {
            guard lstat(tree.appendingPathComponent(relative).path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            let changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
            if changed < stamp { statuses[relative] = status(info) }
        }
        return statuses
    }

    /// Keeps `statuses` for the next update; a hint (a lost file means kept files are read again).
    static func save(_ statuses: [String: String], to file: URL, logger: Logger) {
        do {
            try JSONEncoder.kiosk.encode(statuses).write(to: file)
        } catch {
            logger.info("could not keep the installed files' status; the next update reads them instead", metadata: ["file": "\(file.path)", "error": "\(error)"])
        }
    }

    /// What ``save(_:to:logger:)`` kept; empty when missing or torn.
    static func load(_ file: URL) -> [String: String] {
        (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode([String: String].self, from: $0) } ?? [:]
    }

    private static func status(_ info: stat) -> String {
        "\(info.st_ino):\(Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))"
    }
}

/// The file system's own clock, for comparing with files' status change times.
///
/// The kernel stamps files with a coarse clock (a tick behind the precise one), so a precise
/// `clock_gettime` can be later than the stamp of a file written after it. A file created now
/// carries the stamp any later write will be at least equal to.
enum FileClock {
    /// A stamp later than that of every change made before the call, and no later than any made
    /// after it returns: the file system's clock once it has ticked past its reading now (a
    /// tick is 1–10 ms). A change in the same tick as a plain ``now(in:)`` could be on either
    /// side of it; with this boundary, none is. Nil when the clock does not move within 50 ms
    /// (a file system stamping whole seconds): then nothing is trusted by time.
    static func boundary(in folder: URL) -> Int64? {
        guard let first = now(in: folder) else { return nil }
        for _ in 0..<100 {
            usleep(500)
            guard let next = now(in: folder) else { return nil }
            if next > first { return next }
        }
        return nil
    }

    /// The status change time, in nanoseconds, of a file created in `folder`: one with no name
    /// where the file system can (``Platform/openUnnamed(in:)``), else one created and removed. A
    /// named probe outlived a kill between its creation and its removal, and the fault suite found
    /// it in a reader's home (run AU, 2026-12-01: `.kiosk-clock-…` in home c).
    static func now(in folder: URL) -> Int64? {
        var probe: String?
        var descriptor = Platform.openUnnamed(in: folder.path)
        if descriptor < 0 {
            let named = folder.appendingPathComponent(".kiosk-clock-\(UUID().uuidString)").path
            descriptor = open(named, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            probe = named
        }
        guard descriptor >= 0 else { return nil }
        defer {
            close(descriptor)
            if let probe { unlink(probe) }
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
    }

    /// Whether no file or folder in `tree` had its status changed in `start ..< end` (each is
    /// older, or changed at or after `end`). A tree that cannot be read counts as changed.
    static func noFileChanged(in tree: URL, between start: Int64, and end: Int64) -> Bool {
        guard let walker = FileManager.default.enumerator(atPath: tree.path) else { return false }
        var info = stat()
        while let relative = walker.nextObject() as? String {
            guard lstat(tree.appendingPathComponent(relative).path, &info) == 0 else { return false }
            let changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
            if changed >= start && changed < end { return false }
        }
        return true
    }
}
