import Foundation

/// One resumable download: where from, where to, and how patient to be.
public struct DownloadRequest: Sendable {
    /// The caller's name for it (a product ID); outcomes and progress are keyed by it.
    public var key: String
    public var url: String
    /// Extra request headers, such as `Authorization: Receipt …`.
    public var headers: [(name: String, value: String)]
    /// The partial file: appended to, and resumed from whatever it already holds.
    public var partialFile: URL
    /// The quoted strong ETag the partial bytes belong to; without one, a partial file is not trusted
    /// and the download starts from zero.
    public var etag: String?
    public var connectTimeout = 10
    /// A transfer slower than `lowSpeedLimit` bytes/s for `lowSpeedTime` seconds has stalled.
    public var lowSpeedLimit = 1024
    public var lowSpeedTime = 30
    /// Caps the receive rate, in bytes/s (for politeness, or to test interruptions).
    public var maxReceiveSpeed: Int64?
    /// The representation's size when the caller knows it (the catalog declares it): a body that
    /// would write one byte past it, or past its Content-Range's end, ends the transfer as
    /// ``TransferError/Kind/tooLarge`` without writing that byte.
    public var expectedSize: Int64?
    /// The partial file an earlier attempt wrote: a file found under its name that is another
    /// (swapped in between attempts) is refused, never written.
    public var expectedIdentity: FileIdentity?
    /// The partial file, opened by the caller already: the transfer writes through it rather than
    /// open the file by name (which it does when this is nil). A caller that must make sure it may
    /// still write (a claim) opens the file first, checks, and hands it over.
    public var opened: OpenedPartialFile?
    /// There was no partial file when the caller checked it may write one: the transfer creates it
    /// and refuses one that appeared since (another process's, which took the download over).
    public var partialIsNew = false

    public init(key: String, url: String, headers: [(name: String, value: String)] = [], partialFile: URL, etag: String?) {
        self.key = key
        self.url = url
        self.headers = headers
        self.partialFile = partialFile
        self.etag = etag
    }
}

/// How a download ended.
public enum DownloadOutcome: Sendable, Equatable {
    /// Every byte is in the partial file. `sha256` covers the whole file.
    case complete(size: Int64, sha256: String, etag: String?)
    /// The server answered with an error status; `retryAfter` from its Retry-After header.
    case httpError(status: Int, retryAfter: TimeInterval?, message: String)
    /// The transfer broke (refused, reset, timed out, stalled, disk full); the partial file keeps what arrived.
    case transport(kind: TransferError.Kind, message: String)
    /// The bytes on disk cannot be continued (the representation changed, or the server sent
    /// the wrong range): the partial file was emptied and the download should start again.
    case restart(reason: String)
    /// The progress handler asked to stop (paused or cancelled).
    case stopped
}

/// Which file a descriptor or path is: device and inode.
public struct FileIdentity: Sendable, Equatable {
    public var device: UInt64
    public var inode: UInt64

    public init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// The identity of what `path` names, without following a link, if it is a regular file.
    public static func ofRegularFile(_ path: String) -> FileIdentity? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return FileIdentity(info)
    }
}

/// Where a running download stands.
public struct DownloadProgress: Sendable {
    public var key: String
    /// Bytes in the partial file.
    public var bytesOnDisk: Int64
    /// The whole representation's size, once the server has said.
    public var totalBytes: Int64?
    /// Bytes received over the network in this run (resume waste shows as bytesReceived > total − start).
    public var bytesReceived: Int64
    /// The ETag of the response the bytes on disk came from: what the next resume must send in If-Range.
    public var etag: String?
    /// Where the bytes came from once redirects were followed, when that is not the request's URL
    /// (a CDN or nginx edge the server sent the client to).
    public var redirectedTo: String?
    /// The partial file being written.
    public var partialIdentity: FileIdentity?
}
