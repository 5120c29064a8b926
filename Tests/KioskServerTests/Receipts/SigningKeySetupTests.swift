import Crypto
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

    /// A key file as an earlier Kiosk kept it, last written a day ago.
    static func legacyKeyFile(in directory: TemporaryDirectory, kid: String, d: String? = nil) throws -> URL {
        let file = directory.path("signing-key-\(kid).json")
        let raw = Curve25519.Signing.PrivateKey().rawRepresentation.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try Data(#"{"kid": "\#(kid)", "d": "\#(d ?? raw)"}"#.utf8).write(to: file)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-86_400)], ofItemAtPath: file.path)
        return file
    }

    @Test("a legacy key file on one of eight key sets loaded at once on a new database: its key is in the store whichever set made the first key, and every set signs with one key; a second start adds nothing", arguments: TestEngine.all)
    func legacyKeyFileWhileOthersStart(engine: TestEngine) async throws {
        for round in 0..<3 {
            let directory = try TemporaryDirectory()
            let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
            let logger = Logger(label: "test")
            let database = try await ServerDatabase.open(location, logger: logger)
            let legacy = try Self.legacyKeyFile(in: directory, kid: "legacy-\(round)")
            let signing = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await SigningKeys(database: database, identity: .kiosk(.sandbox), legacyKeyFile: index == 5 ? legacy : nil, logger: logger).signingKID
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            let keys = try await SigningKeys.list(in: database)
            #expect(keys.contains { $0.kid == "legacy-\(round)" && $0.retiredAt == nil }, "round \(round): \(keys.map(\.kid))")
            #expect(keys.count <= 2 && Set(signing).count == 1, "round \(round): \(keys.map(\.kid)), signing \(Set(signing))")
            let again = try await SigningKeys(database: database, identity: .kiosk(.sandbox), legacyKeyFile: legacy, logger: logger)
            #expect(try await SigningKeys.list(in: database).count == keys.count)
            #expect(try await again.jwks().keys.contains { $0.keyIdentifier?.string == "legacy-\(round)" })
            await database.close()
        }
    }

    @Test("a corrupt legacy key file stops the start though the database has its keys already, naming the file", arguments: TestEngine.all)
    func corruptLegacyKeyFileAlwaysStops(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        let logger = Logger(label: "test")
        let database = try await ServerDatabase.open(location, logger: logger)
        _ = try await SigningKeys(database: database, identity: .kiosk(.sandbox), legacyKeyFile: nil, logger: logger)
        let corrupt = try Self.legacyKeyFile(in: directory, kid: "legacy-short", d: "AAAA")
        await #expect(throws: ServerSetupError.self) {
            _ = try await SigningKeys(database: database, identity: .kiosk(.sandbox), legacyKeyFile: corrupt, logger: logger)
        }
        #expect(try await SigningKeys.list(in: database).count == 1)
        await database.close()
    }
}
