import Foundation
import KioskCore
@testable import KioskStore
import KioskTestSupport
import Logging
import Testing

/// A new store's first signing key is made once, however many instances start on it together.
@Suite("The first signing key")
struct SigningKeySetupTests {
    @Test("eight key sets loaded at once over two connections to one new database: one key, and every set signs with it", arguments: TestEngine.all)
    func instancesStartingTogetherMakeOneKey(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        let logger = Logger(label: "test")
        let first = try await ServerDatabase.open(location, logger: logger)
        let second = try await ServerDatabase.open(location, logger: logger)
        let signing = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<8 {
                let database = index.isMultiple(of: 2) ? first : second
                group.addTask {
                    try await SigningKeys(database: database, identity: .kiosk(.sandbox), legacyKeyFile: nil, logger: logger).signingKID
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        let keys = try await SigningKeys.list(in: first)
        #expect(keys.count == 1)
        #expect(Set(signing) == Set(keys.map(\.kid)))
        await first.close()
        await second.close()
    }
}
