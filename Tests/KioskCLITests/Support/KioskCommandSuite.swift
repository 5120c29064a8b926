import Foundation
import KioskTestSupport
import Testing

/// A suite that drives the real `kiosk` against a store. Conforming gives it, as `Self.…`, the
/// store's `kiosk admin` run against a ``SyncedHome``'s server, and a command's JSON output read
/// back as an object.
protocol KioskCommandSuite: Sendable {}

extension KioskCommandSuite {
    static func admin(_ setup: SyncedHome, _ arguments: String...) async throws -> KioskCommand.Result {
        try await KioskCommand.run(["admin"] + arguments + ["--server", setup.server.url, "--data", setup.store.data.path])
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }
}
