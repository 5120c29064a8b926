import Foundation

/// A small tmpfs mounted for a test, to fill a disk for real; unmounted by ``unmount()``.
/// Mounting needs root: tests that use it are enabled only when ``canMount`` is true.
public final class SmallDisk: @unchecked Sendable {
    public let path: URL
    private var mounted = false

    public static var canMount: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount") }

    public init(at path: URL, megabytes: Int) throws {
        self.path = path
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0755", "tmpfs", path.path])
        mounted = true
    }

    /// Makes the file system read-only.
    public func makeReadOnly() throws {
        try Self.run("/bin/mount", ["-o", "remount,ro", path.path])
    }

    /// Writes a file until the disk is full; returns how many bytes it took.
    @discardableResult
    public func fill(name: String = "filler") -> Int {
        let url = path.appendingPathComponent(name)
        FileManager.default.createFile(atPath: url.path, contents: nil)
        guard let handle = try? FileHandle(forWritingTo: url) else { return 0 }
        defer { try? handle.close() }
        let block = Data(repeating: 0x5a, count: 256 << 10)
        var written = 0
        while (try? handle.write(contentsOf: block)) != nil { written += block.count }
        return written
    }

    public func free(name: String = "filler") {
        try? FileManager.default.removeItem(at: path.appendingPathComponent(name))
    }

    public func unmount() {
        guard mounted else { return }
        try? Self.run("/bin/umount", ["-l", path.path])
        mounted = false
    }

    deinit { unmount() }

    static func run(_ tool: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.runAlone()
        process.waitForExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(tool) \(arguments.joined(separator: " ")) failed"])
        }
    }
}
