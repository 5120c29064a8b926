/// A failure reading or writing an archive, with libarchive's own message where there is one.
public enum ArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    /// libarchive refused an operation on `path`.
    case library(path: String, message: String)
    /// A content folder holds something that cannot be packed (a symlink, a device file…).
    case unpackableEntry(path: String, reason: String)

    public var description: String {
        switch self {
        case .library(let path, let message):
            return "archive \(path): \(message)"
        case .unpackableEntry(let path, let reason):
            return "cannot pack \(path): \(reason)"
        }
    }
}
