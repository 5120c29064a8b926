import KioskCore
import Foundation

/// File work on partial downloads that Foundation does not offer.
enum PartialFile {
    /// How a copy of a prefix ended.
    enum Copy: Equatable {
        case copied
        /// The disk (or the quota) had no room for it: the source's bytes are as good as before.
        case noRoom
        /// Anything else (the source shorter than the bytes committed, a read error): nothing to trust.
        case failed
    }

    /// Copies the first `length` bytes of `source` into a new file `destination` (which must not
    /// exist), inside the kernel where it can, and syncs it. Neither path may be a link.
    /// On anything but `.copied`, `destination` may hold part of them.
    static func copyPrefix(of source: String, to destination: String, length: Int64) -> Copy {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { return .failed }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard output >= 0 else { return outcome(errno) }
        defer { close(output) }
        var copied: Int64 = 0
        while copied < length {
            let step = Platform.copyRange(from: input, to: output, offset: copied, length: length - copied)
            if step > 0 {
                copied += step
                continue
            }
            // The source is shorter than the bytes committed: nothing to trust.
            if step == 0 { return .failed }
            if errno == ENOSPC || errno == EDQUOT { return .noRoom }
            // EXDEV, ENOSYS or EINVAL (an older kernel or another file system): copy by hand.
            if let failed = copyByHand(input, output, from: copied, length: length) { return outcome(failed) }
            break
        }
        return fsync(output) == 0 ? .copied : outcome(errno)
    }

    private static func outcome(_ code: Int32) -> Copy {
        code == ENOSPC || code == EDQUOT ? .noRoom : .failed
    }

    /// - Returns: nil when every byte was copied, else the error number.
    private static func copyByHand(_ input: Int32, _ output: Int32, from start: Int64, length: Int64) -> Int32? {
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        var offset = start
        while offset < length {
            let count = pread(input, buffer, Int(min(Int64(size), length - offset)), off_t(offset))
            guard count > 0 else { return count == 0 ? EIO : errno }
            guard pwrite(output, buffer, count, off_t(offset)) == count else { return errno }
            offset += Int64(count)
        }
        return nil
    }

    /// Where a partial file is parked while a stopped process that may still write to it lives and
    /// the disk has no room for a copy of its committed bytes (``Library``'s takeover):
    /// `ID.held+TOKEN`, the token of the process whose writes may land in it.
    static func held(_ partial: URL, writer token: String) -> URL {
        partial.deletingLastPathComponent().appendingPathComponent(partial.deletingPathExtension().lastPathComponent + ".held+" + token)
    }

    /// The parked partial file of `partial`'s product, if any, and the token of its writer.
    static func parked(_ partial: URL) -> (file: URL, writer: String)? {
        let prefix = partial.deletingPathExtension().lastPathComponent + ".held+"
        let folder = partial.deletingLastPathComponent()
        guard let name = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return (folder.appendingPathComponent(name), String(name.dropFirst(prefix.count)))
    }

    /// Removes the copies (`ID.partial+TOKEN`) a takeover left when its process died mid-copy.
    static func sweepCopies(in downloads: URL) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] {
            guard let plus = name.range(of: ".partial+") else { continue }
            if ClaimOwner.isGone(String(name[plus.upperBound...])) { unlink(downloads.appendingPathComponent(name).path) }
        }
    }
}
