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
/// order: each chunk is copied from the installed file or taken from ranges of the new version
/// on one connection, and written only once its SHA-256 is the manifest's. So the partial file is
/// always a checked prefix of the new version: an interrupted update resumes from it (its chunks
/// are checked again first, see ``verifiedPrefix(length:chunks:read:)``), and an update that
/// cannot go on by chunks hands it to the ordinary download, which continues from its end. The
/// finished file is then verified whole and installed as a full download is: nothing is spliced
/// from two versions.
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
        let kept = try Self.verifiedPrefix(length: partial.size, chunks: chunks) { count, at in try partial.read(count, at: at) }
        try partial.truncate(to: kept)
        let first = placed.firstIndex { $0.offset >= kept } ?? placed.count

        // The installed file, cut as the store cut the new one: each of its chunks by SHA-256.
        let old = try FileHandle(forReadingFrom: installed)
        defer { try? old.close() }
        var held: [String: Int64] = [:]
        for chunk in try ContentChunks.chunks(of: installed) where held[chunk.chunk.sha256] == nil {
            held[chunk.chunk.sha256] = chunk.offset
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
            let fetcher = RangeFetcher(url: source.fileURL, headers: source.headers, totalSize: record.size)
            do {
                received = try await fetcher.fetch(ranges) { run, bytes in try writer.add(bytes, run: run) }
            } catch let failure as RangeFetcher.Failure {
                throw Fallback("\(failure)")
            }
        }
        try Task.checkCancellation()
        try writer.finish()
        return Result(bytesFetched: manifestBytes + received, chunksFetched: runs.reduce(0) { $0 + $1.count },
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
    static func verifiedPrefix(length: Int64, chunks: [ContentChunks.Chunk], read: (Int, Int64) throws -> Data) throws -> Int64 {
        var offset: Int64 = 0
        for chunk in chunks {
            guard offset + chunk.length <= length else { break }
            let bytes = try read(Int(chunk.length), offset)
            guard bytes.count == Int(chunk.length), FileDigest.sha256(of: bytes) == chunk.sha256 else { break }
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
    /// The chunks each range answer holds, in order.
    var runs: [Range<Int>] = []
    /// The next chunk to write.
    private var next: Int
    private var buffer = Data()
    private var reportedAt: Int64 = 0

    init(placed: [ContentChunks.Placed], next: Int, partial: OpenedPartialFile, old: FileHandle, held: [String: Int64], progress: @escaping @Sendable (Int64) -> Bool) {
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

    /// Copies the rest (after the last range) and checks every chunk was written.
    func finish() throws {
        try copyHeld(upTo: placed.count)
        guard buffer.isEmpty else { throw ChunkedUpdate.Fallback("a range answer ended inside a chunk") }
        if !progress(placed.last.map { $0.offset + $0.chunk.length } ?? 0) { throw ChunkedUpdate.Stopped() }
    }

    /// Copies the chunks before `end` from the installed file, each checked as it is read (the
    /// installed file may have been edited since it was cut).
    private func copyHeld(upTo end: Int) throws {
        while next < end {
            guard let from = held[placed[next].chunk.sha256] else {
                throw RangeFetcher.Failure.wrongRange("answers arrived out of order")
            }
            try old.seek(toOffset: UInt64(from))
            let bytes = try old.read(upToCount: Int(placed[next].chunk.length)) ?? Data()
            guard FileDigest.sha256(of: bytes) == placed[next].chunk.sha256 else {
                throw ChunkedUpdate.Fallback("the installed file changed while it was read")
            }
            try write(bytes)
        }
    }

    private func write(_ bytes: Data) throws {
        let at = placed[next].offset
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
