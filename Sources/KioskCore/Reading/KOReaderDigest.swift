import Crypto
import Foundation

/// The name KOReader gives a file for progress sync (kosync's `document`): the MD5 of up to twelve
/// 1,024-byte samples at offsets 0, 1 Ki, 4 Ki, 16 Ki … 1 Gi (each four times the last), read in
/// order and hashed once, stopping at the first offset past the end (KOReader's
/// `util.partialMD5`). Sampling keeps it cheap for a large PDF; the store computes it for every
/// file it delivers, so it knows which of its products a KOReader device is reading.
///
/// KOReader's loop starts at `lshift(1024, -2)`, which LuaJIT's 32-bit shift makes 0.
public enum KOReaderDigest {
    static let sampleSize = 1_024

    /// The offsets sampled, in order.
    static let offsets: [UInt64] = [0] + (0...10).map { UInt64(1_024) << UInt64(2 * $0) }

    /// `file`'s digest, lowercase hex.
    public static func of(_ file: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var md5 = Insecure.MD5()
        for offset in offsets {
            try handle.seek(toOffset: offset)
            guard let sample = try handle.read(upToCount: sampleSize), !sample.isEmpty else { break }
            md5.update(data: sample)
        }
        return md5.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `text` has a digest's shape: 32 lowercase hex digits (KOReader's, or its MD5 of a
    /// file name when the device syncs by name).
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
