import KioskCore
import Foundation

/// File work on partial downloads that Foundation does not offer.
enum PartialFile {
    /// Copies the first `length` bytes of `source` into a new file `destination` (which must not
    /// exist), inside the kernel where it can, and syncs it. Neither path may be a link.
    /// - Returns: true when every byte was copied; on false, `destination` may hold part of them.
    static func copyPrefix(of source: String, to destination: String, length: Int64) -> Bool {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { return false }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard output >= 0 else { return false }
        defer { close(output) }
        var copied: Int64 = 0
        while copied < length {
            let step = Platform.copyRange(from: input, to: output, offset: copied, length: length - copied)
            if step > 0 {
                copied += step
                continue
            }
            // The source is shorter than the bytes committed: nothing to trust.
            if step == 0 { return false }
            // EXDEV, ENOSYS or EINVAL (an older kernel or another file system): copy by hand.
            return copyByHand(input, output, from: copied, length: length) && fsync(output) == 0
        }
        return fsync(output) == 0
    }

    private static func copyByHand(_ input: Int32, _ output: Int32, from start: Int64, length: Int64) -> Bool {
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        var offset = start
        while offset < length {
            let count = pread(input, buffer, Int(min(Int64(size), length - offset)), off_t(offset))
            guard count > 0, pwrite(output, buffer, count, off_t(offset)) == count else { return false }
            offset += Int64(count)
        }
        return true
    }

    /// Removes the copies (`ID.partial+TOKEN`) a takeover left when its process died mid-copy.
    static func sweepCopies(in downloads: URL) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] {
            guard let plus = name.range(of: ".partial+") else { continue }
            if ClaimOwner.isGone(String(name[plus.upperBound...])) { unlink(downloads.appendingPathComponent(name).path) }
        }
    }
}
