import Foundation

/// A folder under the system's temporary directory, removed when the test is done with it.
public final class TemporaryDirectory: @unchecked Sendable {
    public let url: URL

    public init(_ label: String = "kiosk-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
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
