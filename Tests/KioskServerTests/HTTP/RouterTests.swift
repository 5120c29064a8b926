import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import KioskCore
import KioskServer
import KioskTestSupport
import Logging
import Testing

/// The HTTP edge in process (hummingbird's `.router` test client: no socket), beside the live
/// suites that keep the wire: the request's own origin, and statuses a header decides.
@Suite("The router, in process")
struct RouterTests {
    static func withRouter(_ body: @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var logger = Logger(label: "kiosk.test")
        logger.logLevel = .critical
        let server = try await KioskServer(configuration: ServerConfiguration(
            catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data, port: 0), logger: logger)
        do {
            try await server.loadCatalog()
            try await server.makeApplication().test(.router, body)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    static func verificationURI(_ client: any TestClientProtocol, _ headers: HTTPFields) async throws -> String {
        try await client.execute(uri: "/v1/device-codes", method: .post, headers: headers.merging([.contentType: "application/json"]),
                                 body: ByteBuffer(string: "{}")) { response in
            #expect(response.status == .ok || response.status == .created)
            return try JSONDecoder.kiosk.decode(DeviceCodeGrant.self, from: Data(buffer: response.body)).verificationUri
        }
    }

    @Test("absolute links are https when the proxy in front says so, http otherwise")
    func forwardedProto() async throws {
        try await Self.withRouter { client in
            // The router test client's requests name the authority "localhost".
            let plain = try await Self.verificationURI(client, [:])
            #expect(plain == "http://localhost/account/device")
            var behindTLS: HTTPFields = [:]
            behindTLS[try #require(HTTPField.Name("X-Forwarded-Proto"))] = "https"
            let secure = try await Self.verificationURI(client, behindTLS)
            #expect(secure == "https://localhost/account/device")
        }
    }
}

/// The Host a client sends, over the wire (the in-process client always names localhost).
@Suite("The request's own origin, from the Host a client sends")
struct RequestOriginTests: StoreSuite {
    @Test("absolute links name the host and port the client reached; a forged Host is never written into one")
    func hostHeader() async throws {
        try await Self.withStore { _, http, _ in
            func uri(_ host: String) async throws -> String {
                let reply = try await http.send("POST", "/v1/device-codes", json: "{}", headers: [("Content-Type", "application/json"), ("Host", host)])
                return try reply.decode(DeviceCodeGrant.self).verificationUri
            }
            #expect(try await uri("store.example:8443") == "http://store.example:8443/account/device")
            for forged in ["evil.example/x\"><script>", "store.example@evil", "a,b"] {
                let written = try await uri(forged)
                #expect(written == "http://127.0.0.1/account/device", "\(forged) → \(written)")
            }
        }
    }
}

private extension HTTPFields {
    func merging(_ other: HTTPFields) -> HTTPFields {
        var merged = self
        for field in other { merged.append(field) }
        return merged
    }
}
