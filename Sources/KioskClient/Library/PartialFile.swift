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

    /// What a claim does with the partial file it found (``takeOver(_:committed:token:liveOwner:)``).
    enum Takeover: Equatable {
        /// Nothing to take over: the file is this claim's as it is.
        case asItIs
        /// The committed bytes are in a file of this claim's own now, and how they got there.
        case kept(String)
        /// The disk has no room for a copy of them: they stay parked, and the download waits for room.
        case noRoom
        /// Nothing could be kept: the file is gone, and the download starts from its first byte.
        case restart
    }

    /// A claim taken over from an owner that still lives (stopped past its lease, say) gets a
    /// partial file of its own: that owner may hold the old one open and write to it, or empty it,
    /// the moment it runs again. The bytes committed as progress are copied to a new file that
    /// replaces the old name; the old owner's writes land in the file nobody names any more.
    ///
    /// A disk without room for that copy does not cost the bytes (the fault suite's seed 4545: a
    /// download taken over on a full disk asked from byte 0 next): the old file is parked under its
    /// writer's name (``held(_:writer:)``), where that writer's writes still land, and the download
    /// waits for room, as any download on a full disk does. A later claim takes the parked bytes
    /// back: copied once there is room while the writer lives, renamed back once it is gone.
    /// Anything else that goes wrong starts the download from zero, never from bytes in doubt.
    /// - Parameters:
    ///   - committed: the bytes the download's row says were written and synced.
    ///   - token: the new claim's, naming its own copy while it is made.
    ///   - liveOwner: the token of the owner taken over while it lives; nil when it is gone (or none).
    static func takeOver(_ partial: URL, committed: Int64, token: String, liveOwner: String?) -> Takeover {
        if let parked = parked(partial) {
            if FileManager.default.fileExists(atPath: partial.path) || committed == 0 {
                // Started afresh meanwhile (or nothing committed): the parked bytes are not this download's any more.
                unlink(parked.file.path)
            } else if ClaimOwner.isGone(parked.writer) {
                if rename(parked.file.path, partial.path) == 0 { return .kept("took back, their writer gone,") }
                unlink(parked.file.path)
            } else {
                switch copyCommitted(parked.file, to: partial, committed: committed, token: token) {
                case .copied:
                    unlink(parked.file.path)
                    return .kept("took back into a file of this claim's own")
                case .noRoom:
                    return .noRoom
                case .failed:
                    unlink(parked.file.path)
                }
            }
        }
        guard let liveOwner, FileManager.default.fileExists(atPath: partial.path) else { return .asItIs }
        if committed > 0 {
            switch copyCommitted(partial, to: partial, committed: committed, token: token) {
            case .copied:
                return .kept("took over from a stopped process, into a file of this claim's own,")
            case .noRoom:
                if !liveOwner.isEmpty, rename(partial.path, held(partial, writer: liveOwner).path) == 0 { return .noRoom }
            case .failed:
                break
            }
        }
        unlink(partial.path)
        return .restart
    }

    /// Copies the committed prefix of `source` into a file of this claim's own and renames it to `partial`.
    private static func copyCommitted(_ source: URL, to partial: URL, committed: Int64, token: String) -> Copy {
        let copy = partial.path + "+" + token
        let outcome = copyPrefix(of: source.path, to: copy, length: committed)
        if outcome == .copied, rename(copy, partial.path) == 0 { return .copied }
        unlink(copy)
        return outcome == .copied ? .failed : outcome
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
