import Crypto
import Foundation

/// SHA-256 of files and bytes, as lowercase hex.
public enum FileDigest {
    /// Hashes a file in 1 MiB reads, so memory stays flat whatever its size.
    public static func sha256(of url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
        }
        return hex(hasher.finalize())
    }

    /// Hashes bytes in memory.
    public static func sha256(of data: Data) -> String {
        hex(SHA256.hash(data: data))
    }

    /// Lowercase hex of any digest.
    public static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        // Two table look-ups a byte: String(format:) goes through CoreFoundation per byte, which
        // showed in the server's profile (receipt IDs, token hashes) at 4 % of a purchase.
        var text: [UInt8] = []
        text.reserveCapacity(digest.underestimatedCount * 2)
        for byte in digest {
            text.append(hexDigits[Int(byte >> 4)])
            text.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
