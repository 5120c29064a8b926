import Crypto
import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// The files a store keeps its secrets in: created private, imported from an earlier Kiosk, and
/// refused, naming the file, when they cannot be read.
@Suite("Secrets: the signing keys and the admin token")
struct SecretsTests {
    @Test("secrets are created 0600 (the database holds the signing keys); a legacy key file is imported, and an unreadable or corrupt one, or an unreadable admin token, stops the server, naming the file")
    func secrets() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await KioskServer(configuration: configuration).shutdown()
        for name in ["kiosk-server.sqlite", "admin-token"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: store.data.appendingPathComponent(name).path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(name) is \(String(mode, radix: 8))")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.data.path).allSatisfy { !$0.hasPrefix(".") })

        // A key file kept by an earlier Kiosk becomes the store's first key: its receipts keep verifying.
        let legacy = try TemporaryDirectory()
        var legacyConfiguration = configuration
        legacyConfiguration.dataDirectory = legacy.url
        let key = legacy.url.appendingPathComponent("signing-key.json")
        let privateKey = Curve25519.Signing.PrivateKey()
        let d = privateKey.rawRepresentation.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try Data("{\"kid\": \"legacy-1\", \"d\": \"\(d)\"}".utf8).write(to: key)
        let imported = try await KioskServer(configuration: legacyConfiguration)
        #expect(try await imported.keys.jwks().keys.map { $0.keyIdentifier?.string } == ["legacy-1"])
        await imported.shutdown()

        let fresh = try TemporaryDirectory()
        legacyConfiguration.dataDirectory = fresh.url
        let badKey = fresh.url.appendingPathComponent("signing-key.json")
        try Data("{\"kid\": \"x\", \"d\": \"not a key\"}".utf8).write(to: badKey)
        let corrupt = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: legacyConfiguration) }
        #expect(corrupt?.description.hasPrefix("\(badKey.path): is not a signing key Kiosk can read") == true)
        #expect(try Data(contentsOf: badKey) == Data("{\"kid\": \"x\", \"d\": \"not a key\"}".utf8), "the key file was replaced")

        try FileManager.default.removeItem(at: badKey)
        try FileManager.default.createDirectory(at: badKey, withIntermediateDirectories: false)
        let unreadable = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: legacyConfiguration) }
        #expect(unreadable?.description.hasPrefix("\(badKey.path): exists but cannot be read") == true)

        let token = store.data.appendingPathComponent("admin-token")
        try FileManager.default.removeItem(at: token)
        try FileManager.default.createDirectory(at: token, withIntermediateDirectories: false)
        let badToken = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: configuration) }
        #expect(badToken?.description.hasPrefix("\(token.path): exists but cannot be read") == true)
    }
}
