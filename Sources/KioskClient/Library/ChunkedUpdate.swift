import Crypto
import Foundation
import KioskArchive
import KioskCore
import KioskTransfer
import Logging

/// Updates an installed publication file (EPUB, PDF, CBZ) to a new version by fetching only the
/// chunks of it the installed version does not hold.
///
/// The new version's manifest lists its content-defined chunks (``ContentChunks``); it is fetched
/// and checked against the SHA-256 the catalog gives for it. The device cuts its installed file
/// by the same rule and builds the new version in the download's own partial file, strictly in
/// order: each chunk is copied from the installed file (found by the SHA-256 its cut gave) or
/// taken from ranges of the new version on one connection, a fetched chunk written only once its
/// SHA-256 is the manifest's. The built file is then installed as a full download is, after the
/// installer's check has read it back and found the catalog's SHA-256: nothing is spliced from
/// two versions. A partial file is a prefix of the new version: an interrupted update resumes
/// from it (its chunks are checked again first, see ``verifiedPrefix(length:chunks:read:kept:)``;
/// so does a build whose check fails), and an update that cannot go on by chunks hands it to the
/// ordinary download, which continues from its end.
///
/// **Performance.** Copied chunks are hashed only once, when the installed file is cut, and copied
/// by the kernel (`copy_file_range`), runs of adjacent chunks at a time; the one whole-file
/// SHA-256 is the installer's read-back check, which catches an installed file edited between
/// the cut and the copy. Measured on a 50 MB EPUB (docs/benchmarks.md, section 14): hashing each
/// copied chunk again as it was copied, then the whole file, made the update 1.27–1.6 × the time
/// of downloading the file whole over loopback; `perf` gave SHA-256 36 % of its time, a third
/// of that the copy's.
struct ChunkedUpdate {
    let logger: Logger

    /// Why the rest is downloaded as a whole file instead (from the prefix built so far).
    typealias Fallback = DeltaUpdate.Fallback

    /// The claim was lost while building (paused, cancelled, or taken by another process).
    struct Stopped: Error {}

    typealias Source = UpdateSource

    /// What an update cost.
    struct Result {
        /// Bytes received: the manifest and the fetched chunks.
        let bytesFetched: Int64
        let chunksFetched: Int
        /// The new version's chunks, for the next update (``InstalledChunks``).
        let chunks: [ContentChunks.Chunk]
        let fileSize: Int64

        /// "update 84.0 KiB of 50.0 MiB (5 of 2,611 chunks fetched)".
        var summary: String {
            "update \(ByteCount.text(bytesFetched)) of \(ByteCount.text(fileSize)) (\(chunksFetched) of \(chunks.count) chunks fetched)"
        }
    }

    /// Builds `record`'s version in `partial` from `installed` and the store.
    /// - Parameter known: the installed file's chunks when they are known (``InstalledChunks``);
    ///   nil, and the file is cut and hashed here.
    /// - Parameter progress: told the bytes on disk now and then; false means the claim is gone.
    /// - Throws: ``Fallback`` (the partial file holds a checked prefix), ``Stopped``, `CancellationError`.
    func run(_ record: DownloadRecord, installed: URL, known: [ContentChunks.Chunk]?, partial: OpenedPartialFile, manifestSha256: String, source: Source,
             progress: @escaping @Sendable (Int64) -> Bool) async throws -> Result {
        let (manifest, manifestBytes) = try await DeltaUpdate.fetchManifest(from: source.manifestURL, headers: source.headers, sha256: manifestSha256, record: record)
        let chunks = try Self.usableChunks(manifest, size: record.size)
        var placed: [ContentChunks.Placed] = []
        var offset: Int64 = 0
        for chunk in chunks {
            placed.append(ContentChunks.Placed(offset: offset, chunk: chunk))
            offset += chunk.length
        }
        // What an interrupted update (or download) left: its chunks checked again, the rest cut off.
        let kept = try Self.verifiedPrefix(length: partial.size, chunks: chunks) { count, at in try partial.read(count, at: at) }
        try partial.truncate(to: kept)
        let first = placed.firstIndex { $0.offset >= kept } ?? placed.count

        // The installed file, cut as the store cut the new one: each of its chunks by SHA-256.
        let old = open(installed.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard old >= 0 else { throw Fallback("the installed file cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(old) }
        var held: [String: Int64] = [:]
        if let known {
            var at: Int64 = 0
            for chunk in known {
                if held[chunk.sha256] == nil { held[chunk.sha256] = at }
                at += chunk.length
            }
        } else {
            let cut: [ContentChunks.Placed]
            do {
                cut = try ContentChunks.chunks(of: installed)
            } catch {
                throw Fallback("the installed file cannot be read (\(error))")
            }
            for chunk in cut where held[chunk.chunk.sha256] == nil {
                held[chunk.chunk.sha256] = chunk.offset
            }
        }
        let writer = ChunkWriter(placed: placed, next: first, partial: partial, old: old, held: held, progress: progress)
        // Runs of chunks the installed file lacks, each fetched as one range.
        var ranges: [(offset: Int64, length: Int64)] = []
        var runs: [Range<Int>] = []
        var index = first
        while index < placed.count {
            guard held[placed[index].chunk.sha256] == nil else {
                index += 1
                continue
            }
            let start = index
            while index < placed.count, held[placed[index].chunk.sha256] == nil { index += 1 }
            runs.append(start..<index)
            ranges.append((placed[start].offset, placed[index - 1].offset + placed[index - 1].chunk.length - placed[start].offset))
        }
        writer.runs = runs
        var received: Int64 = 0
        if !ranges.isEmpty {
            var fetcher = RangeFetcher(url: source.contentURL, headers: source.headers, totalSize: record.size)
            fetcher.lowSpeedTime = source.stallSeconds
            fetcher.maxReceiveSpeed = source.maxReceiveSpeed
            do {
                received = try await fetcher.fetch(ranges) { run, bytes in try writer.add(bytes, run: run) }
            } catch let failure as RangeFetcher.Failure {
                throw Fallback("\(failure)")
            }
        }
        try Task.checkCancellation()
        try writer.finish()
        return Result(bytesFetched: manifestBytes + received, chunksFetched: runs.reduce(0) { $0 + $1.count },
                      chunks: chunks, fileSize: record.size)
    }

    /// The manifest's chunks, when this device can use them: cut by the rule it knows, adding up
    /// to the file, none larger than the rule allows (a chunk is held in memory to be checked).
    static func usableChunks(_ manifest: ContentManifest, size: Int64) throws -> [ContentChunks.Chunk] {
        guard manifest.chunking == ContentChunks.scheme, let chunks = manifest.chunks else {
            throw Fallback("the manifest gives no chunks cut by \(ContentChunks.scheme)")
        }
        guard chunks.allSatisfy({ $0.length > 0 && $0.length <= ContentChunks.maximumSize && $0.sha256.count == 64 }),
              chunks.reduce(0, { $0 + $1.length }) == size
        else {
            throw Fallback("the manifest's chunks do not make up the file")
        }
        return chunks
    }

    /// How many of the first `length` bytes are whole chunks that match `chunks`: the bytes to keep.
    /// - Parameter kept: given each chunk that matches, in order.
    static func verifiedPrefix(length: Int64, chunks: [ContentChunks.Chunk], read: (Int, Int64) throws -> Data, kept: (Data) -> Void = { _ in }) throws -> Int64 {
        var offset: Int64 = 0
        for chunk in chunks {
            guard offset + chunk.length <= length else { break }
            let bytes = try read(Int(chunk.length), offset)
            guard bytes.count == Int(chunk.length), FileDigest.sha256(of: bytes) == chunk.sha256 else { break }
            kept(bytes)
            offset += chunk.length
        }
        return offset
    }
}

/// Writes the new version's chunks into the partial file in order: those the installed file holds
/// copied from it, the others as their range answers arrive, each checked before it is written.
final class ChunkWriter: @unchecked Sendable {
    private let placed: [ContentChunks.Placed]
    private let partial: OpenedPartialFile
    /// The installed file, open for reading.
    private let old: Int32
    private let held: [String: Int64]
    private let progress: @Sendable (Int64) -> Bool
    /// The chunks each range answer holds, in order.
    var runs: [Range<Int>] = []
    /// The next chunk to write.
    private var next: Int
    private var buffer = Data()
    private var reportedAt: Int64 = 0

    init(placed: [ContentChunks.Placed], next: Int, partial: OpenedPartialFile, old: Int32, held: [String: Int64],
         progress: @escaping @Sendable (Int64) -> Bool) {
        self.placed = placed
        self.next = next
        self.partial = partial
        self.old = old
        self.held = held
        self.progress = progress
    }

    /// Bytes of range answer `run`.
    func add(_ bytes: UnsafeRawBufferPointer, run: Int) throws {
        guard run < runs.count else { throw RangeFetcher.Failure.wrongRange("more answers than ranges asked for") }
        try copyHeld(upTo: runs[run].lowerBound)
        var rest = bytes[...]
        while !rest.isEmpty {
            guard next < runs[run].upperBound else { throw RangeFetcher.Failure.wrongRange("more bytes than the range's chunks") }
            let wanted = Int(placed[next].chunk.length) - buffer.count
            let take = min(wanted, rest.count)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest.prefix(take)))
            rest = rest.dropFirst(take)
            if buffer.count == Int(placed[next].chunk.length) {
                guard FileDigest.sha256(of: buffer) == placed[next].chunk.sha256 else {
                    throw ChunkedUpdate.Fallback("a fetched chunk at byte \(placed[next].offset) does not match the manifest")
                }
                // The last chunk of a range: the claim is checked before the next range is asked for.
                try write(buffer, endsRange: next + 1 == runs[run].upperBound)
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Copies the rest (after the last range) and checks every chunk was written.
    func finish() throws {
        try copyHeld(upTo: placed.count)
        guard buffer.isEmpty else { throw ChunkedUpdate.Fallback("a range answer ended inside a chunk") }
        if !progress(placed.last.map { $0.offset + $0.chunk.length } ?? 0) { throw ChunkedUpdate.Stopped() }
    }

    /// Copies the chunks before `end` from the installed file, each run of chunks that lie one
    /// after another there too in one kernel copy. Not hashed again here (see ``ChunkedUpdate``).
    private func copyHeld(upTo end: Int) throws {
        while next < end {
            guard let from = held[placed[next].chunk.sha256] else {
                throw RangeFetcher.Failure.wrongRange("answers arrived out of order")
            }
            var length = placed[next].chunk.length
            var last = next
            while last + 1 < end, length < 8 << 20, let after = held[placed[last + 1].chunk.sha256], after == from + length {
                last += 1
                length += placed[last].chunk.length
            }
            do {
                try partial.copy(from: old, at: from, length: length, to: placed[next].offset)
            } catch let unreadable as OpenedPartialFile.SourceUnreadable {
                // The installed file changed or went: the rest comes from the store.
                throw ChunkedUpdate.Fallback("the installed file could not be copied from (\(unreadable))")
            }
            next = last
            try advance(to: placed[last].offset + placed[last].chunk.length)
        }
    }

    private func write(_ bytes: Data, endsRange: Bool) throws {
        let at = placed[next].offset
        try bytes.withUnsafeBytes { try partial.write($0, at: at) }
        try advance(to: at + Int64(bytes.count), report: endsRange)
    }

    /// The chunk `next` is written, ending at byte `done`.
    private func advance(to done: Int64, report: Bool = false) throws {
        next += 1
        // The claim is checked (and the bytes on disk recorded) at the end of each range and
        // every 4 MiB of copies.
        if report || done - reportedAt >= 4 << 20 {
            reportedAt = done
            guard progress(done) else { throw ChunkedUpdate.Stopped() }
        }
    }
}

/// An installed publication file's chunks, kept after an update by chunks so that the next update
/// need not cut and hash the installed file again (50 MB: 40 % of an update's time in `perf`).
///
/// A hint, never a proof: it is used only while the installed file is the very one it was written
/// for (its inode and status change time, which every write moves) and of the version it names.
/// An installed file changed some other way still cannot splice two versions: the built file is
/// checked whole against the catalog's SHA-256 before it is installed.
struct InstalledChunks: Codable {
    /// The version the chunks are of.
    var sha256: String
    /// `inode:ctime` of the installed file when they were kept (``InstalledStatus/Status/recorded``).
    var status: String
    var chunks: [ContentChunks.Chunk]

    /// The chunks kept for `file` of version `sha256`, if `file` has not changed since.
    static func load(_ saved: URL, for file: URL, sha256: String) -> [ContentChunks.Chunk]? {
        guard let data = try? Data(contentsOf: saved), let kept = try? JSONDecoder().decode(InstalledChunks.self, from: data),
              kept.sha256 == sha256 else { return nil }
        let size = kept.chunks.reduce(Int64(0)) { $0 + $1.length }
        guard InstalledStatus.Status(file.path, size: size)?.recorded == kept.status else { return nil }
        return kept.chunks
    }

    /// Keeps `chunks` of version `sha256` for `file` as it is now; a file that cannot be written is only logged.
    static func save(_ chunks: [ContentChunks.Chunk], sha256: String, for file: URL, to saved: URL, logger: Logger) {
        let size = chunks.reduce(0) { $0 + $1.length }
        guard let status = InstalledStatus.Status(file.path, size: size) else { return }
        do {
            try FileManager.default.createDirectory(at: saved.deletingLastPathComponent(), withIntermediateDirectories: true)
            try JSONEncoder().encode(InstalledChunks(sha256: sha256, status: status.recorded, chunks: chunks)).write(to: saved, options: .atomic)
        } catch {
            logger.info("could not keep the installed file's chunks; the next update cuts it again", metadata: ["file": "\(saved.path)", "error": "\(error)"])
        }
    }
}
