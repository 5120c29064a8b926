import Foundation
import KioskCore

/// A download's partial file, opened for writing and checked: a regular file (never through a
/// link), with no other name, and the very file an earlier attempt wrote when the request names it.
///
/// A transfer writes only through this descriptor, never by the file's name. So a caller can open
/// the file first and only then make sure it may still write to it (a claim that still holds): if
/// another process takes the download over after that check, it writes a file of its own under the
/// name, and this descriptor reaches only the old one. The file stays open while any transfer or
/// request holds it.
public final class OpenedPartialFile: Sendable {
    let descriptor: Int32
    public let identity: FileIdentity
    /// The file's path, for error messages.
    let path: String

    /// How the file is opened.
    public enum Opening: Sendable {
        /// Whatever is there, or a new empty file.
        case existingOrNew
        /// Only a file that is there: none is created.
        case existing
        /// Only a new file: one found there was made by someone else since the caller looked.
        case new
    }

    private init(descriptor: Int32, identity: FileIdentity, path: String) {
        self.descriptor = descriptor
        self.identity = identity
        self.path = path
    }

    deinit {
        close(descriptor)
    }

    /// Bytes in the file now.
    public var size: Int64 { Int64(lseek(descriptor, 0, SEEK_END)) }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    public func read(_ count: Int, at offset: Int64) throws -> Data {
        var data = Data(count: count)
        let got = data.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return 0 }
            var done = 0
            while done < count {
                let read = pread(descriptor, base + done, count - done, off_t(offset) + off_t(done))
                if read < 0, errno == EINTR { continue }
                guard read > 0 else { return read < 0 ? -1 : done }
                done += read
            }
            return done
        }
        guard got >= 0 else { throw failure("read", errno) }
        return data.prefix(got)
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let written = pwrite(descriptor, base + done, bytes.count - done, off_t(offset) + off_t(done))
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { throw failure("write", errno) }
            done += written
        }
    }

    /// Copies `length` bytes of the file open as `source` at `sourceOffset` to `offset`, inside the
    /// kernel where it can (no bytes through the process), by reads and writes where it cannot.
    /// - Throws: ``TransferError`` (``TransferError/Kind/localWrite``) when this file cannot take
    ///   the bytes (a full disk, a quota, a read-only file system); ``SourceUnreadable`` when
    ///   `source` cannot give them.
    public func copy(from source: Int32, at sourceOffset: Int64, length: Int64, to offset: Int64) throws {
        var done: Int64 = 0
        while done < length {
            let copied = Platform.copyRange(from: source, at: sourceOffset + done, to: descriptor, at: offset + done, length: length - done)
            if copied > 0 {
                done += copied
                continue
            }
            if copied < 0, errno == EINTR { continue }
            if copied < 0, [ENOSPC, EDQUOT, EFBIG, EROFS].contains(errno) { throw failure("write", errno) }
            guard copied < 0, [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP].contains(errno) else {
                throw SourceUnreadable(reason: copied == 0 ? "it ended early" : String(cString: strerror(errno)))
            }
            // The kernel cannot copy between these two: through a buffer instead.
            var buffer = [UInt8](repeating: 0, count: Int(min(length - done, 1 << 20)))
            while done < length {
                let wanted = Int(min(length - done, Int64(buffer.count)))
                let read = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, wanted, off_t(sourceOffset + done)) }
                if read < 0, errno == EINTR { continue }
                guard read > 0 else { throw SourceUnreadable(reason: read < 0 ? String(cString: strerror(errno)) : "it ended early") }
                try buffer.withUnsafeBytes { try write(UnsafeRawBufferPointer(rebasing: $0.prefix(read)), at: offset + done) }
                done += Int64(read)
            }
        }
    }

    /// The file a ``copy(from:at:length:to:)`` copies from could not be read.
    public struct SourceUnreadable: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { "the file copied from cannot be read: \(reason)" }
    }

    /// Cuts the file to `length` bytes.
    public func truncate(to length: Int64) throws {
        guard ftruncate(descriptor, off_t(length)) == 0 else { throw failure("truncate", errno) }
    }

    /// A local write error naming the file: "<path>: cannot write: No space left on device".
    private func failure(_ operation: String, _ code: Int32) -> TransferError {
        TransferError(url: path, kind: .localWrite, message: "cannot \(operation): \(String(cString: strerror(code)))")
    }

    /// Opens `request`'s partial file as `opening` says; nil only for ``Opening/existing`` when
    /// there is none.
    /// - Throws: ``TransferError`` (``TransferError/Kind/localWrite``) naming the file and why.
    public static func open(for request: DownloadRequest, _ opening: Opening = .existingOrNew) throws -> OpenedPartialFile? {
        let path = request.partialFile.path
        try FileManager.default.createDirectory(at: request.partialFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        let create: Int32 = switch opening {
        case .existingOrNew: O_CREAT
        case .existing: 0
        case .new: O_CREAT | O_EXCL
        }
        // Never through a link: one swapped in for the partial file would send the bytes (and
        // the truncation of a restart) to whatever it points at.
        let descriptor = Foundation.open(path, O_RDWR | create | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            if errno == ENOENT, opening == .existing { return nil }
            if errno == EEXIST {
                throw TransferError(url: request.url, kind: .localWrite, message: "refusing to write \(path): another process made it since this one checked its claim")
            }
            if errno == ELOOP {
                throw TransferError(url: request.url, kind: .localWrite, message: "refusing to write \(path): it is a symbolic link; Kiosk writes only regular files it made")
            }
            throw TransferError(url: request.url, kind: .localWrite, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        fstat(descriptor, &info)
        let identity = FileIdentity(info)
        let problem: String?
        if info.st_mode & S_IFMT != S_IFREG {
            problem = "it is not a regular file"
        } else if info.st_nlink > 1 {
            problem = "it has another name (a hard link) as well; Kiosk writes only files it made"
        } else if let expected = request.expectedIdentity, expected != identity {
            problem = "it was replaced by another file since the last attempt"
        } else {
            problem = nil
        }
        if let problem {
            close(descriptor)
            throw TransferError(url: request.url, kind: .localWrite, message: "refusing to write \(path): \(problem)")
        }
        return OpenedPartialFile(descriptor: descriptor, identity: identity, path: path)
    }
}
