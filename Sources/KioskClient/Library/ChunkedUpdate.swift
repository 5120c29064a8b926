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
/// SHA-256 is the manifest's. The whole file's SHA-256 is taken as it is written and must be the
/// catalog's before the file is installed, as a full download's is: nothing is spliced from two
/// versions. A partial file is a prefix of the new version: an interrupted update resumes from it
/// (its chunks are checked again first, see ``verifiedPrefix(length:chunks:read:)``), and an update
/// that cannot go on by chunks hands it to the ordinary download, which continues from its end.
///
/// **Performance.** Copied chunks are not hashed a second time as they are copied: the installed
/// file is hashed once (cut and hashed in one pass), and the whole file's SHA-256, taken while
/// writing, catches an installed file edited between the cut and the copy; then the partial file
/// is checked chunk by chunk and cut back before the first bad one. Measured on a 50 MB EPUB
/// (docs/benchmarks.md, section 14): hashing each copied chunk again plus the whole file afterwards
/// made the update 1.27 × the time of downloading the file whole over loopback.
struct ChunkedUpdate {
    let logger: Logger

    /// Why the rest is downloaded as a whole file instead (from the prefix built so far).
    typealias Fallback = DeltaUpdate.Fallback

    /// The claim was lost while building (paused, cancelled, or taken by another process).
    struct Stopped: Error {}

    struct Source {
        var manifestURL: String
        var fileURL: String
        var headers: [(name: String, value: String)]
    }

    /// What an update cost.
    struct Result {
        /// The built file's SHA-256, taken as it was written.
        let sha256: String
        /// Bytes received: the manifest and the fetched chunks.
        let bytesFetched: Int64
        let chunksFetched: Int
        let chunks: Int
        let fileSize: Int64

        /// "update 84.0 KiB of 50.0 MiB (5 of 2,611 chunks fetched)".
        var summary: String {
            "update \(ByteCount.text(bytesFetched)) of \(ByteCount.text(fileSize)) (\(chunksFetched) of \(chunks) chunks fetched)"
        }
    }

    /// Builds `record`'s version in `partial` from `installed` and the store.
    /// - Parameter progress: told the bytes on disk now and then; false means the claim is gone.
    /// - Throws: ``Fallback`` (the partial file holds a checked prefix), ``Stopped``, `CancellationError`.
    func run(_ record: DownloadRecord, installed: URL, partial: OpenedPartialFile, manifestSha256: String, source: Source,
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
        var whole = SHA256()
        let kept = try Self.verifiedPrefix(length: partial.size, chunks: chunks, read: { count, at in try partial.read(count, at: at) },
                                           kept: { whole.update(data: $0) })
        try partial.truncate(to: kept)
        let first = placed.firstIndex { $0.offset >= kept } ?? placed.count

        // The installed file, cut as the store cut the new one: each of its chunks by SHA-256.
        let old = try FileHandle(forReadingFrom: installed)
        defer { try? old.close() }
        var held: [String: Int64] = [:]
        for chunk in try ContentChunks.chunks(of: installed) where held[chunk.chunk.sha256] == nil {
            held[chunk.chunk.sha256] = chunk.offset
        }
        let writer = ChunkWriter(placed: placed, next: first, partial: partial, old: old, held: held, whole: whole, progress: progress)
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
            let fetcher = RangeFetcher(url: source.fileURL, headers: source.headers, totalSize: record.size)
            do {
                received = try await fetcher.fetch(ranges) { run, bytes in try writer.add(bytes, run: run) }
            } catch let failure as RangeFetcher.Failure {
                throw Fallback("\(failure)")
            }
        }
        try Task.checkCancellation()
        let sha256 = try writer.finish()
        guard sha256 == record.sha256 else {
            // A copied chunk was not what its cut said (the installed file changed meanwhile): keep
            // what checks chunk by chunk, and let the download fetch the rest.
            let good = try Self.verifiedPrefix(length: partial.size, chunks: chunks) { count, at in try partial.read(count, at: at) }
            try partial.truncate(to: good)
            throw Fallback("the built file's SHA-256 is not the catalog's (the installed file changed while it was read)")
        }
        return Result(sha256: sha256, bytesFetched: manifestBytes + received, chunksFetched: runs.reduce(0) { $0 + $1.count },
                      chunks: chunks.count, fileSize: record.size)
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
    private let old: FileHandle
    private let held: [String: Int64]
    private let progress: @Sendable (Int64) -> Bool
    /// The SHA-256 of every byte written so far, from the file's first.
    private var whole: SHA256
    /// The chunks each range answer holds, in order.
    var runs: [Range<Int>] = []
    /// The next chunk to write.
    private var next: Int
    private var buffer = Data()
    private var reportedAt: Int64 = 0

    init(placed: [ContentChunks.Placed], next: Int, partial: OpenedPartialFile, old: FileHandle, held: [String: Int64], whole: SHA256,
         progress: @escaping @Sendable (Int64) -> Bool) {
        self.whole = whole
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
                try write(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Copies the rest (after the last range), checks every chunk was written, and gives the
    /// SHA-256 of the file written.
    func finish() throws -> String {
        try copyHeld(upTo: placed.count)
        guard buffer.isEmpty else { throw ChunkedUpdate.Fallback("a range answer ended inside a chunk") }
        if !progress(placed.last.map { $0.offset + $0.chunk.length } ?? 0) { throw ChunkedUpdate.Stopped() }
        return FileDigest.hex(whole.finalize())
    }

    /// Copies the chunks before `end` from the installed file. Not hashed again here: the whole
    /// file's SHA-256 is checked at the end (see ``ChunkedUpdate``).
    private func copyHeld(upTo end: Int) throws {
        while next < end {
            guard let from = held[placed[next].chunk.sha256] else {
                throw RangeFetcher.Failure.wrongRange("answers arrived out of order")
            }
            try old.seek(toOffset: UInt64(from))
            let bytes = try old.read(upToCount: Int(placed[next].chunk.length)) ?? Data()
            guard bytes.count == Int(placed[next].chunk.length) else {
                throw ChunkedUpdate.Fallback("the installed file changed while it was read")
            }
            try write(bytes)
        }
    }

    private func write(_ bytes: Data) throws {
        let at = placed[next].offset
        whole.update(data: bytes)
        try bytes.withUnsafeBytes { try partial.write($0, at: at) }
        next += 1
        let done = at + Int64(bytes.count)
        // The claim is checked (and the bytes on disk recorded) every 4 MiB.
        if done - reportedAt >= 4 << 20 {
            reportedAt = done
            guard progress(done) else { throw ChunkedUpdate.Stopped() }
        }
    }
}
