import Crypto
import Foundation
import KioskCore

/// A publication file (EPUB, PDF, CBZ) cut into content-defined chunks, so that an update fetches
/// only the chunks the device does not already hold.
///
/// Where a chunk ends is decided by the bytes just before the cut (a gear hash, as FastCDC and
/// casync do), not by its distance from the start of the file. A chapter that grows by a
/// paragraph moves every later byte, yet the cuts after it fall on the same bytes as before, so
/// every later chunk is the same chunk: only the chunks around the change, and the zip's central
/// directory at the end (whose offsets moved), are new. Fixed-size blocks (zsync, rsync's
/// blocks) would need a rolling match on the device to find them again.
///
/// The store and the device cut with the same table and sizes: the store publishes the new
/// version's chunks in its manifest (``ContentManifest/chunks``), the device cuts its installed
/// version itself, so it needs nothing of the old version from the store.
public enum ContentChunks {
    /// The cutting rule's name, in the manifest: a device that does not know it downloads the file whole.
    public static let scheme = "gear-64-4k-16k-64k"
    /// No cut before this many bytes of a chunk.
    public static let minimumSize = 4 << 10
    /// Always a cut after this many.
    public static let maximumSize = 64 << 10
    /// A cut where the hash's top 14 bits are zero: one chance in 16 Ki per byte past the minimum,
    /// so chunks average about 20 KiB. The top bits depend on the last 64 bytes, the low ones on fewer.
    static let cutMask: UInt64 = ~(UInt64.max >> 14)

    public struct Chunk: Sendable, Equatable, Codable {
        public var length: Int64
        /// Lowercase hex SHA-256 of the chunk's bytes.
        public var sha256: String

        public init(length: Int64, sha256: String) {
            self.length = length
            self.sha256 = sha256
        }
    }

    /// A chunk and where it lies in the file it was cut from.
    public struct Placed: Sendable, Equatable {
        public var offset: Int64
        public var chunk: Chunk

        public init(offset: Int64, chunk: Chunk) {
            self.offset = offset
            self.chunk = chunk
        }
    }

    /// The chunks of `file`, in order, read through a memory map (the page cache holds the bytes,
    /// not the process).
    public static func chunks(of file: URL) throws -> [Placed] {
        let data = try Data(contentsOf: file, options: .alwaysMapped)
        return data.withUnsafeBytes { chunks(of: $0) }
    }

    /// The chunks of `bytes`, in order.
    public static func chunks(of bytes: UnsafeRawBufferPointer) -> [Placed] {
        var placed: [Placed] = []
        var start = 0
        for end in cuts(bytes) {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            placed.append(Placed(offset: Int64(start), chunk: Chunk(length: Int64(end - start), sha256: FileDigest.hex(SHA256.hash(data: slice)))))
            start = end
        }
        return placed
    }

    /// The end of every chunk of `bytes` (the last is `bytes.count`; none for no bytes).
    static func cuts(_ bytes: UnsafeRawBufferPointer) -> [Int] {
        var ends: [Int] = []
        ends.reserveCapacity(bytes.count / (16 << 10) + 1)
        let count = bytes.count
        var start = 0
        gear.withUnsafeBufferPointer { table in
            while start < count {
                let limit = min(count, start + maximumSize)
                var end = limit
                var hash: UInt64 = 0
                var index = start + minimumSize
                // The bytes before the minimum cannot end a chunk; the hash starts from the 64
                // before it, so a cut depends on the same bytes wherever the chunk started.
                var warm = max(start, index - 64)
                while warm < min(index, limit) {
                    hash = (hash << 1) &+ table[Int(bytes[warm])]
                    warm += 1
                }
                while index < limit {
                    hash = (hash << 1) &+ table[Int(bytes[index])]
                    index += 1
                    if hash & cutMask == 0 {
                        end = index
                        break
                    }
                }
                ends.append(end)
                start = end
            }
        }
        return ends
    }

    /// 256 random 64-bit words, the same on every machine: made by SplitMix64 from a fixed seed
    /// rather than written out.
    static let gear: [UInt64] = {
        var state: UInt64 = 0x4B69_6F73_6B43_4443
        return (0..<256).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }()
}
