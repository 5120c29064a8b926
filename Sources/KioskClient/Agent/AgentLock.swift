import Foundation

/// The one background agent of a home: an exclusive `flock` on `KIOSK_HOME/agent.lock`, which
/// holds the holder's PID. The kernel drops it with the process, so a killed agent never leaves
/// it stuck, and other commands never take it: they share the home through their claims.
public final class AgentLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Why the lock was not taken.
    public enum Refusal: Error, CustomStringConvertible {
        /// Another agent holds it; its PID, when the file says.
        case alreadyRunning(pid: Int32?)
        case cannotOpen(path: String, problem: String)

        public var description: String {
            switch self {
            case .alreadyRunning(let pid):
                "an agent already runs on this home" + (pid.map { " (PID \($0))" } ?? "") + "; stop it first (kill \(pid.map(String.init) ?? "PID"))"
            case .cannotOpen(let path, let problem):
                "\(path): \(problem); check the folder's permissions"
            }
        }
    }

    /// Takes the lock of `home` without waiting and writes this process's PID into it.
    /// - Throws: ``Refusal/alreadyRunning(pid:)`` when another agent holds it.
    public static func acquire(in home: KioskHome) throws -> AgentLock {
        try home.prepare()
        let path = home.root.appendingPathComponent("agent.lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Refusal.cannotOpen(path: path, problem: String(cString: strerror(errno))) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let problem = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &buffer, buffer.count, 0)
            close(descriptor)
            guard problem == EWOULDBLOCK else { throw Refusal.cannotOpen(path: path, problem: String(cString: strerror(problem))) }
            let text = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Refusal.alreadyRunning(pid: Int32(text))
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return AgentLock(descriptor: descriptor)
    }

    /// The PID of the agent running on `home`, if one runs: the PID its lock file names, when that
    /// process is alive and is a `kiosk agent`. Only reads, so it never races an agent starting.
    public static func runningAgent(in home: KioskHome) -> Int32? {
        let path = home.root.appendingPathComponent("agent.lock").path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0, kill(pid, 0) == 0,
              let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        let arguments = command.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return arguments.contains("agent") ? pid : nil
    }

    /// Lets go of the lock (the file stays; its PID is no longer meaningful once unlocked).
    public func release() {
        close(descriptor)
    }
}
