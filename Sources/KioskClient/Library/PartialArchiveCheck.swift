import Foundation
import KioskArchive
import KioskCore

/// Checks the partial file of a resumed zip or epub download entry by entry against its
/// version's manifest, so the resume continues after the bytes known good instead of after
/// whatever a crash left behind (a torn write, a page the disk never flushed, a flipped byte).
///
/// File entries are checked in archive order from the first: each one that lies wholly inside
/// the partial file is unpacked in memory and its SHA-256 compared with the manifest's. The first
/// that fails ends what is kept at its first byte, so nothing from it on is trusted. When every
/// whole entry passes, the file is kept as it is: the bytes of the entry it ends in cannot be
/// checked until the rest arrives. Bytes no file entry covers (folder headers, the central
/// directory) carry no hash of their own. Like everything else they are covered by the
/// whole-archive SHA-256 once the download completes: this check comes earlier and is finer, it
/// never replaces that one.
struct PartialArchiveCheck {
    /// What the check found.
    struct Outcome: Equatable {
        /// How many of the partial file's first bytes to keep.
        var keep: Int64
        /// Entries read back and found good.
        var entriesChecked: Int
        /// The first entry that did not match, if one did not.
        var failed: String?
    }

    let manifest: ContentManifest

    /// An entry larger than this is not read into memory: the check ends before it and the
    /// file is kept from there on as the length-based resume keeps it.
    static let maxEntryBytes = DeltaUpdate.maxEntryBytes

    /// Reads `partial` back entry by entry.
    /// - Throws: when the file cannot be read (the caller then resumes as before, by length).
    func check(_ partial: URL) throws -> Outcome {
        let handle = try FileHandle(forReadingFrom: partial)
        defer { try? handle.close() }
        let length = Int64(try handle.seekToEnd())
        if let chunks = manifest.chunks {
            // A publication file: its chunks, in order, as an update by chunks checks them; the
            // bytes after the last whole chunk are kept as by length.
            var checked = 0
            let keep = try ChunkedUpdate.verifiedPrefix(length: length, chunks: chunks, read: { count, at in
                try handle.seek(toOffset: UInt64(at))
                return try handle.read(upToCount: count) ?? Data()
            }, kept: { _ in checked += 1 })
            let whole = chunks.prefix(checked + 1).reduce(Int64(0)) { $0 + $1.length }
            // Stopped at a chunk that was all there: it did not match.
            if checked < chunks.count, whole <= length {
                return Outcome(keep: keep, entriesChecked: checked, failed: "the chunk at byte \(keep)")
            }
            return Outcome(keep: length, entriesChecked: checked, failed: nil)
        }
        let entries = manifest.entries
            .filter { $0.kind == .file && $0.offset != nil && $0.length != nil && $0.sha256 != nil }
            .sorted { ($0.offset ?? 0) < ($1.offset ?? 0) }
        let reader = ZipEntryReader()
        var checked = 0
        for entry in entries {
            guard let offset = entry.offset, let entryLength = entry.length, offset >= 0, entryLength > 0,
                  offset + entryLength <= length, entryLength <= Self.maxEntryBytes else { break }
            try handle.seek(toOffset: UInt64(offset))
            let bytes = try handle.read(upToCount: Int(entryLength)) ?? Data()
            guard bytes.count == Int(entryLength) else { break }
            do {
                try reader.check(bytes, as: entry)
            } catch {
                return Outcome(keep: offset, entriesChecked: checked, failed: entry.path)
            }
            checked += 1
        }
        return Outcome(keep: length, entriesChecked: checked, failed: nil)
    }

    /// Cuts `partial` back to `length` bytes and makes that durable before any byte is appended.
    /// Like the transfer that writes it, it touches only a regular file with no other name: a link
    /// planted under the partial file's name never gets another file cut.
    /// - Returns: false when the file could not be cut (the caller then starts from zero).
    static func truncate(_ partial: URL, to length: Int64) -> Bool {
        let descriptor = open(partial.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1 else { return false }
        return ftruncate(descriptor, off_t(length)) == 0 && fsync(descriptor) == 0
    }
}
