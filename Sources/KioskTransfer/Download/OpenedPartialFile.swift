import Foundation

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

    /// Opens (or creates) `request`'s partial file.
    /// - Throws: ``TransferError`` (``TransferError/Kind/localWrite``) naming the file and why.
    public init(for request: DownloadRequest) throws {
        let path = request.partialFile.path
        try FileManager.default.createDirectory(at: request.partialFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        // Never through a link: one swapped in for the partial file would send the bytes (and
        // the truncation of a restart) to whatever it points at.
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
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
        self.descriptor = descriptor
        self.identity = identity
    }

    deinit {
        close(descriptor)
    }
}
