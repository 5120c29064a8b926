import Foundation

/// The body of a catalog answer, kept in a file with no name while it arrives and read back a
/// piece at a time once it is whole.
///
/// Why: the cache is replaced in one transaction, which must not wait on the network — another
/// kiosk process saving a receipt would wait with it — so the body has to be somewhere whole
/// before the transaction starts. Memory would cost its whole size (19 MB for 100,000 products);
/// a file costs a 64 KiB buffer. The file is unlinked as soon as it is made, so nothing is left
/// behind whatever happens to the process.
///
/// `@unchecked Sendable`: the transfer's thread appends while the sync awaits the transfer, and
/// the sync reads only after it has ended; never two threads at once.
final class CatalogSpool: @unchecked Sendable {
    private let descriptor: Int32
    private let folder: URL
    private(set) var size = 0

    /// A new spool in `folder` (the kiosk home, so a full disk is the home's).
    /// - Throws: ``ClientError/local(path:problem:action:)`` when no file can be made there.
    init(in folder: URL) throws {
        self.folder = folder
        var template = Array(folder.appendingPathComponent(".catalog-XXXXXX").path.utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.map { mkstemp($0) } ?? -1
        }
        guard descriptor >= 0 else { throw Self.failure(errno, in: folder) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        self.descriptor = descriptor
        template.withUnsafeBufferPointer { buffer in _ = buffer.baseAddress.map { unlink($0) } }
    }

    deinit {
        close(descriptor)
    }

    /// Adds the next bytes of the body.
    func append(_ piece: UnsafeRawBufferPointer) throws {
        guard let base = piece.baseAddress else { return }
        var written = 0
        while written < piece.count {
            let count = write(descriptor, base + written, piece.count - written)
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.failure(errno, in: folder)
            }
            written += count
        }
        size += written
    }

    /// Calls `body` with the body's bytes from the start, 64 KiB at a time.
    func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < size {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if count < 0 {
                if errno == EINTR { continue }
                throw Self.failure(errno, in: folder)
            }
            guard count > 0 else { break }
            try body(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += count
        }
    }

    /// True when the body's first non-blank byte is `<`: markup (a web page), not a JSON document.
    func startsWithMarkup() -> Bool {
        var byte: UInt8 = 0
        var offset = 0
        while offset < min(size, 512), pread(descriptor, &byte, 1, off_t(offset)) == 1 {
            if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1; continue }
            return byte == UInt8(ascii: "<")
        }
        return false
    }

    private static func failure(_ code: Int32, in folder: URL) -> ClientError {
        if code == ENOSPC || code == EDQUOT {
            return .local(path: folder.path, problem: "the disk is full", action: "free some space, then run kiosk sync again; the local catalog was kept")
        }
        return .local(path: folder.path, problem: "cannot hold the catalog while it downloads (\(String(cString: strerror(code))))",
                      action: "check the folder is writable, then run kiosk sync again; the local catalog was kept")
    }
}
