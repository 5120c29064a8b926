import Foundation

/// A folder under the system's temporary directory, removed when the test is done with it.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL

    /// The folder's name says which test made it (file and line), so that one left behind by a
    /// test or by a process it started names its creator in `make test`'s check.
    public init(_ label: String = "kiosk-test", fileID: String = #fileID, line: Int = #line) throws {
        let file = fileID.split(separator: "/").last.map { String($0.prefix { $0 != "." }) } ?? "test"
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(file)-\(line)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        // A process the test started may still be adding a file as the tree is removed, which
        // leaves a folder that is "not empty": try again a few times before giving up.
        for _ in 0..<5 {
            do {
                try FileManager.default.removeItem(at: url)
                return
            } catch {
                if !FileManager.default.fileExists(atPath: url.path) { return }
                usleep(20_000)
            }
        }
    }

    public func path(_ relative: String) -> URL {
        url.appendingPathComponent(relative)
    }

    /// Writes `text` at `relative`, creating folders on the way.
    @discardableResult
    public func write(_ relative: String, _ text: String) throws -> URL {
        let file = path(relative)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: file)
        return file
    }
}
