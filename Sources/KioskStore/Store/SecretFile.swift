import Foundation

/// A secret file the server cannot use. It is never replaced silently: a new signing key would
/// make every receipt issued before stop verifying.
public struct ServerSetupError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String
    public var action: String

    public var description: String { "\(path): \(problem); \(action)" }
}

/// Reading and creating the server's secrets (the signing key, the admin token).
enum SecretFile {
    /// The file's bytes, or nil when there is no such file.
    /// - Throws: ``ServerSetupError`` when it exists but cannot be read.
    static func read(_ url: URL, what: String) throws -> Data? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw ServerSetupError(path: url.path, problem: "cannot be examined (\(String(cString: strerror(errno))))", action: "check the data folder's permissions")
        }
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0, info.st_mode & S_IFMT == S_IFREG else {
            let problem = descriptor < 0 ? String(cString: strerror(errno)) : "not a regular file"
            if descriptor >= 0 { close(descriptor) }
            throw ServerSetupError(path: url.path, problem: "exists but cannot be read (\(problem))",
                action: "make it readable by the server's user; do not delete it unless you mean to replace the \(what)")
        }
        defer { close(descriptor) }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readDataToEndOfFile()
    }

    /// Creates `url` holding `data`, readable and writable by its owner only from the first byte
    /// (created 0600 under a temporary name, synced, then linked into place). When another
    /// process created it first, its file wins and is returned.
    static func create(_ url: URL, data: Data, what: String) throws -> Data {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.prefix(8))")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ServerSetupError(path: temporary.path, problem: "cannot be created (\(String(cString: strerror(errno))))", action: "check the data folder is writable")
        }
        defer { unlink(temporary.path) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        guard written == data.count, synced == 0 else {
            throw ServerSetupError(path: temporary.path, problem: "cannot be written", action: "check the data folder has free space")
        }
        // link(2) never replaces: of two first starts at once, one key (or token) wins.
        if link(temporary.path, url.path) != 0 {
            guard errno == EEXIST, let existing = try read(url, what: what) else {
                throw ServerSetupError(path: url.path, problem: "cannot be created (\(String(cString: strerror(errno))))", action: "check the data folder is writable")
            }
            return existing
        }
        return data
    }
}
