import CArchive
import Crypto
import Foundation
import KioskCore
import Synchronization

/// Unpacks a zip or tar archive into a folder, refusing anything that could write outside it.
///
/// libarchive's own guards (`SECURE_NODOTDOT`, `SECURE_SYMLINKS`, `NO_OVERWRITE`) are on;
/// on top of them each entry is checked before anything is written, so the refusal can name
/// it: no absolute paths or `..`, no links that resolve outside, no devices, FIFOs or sockets,
/// permissions masked to 0755. Data is copied block by block, so no entry is ever whole in
/// memory, and the limits are enforced as the bytes arrive.
public struct ArchiveExtractor: Sendable {
    public var limits: ExtractionLimits

    public init(limits: ExtractionLimits = ExtractionLimits()) {
        self.limits = limits
    }

    /// What an extraction wrote.
    public struct Summary: Sendable, Equatable {
        public var entries: Int
        public var bytes: Int64
        /// Every entry written, with the SHA-256 of the bytes it was written from.
        public var manifest = ArchiveManifest()
        /// The SHA-256 of the archive's bytes, read through the one descriptor the extraction read
        /// from: what was unpacked is what this names, whatever happened to the file's name. Nil
        /// when the file ended short, was abandoned, or changed while it was read.
        public var archiveSHA256: String?
    }

    /// Unpacks `archive` into `destination`, which must be an empty folder.
    /// - Throws: ``UnpackError``; whatever was written is removed, so the destination is left empty.
    public func extract(_ archive: URL, into destination: URL) throws -> Summary {
        // Emptied on failure, so it must hold nothing of anyone else's.
        guard (try? FileManager.default.contentsOfDirectory(atPath: destination.path))?.isEmpty == true else {
            throw UnpackError.destinationNotEmpty(path: destination.path)
        }
        do {
            return try extractEntries(archive, into: destination)
        } catch {
            Self.empty(destination)
            throw error
        }
    }

    /// Unpacks a tar archive while it is still being downloaded into `file`, into `destination`
    /// (an empty folder), reading each byte once as it arrives.
    /// - Throws: ``UnpackError``, also when the download is abandoned; the destination is left empty.
    public func extract(_ file: GrowingFile, into destination: URL) throws -> Summary {
        guard (try? FileManager.default.contentsOfDirectory(atPath: destination.path))?.isEmpty == true else {
            throw UnpackError.destinationNotEmpty(path: destination.path)
        }
        do {
            let reader = try ArchiveHandle.reader(growing: file)
            var summary = try extractEntries(from: reader, archiveSize: file.expectedSize, into: destination)
            summary.archiveSHA256 = file.sha256()
            return summary
        } catch {
            Self.empty(destination)
            throw error
        }
    }

    /// Opens the archive once: its bytes are hashed through that descriptor, unpacked from the same
    /// one, and the file's size and change time compared before and after. A file swapped under the
    /// name after its check is not the one read; one rewritten while it was read has moved its
    /// change time; either way the digest or its absence says so.
    private func extractEntries(_ archive: URL, into destination: URL) throws -> Summary {
        // O_NONBLOCK: a FIFO under the name would hold the open until something writes to it; it
        // is refused just below instead (a regular file reads the same either way).
        let descriptor = open(archive.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw UnpackError.disk(entry: nil, message: "cannot open \(archive.lastPathComponent): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var before = stat()
        guard fstat(descriptor, &before) == 0 else { throw UnpackError.disk(entry: nil, message: "cannot read \(archive.lastPathComponent)") }
        // A folder, a FIFO or a device is no archive to hash and seek in (and /dev/zero never ends).
        guard before.st_mode & S_IFMT == S_IFREG else {
            let kind = before.st_mode & S_IFMT == S_IFDIR ? "it is a folder" : "it is not a regular file"
            throw UnpackError.disk(entry: nil, message: "cannot read \(archive.lastPathComponent): \(kind)")
        }
        let hashing = DescriptorDigest(descriptor, name: archive.lastPathComponent)
        // Runs before the descriptor is closed (defers run last first), so the hash never reads a
        // descriptor that was closed or reused.
        defer { hashing.stop() }
        var summary = try extractEntries(from: ArchiveHandle.reader(descriptor: descriptor), archiveSize: Int64(before.st_size), into: destination)
        let digest = try hashing.value()
        var after = stat()
        let unchanged = fstat(descriptor, &after) == 0 && after.st_size == before.st_size
            && after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec
        summary.archiveSHA256 = unchanged ? digest : nil
        return summary
    }

    private func extractEntries(from reader: ArchiveHandle, archiveSize: Int64, into destination: URL) throws -> Summary {
        let maxTotal = limits.maxTotalBytes(archiveSize: archiveSize)
        let writer = try ArchiveHandle.diskWriter()
        // libarchive's symlink guard checks every component of the path, so give it the real one.
        let root = destination.resolvingSymlinksInPath().standardizedFileURL.path

        var summary = Summary(entries: 0, bytes: 0)
        var links = ExtractedLinks()
        while true {
            var entryPointer: OpaquePointer?
            let status = archive_read_next_header(reader.handle, &entryPointer)
            if status == ARCHIVE_EOF { break }
            guard status >= ARCHIVE_WARN, let entry = entryPointer else {
                if summary.entries == 0 { throw UnpackError.unsupportedFormat(reader.message) }
                throw UnpackError.corrupt(entry: nil, message: reader.message)
            }
            summary.entries += 1
            guard summary.entries <= limits.maxEntries else { throw UnpackError.tooManyEntries(limit: limits.maxEntries) }

            let name = Self.entryName(entry)
            if Self.isDestinationItself(name), UInt32(archive_entry_filetype(entry)) == kiosk_ae_ifdir {
                // `./`, as `tar -C dir .` writes first: the destination itself, already there.
                continue
            }
            let relative = try Self.checkedRelativePath(name)
            try checkType(entry, name: name, relative: relative, links: links)
            let path = relative.joined(separator: "/")
            let hardlinkTarget = (archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry))
                .flatMap { try? Self.checkedRelativePath(String(cString: $0)).joined(separator: "/") }
            try rewrite(entry, relative: relative, root: root)

            guard archive_write_header(writer.handle, entry) >= ARCHIVE_WARN else {
                throw writer.diskError(entry: name)
            }
            if UInt32(archive_entry_filetype(entry)) == kiosk_ae_iflnk {
                links.add(relative, target: (archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)).map { String(cString: $0) } ?? "")
            }
            var entryBytes: Int64 = 0
            var digest = EntryDigest()
            if archive_entry_size_is_set(entry) != 0, archive_entry_size(entry) > limits.maxEntryBytes {
                throw UnpackError.entryTooLarge(entry: name, limit: limits.maxEntryBytes)
            }
            while true {
                var block: UnsafeRawPointer?
                var size = 0
                var offset: la_int64_t = 0
                let read = archive_read_data_block(reader.handle, &block, &size, &offset)
                if read == ARCHIVE_EOF { break }
                guard read >= ARCHIVE_WARN else { throw UnpackError.corrupt(entry: name, message: reader.message) }
                entryBytes = max(entryBytes, Int64(offset) + Int64(size))
                guard entryBytes <= limits.maxEntryBytes else { throw UnpackError.entryTooLarge(entry: name, limit: limits.maxEntryBytes) }
                guard summary.bytes + entryBytes <= maxTotal else { throw UnpackError.totalTooLarge(limit: maxTotal) }
                guard archive_write_data_block(writer.handle, block, size, offset) >= ARCHIVE_WARN else {
                    throw writer.diskError(entry: name)
                }
                digest.add(block, count: size, at: Int64(offset))
            }
            summary.bytes += entryBytes
            guard archive_write_finish_entry(writer.handle) >= ARCHIVE_WARN else {
                throw writer.diskError(entry: name)
            }
            let written = Self.manifestEntry(entry, path: path, hardlinkTarget: hardlinkTarget, written: entryBytes, digest: &digest, manifest: summary.manifest)
            summary.manifest.add(written)
        }
        guard archive_write_close(writer.handle) >= ARCHIVE_WARN else {
            throw writer.diskError(entry: nil)
        }
        return summary
    }

    /// What the manifest records of an entry just written: a hard link is the file it shares
    /// bytes with; a file's size is the larger of its header's and what was written.
    private static func manifestEntry(_ entry: OpaquePointer, path: String, hardlinkTarget: String?, written: Int64, digest: inout EntryDigest, manifest: ArchiveManifest) -> ArchiveManifest.Entry {
        if let hardlinkTarget, let target = manifest.entry(hardlinkTarget) {
            return ArchiveManifest.Entry(path: path, kind: target.kind, size: target.size, sha256: target.sha256, target: target.target)
        }
        switch UInt32(archive_entry_filetype(entry)) {
        case kiosk_ae_ifdir:
            return ArchiveManifest.Entry(path: path, kind: .directory, size: 0)
        case kiosk_ae_iflnk:
            let target = (archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)).map { String(cString: $0) } ?? ""
            return ArchiveManifest.Entry(path: path, kind: .symlink, size: 0, target: target)
        default:
            let size = max(written, archive_entry_size_is_set(entry) != 0 ? Int64(archive_entry_size(entry)) : 0)
            return ArchiveManifest.Entry(path: path, kind: .file, size: size, sha256: digest.finalize(size: size))
        }
    }

    /// Removes everything inside `folder`, leaving the folder itself.
    static func empty(_ folder: URL) {
        let fileManager = FileManager.default
        for name in (try? fileManager.contentsOfDirectory(atPath: folder.path)) ?? [] {
            try? fileManager.removeItem(at: folder.appendingPathComponent(name))
        }
    }

    // MARK: Checks

    static func entryName(_ entry: OpaquePointer) -> String {
        if let utf8 = archive_entry_pathname_utf8(entry) { return String(cString: utf8) }
        if let raw = archive_entry_pathname(entry) { return String(cString: raw) }
        return ""
    }

    static func isDestinationItself(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix("/") && name.split(separator: "/").allSatisfy { $0 == "." }
    }

    /// The entry's path as components inside the destination.
    /// - Throws: ``UnpackError/escapesDestination(entry:)`` for absolute paths and `..`.
    public static func checkedRelativePath(_ name: String) throws -> [String] {
        guard !name.isEmpty, !name.hasPrefix("/"), !name.contains("\\"), !name.contains("\0") else {
            throw UnpackError.escapesDestination(entry: name)
        }
        let components = name.split(separator: "/").map(String.init).filter { $0 != "." }
        guard !components.isEmpty, !components.contains("..") else {
            throw UnpackError.escapesDestination(entry: name)
        }
        return components
    }

    private func checkType(_ entry: OpaquePointer, name: String, relative: [String], links: ExtractedLinks) throws {
        // Nothing is written through a link the archive made, even one that points inside: the
        // link could be swapped, and the same bytes would land at two paths.
        if let link = links.linkOnPath(to: relative) {
            throw UnpackError.writesThroughLink(entry: name, link: link)
        }
        if let hardlink = archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry) {
            let target = String(cString: hardlink)
            guard let targetPath = try? Self.checkedRelativePath(target) else {
                throw UnpackError.linkEscapes(entry: name, target: target)
            }
            if let link = links.linkOnPath(to: targetPath) ?? (links.contains(targetPath) ? targetPath.joined(separator: "/") : nil) {
                throw UnpackError.writesThroughLink(entry: name, link: link)
            }
            return
        }
        switch UInt32(archive_entry_filetype(entry)) {
        case kiosk_ae_ifreg, kiosk_ae_ifdir:
            return
        case kiosk_ae_iflnk:
            let target = (archive_entry_symlink_utf8(entry) ?? archive_entry_symlink(entry)).map { String(cString: $0) } ?? ""
            guard links.resolvesInside(linkAt: relative, target: target) else {
                throw UnpackError.linkEscapes(entry: name, target: target)
            }
        case kiosk_ae_ifchr: throw UnpackError.forbiddenType(entry: name, type: "character device")
        case kiosk_ae_ifblk: throw UnpackError.forbiddenType(entry: name, type: "block device")
        case kiosk_ae_ififo: throw UnpackError.forbiddenType(entry: name, type: "FIFO")
        case kiosk_ae_ifsock: throw UnpackError.forbiddenType(entry: name, type: "socket")
        default: throw UnpackError.forbiddenType(entry: name, type: "special file")
        }
    }

    /// Points the entry (and its hardlink) into the destination and masks its permissions.
    private func rewrite(_ entry: OpaquePointer, relative: [String], root: String) throws {
        archive_entry_set_pathname_utf8(entry, root + "/" + relative.joined(separator: "/"))
        if let hardlink = archive_entry_hardlink_utf8(entry) ?? archive_entry_hardlink(entry) {
            let target = try Self.checkedRelativePath(String(cString: hardlink))
            archive_entry_set_hardlink_utf8(entry, root + "/" + target.joined(separator: "/"))
        }
        let isDirectory = UInt32(archive_entry_filetype(entry)) == kiosk_ae_ifdir
        // No setuid, setgid or sticky bits, nothing writable by others: a book is data.
        let mode = isDirectory ? 0o755 : (archive_entry_perm(entry) & 0o111 != 0 ? 0o755 : 0o644)
        archive_entry_set_perm(entry, mode_t(mode))
        archive_entry_set_uid(entry, la_int64_t(getuid()))
        archive_entry_set_gid(entry, la_int64_t(getgid()))
    }
}

/// Owns a libarchive read or disk-write handle.
final class ArchiveHandle {
    let handle: OpaquePointer
    private let isReader: Bool
    /// The growing file a callback reader reads, kept alive as long as the handle.
    private var source: GrowingFile?

    private init(handle: OpaquePointer, isReader: Bool) {
        self.handle = handle
        self.isReader = isReader
    }

    deinit {
        if isReader { archive_read_free(handle) } else { archive_write_free(handle) }
    }

    var message: String {
        archive_error_string(handle).map { String(cString: $0) } ?? "unknown libarchive error"
    }

    /// A failed write, told apart: a full disk (or quota) is something the reader can fix.
    func diskError(entry: String?) -> UnpackError {
        let code = archive_errno(handle)
        if code == ENOSPC || code == EDQUOT { return .noSpace(entry: entry) }
        return .disk(entry: entry, message: message)
    }

    /// Why libarchive made no reader or writer: it could not be loaded, or could not allocate.
    static func cannotMake(_ thing: String) -> UnpackError {
        let message = ArchiveVersion.unavailable(thing)
        return ArchiveVersion.loadError == nil ? .disk(entry: nil, message: message) : .noLibrary(message: message)
    }

    /// A reader for the allow-listed formats over an open file (read from its first byte; libarchive
    /// seeks in it as a zip needs).
    static func reader(descriptor: Int32) throws -> ArchiveHandle {
        guard let handle = archive_read_new() else { throw Self.cannotMake("a reader") }
        let reader = ArchiveHandle(handle: handle, isReader: true)
        archive_read_support_format_zip(handle)
        supportTar(handle)
        guard lseek(descriptor, 0, SEEK_SET) == 0, archive_read_open_fd(handle, descriptor, 1 << 20) == ARCHIVE_OK else {
            throw UnpackError.unsupportedFormat(reader.message)
        }
        return reader
    }

    /// A reader for the allow-listed formats: zip, and tar with gzip, xz, zstd or bzip2.
    static func reader(path: String) throws -> ArchiveHandle {
        guard let handle = archive_read_new() else { throw Self.cannotMake("a reader") }
        let reader = ArchiveHandle(handle: handle, isReader: true)
        archive_read_support_format_zip(handle)
        supportTar(handle)
        guard archive_read_open_filename(handle, path, 1 << 20) == ARCHIVE_OK else {
            throw UnpackError.unsupportedFormat(reader.message)
        }
        return reader
    }

    /// A reader of tar formats (the ones that can be read front to back) over a growing file.
    static func reader(growing file: GrowingFile) throws -> ArchiveHandle {
        guard let handle = archive_read_new() else { throw Self.cannotMake("a reader") }
        let reader = ArchiveHandle(handle: handle, isReader: true)
        reader.source = file
        supportTar(handle)
        let opened = archive_read_open(handle, Unmanaged.passUnretained(file).toOpaque(), nil, { _, clientData, block in
            guard let clientData, let block else { return -1 }
            let file = Unmanaged<GrowingFile>.fromOpaque(clientData).takeUnretainedValue()
            guard let (bytes, count) = file.nextBlock() else { return -1 }
            block.pointee = bytes
            return count
        }, nil)
        guard opened == ARCHIVE_OK else {
            throw UnpackError.unsupportedFormat(reader.message)
        }
        return reader
    }

    /// Tar, and the compressions a tar may come in.
    private static func supportTar(_ handle: OpaquePointer) {
        archive_read_support_format_tar(handle)
        archive_read_support_format_gnutar(handle)
        for add in [archive_read_support_filter_gzip, archive_read_support_filter_xz, archive_read_support_filter_zstd, archive_read_support_filter_bzip2] {
            // A filter missing from this libarchive build only warns; the formats still work.
            _ = add(handle)
        }
    }

    /// A disk writer with libarchive's secure-extraction guards on and no owner or permission restore.
    static func diskWriter() throws -> ArchiveHandle {
        guard let handle = archive_write_disk_new() else { throw Self.cannotMake("a writer") }
        let writer = ArchiveHandle(handle: handle, isReader: false)
        // Entries are rewritten to absolute paths inside the destination (after being checked to be
        // relative), so SECURE_NOABSOLUTEPATHS cannot be used; the other two guards stay on.
        let flags = ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS
            | ARCHIVE_EXTRACT_NO_OVERWRITE | ARCHIVE_EXTRACT_PERM
        archive_write_disk_set_options(handle, flags)
        return writer
    }
}

/// The SHA-256 of every byte of an open file, read with `pread` (the descriptor's offset, which
/// the unpacking moves, is left alone) on a thread of its own while the same descriptor is
/// unpacked.
///
/// **Performance layer.** Replaces hashing the whole archive before unpacking it (dd0b516), which
/// added the hash's time to every unpack. `kiosk unpack` of `make bench`'s 5,000 files (100 MB)
/// into tmpfs, so the disk does not hide it, 7 runs each alternating (2026-11-30 22:58): tar.gz
/// 1.16 s before, 1.06 s after; zip 0.86 s before, 0.77 s after; the CPU the same (1.15 s and
/// 0.85 s), as it does the same work on the second core.
final class DescriptorDigest: Sendable {
    private let descriptor: Int32
    private let name: String
    private let finished = DispatchSemaphore(value: 0)
    private let result = Mutex<Result<String, any Error>?>(nil)
    private let stopping = Atomic<Bool>(false)
    /// Whether the hash has a thread of its own. Foundation's `Thread.start()` says nothing when
    /// the thread cannot be made (a process at its limit of threads), and a wait for it then never
    /// ended; `pthread_create` says so, and the hash is then made on the caller's thread.
    private let threaded = Atomic<Bool>(false)

    /// Starts hashing `descriptor`; `name` names the file in an error.
    /// - Parameter threadOfItsOwn: false makes the hash on the caller's thread, as when no thread
    ///   can be made (for tests).
    init(_ descriptor: Int32, name: String, threadOfItsOwn: Bool = true) {
        self.descriptor = descriptor
        self.name = name
        guard threadOfItsOwn else { return }
        let context = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let made = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<DescriptorDigest>.fromOpaque(context).takeRetainedValue().hash()
            return nil
        }, context.toOpaque())
        if made == 0 {
            pthread_detach(thread)
            threaded.store(true, ordering: .releasing)
        } else {
            context.release()
        }
    }

    private func hash() {
        let outcome = Result { try Self.sha256(of: descriptor, name: name, stopping: stopping) }
        result.withLock { $0 = outcome }
        finished.signal()
    }

    /// The digest, once every byte is read.
    /// - Throws: ``UnpackError/disk(entry:message:)`` when the file could not be read.
    func value() throws -> String {
        if threaded.load(ordering: .acquiring) {
            finished.wait()
            finished.signal()
        } else if result.withLock({ $0 }) == nil {
            hash()
        }
        guard let outcome = result.withLock({ $0 }) else { throw UnpackError.disk(entry: nil, message: "the archive's hash was stopped") }
        return try outcome.get()
    }

    /// Stops the hash (an unpack that failed needs none) and waits until it no longer reads.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        guard threaded.load(ordering: .acquiring) else { return }
        finished.wait()
        finished.signal()
    }

    private static func sha256(of descriptor: Int32, name: String, stopping: borrowing Atomic<Bool>) throws -> String {
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        var hasher = SHA256()
        var offset: off_t = 0
        while !stopping.load(ordering: .relaxed) {
            let count = pread(descriptor, buffer, size, offset)
            if count == 0 { return FileDigest.hex(hasher.finalize()) }
            guard count > 0 else { throw UnpackError.disk(entry: nil, message: "cannot read \(name): \(String(cString: strerror(errno)))") }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: count))
            offset += off_t(count)
        }
        throw UnpackError.disk(entry: nil, message: "the hash of \(name) was stopped")
    }
}
