import Foundation

/// An exclusive advisory lock on a file (flock), held until ``release()`` or the process dies.
///
/// The kernel drops it with the process, so a killed holder never leaves it stuck.
final class FileLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Waits for the lock on `url` (created if missing) on a thread of its own.
    static func acquire(_ url: URL) async throws -> FileLock {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                let descriptor = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    continuation.resume(throwing: ClientError.local(path: url.path, problem: String(cString: strerror(errno)), action: "check the folder's permissions"))
                    return
                }
                while flock(descriptor, LOCK_EX) != 0 {
                    guard errno == EINTR else {
                        let problem = String(cString: strerror(errno))
                        close(descriptor)
                        continuation.resume(throwing: ClientError.local(path: url.path, problem: problem, action: "check the file system supports locks"))
                        return
                    }
                }
                continuation.resume(returning: FileLock(descriptor: descriptor))
            }
            thread.start()
        }
    }

    func release() {
        close(descriptor)
    }
}
