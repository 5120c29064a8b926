import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The store's own address in the links it writes, over the wire: the Host a client sends, and
/// the scheme a trusted proxy names.
@Suite("The request's own origin, from the Host a client sends")
struct RequestOriginTests: StoreSuite {
    @Test("absolute links are https only when a trusted proxy says so; X-Forwarded-Proto from any other peer is ignored")
    func forwardedProto() async throws {
        @Sendable func uri(_ http: StoreHTTP, _ headers: [(String, String)]) async throws -> String {
            let reply = try await http.send("POST", "/v1/device-codes", json: "{}", headers: [("Content-Type", "application/json")] + headers)
            return try reply.decode(DeviceCodeGrant.self).verificationUri
        }
        let claimed = [("X-Forwarded-Proto", "https")]
        @Sendable func signInCookie(_ http: StoreHTTP) async throws -> String {
            try await http.send("GET", "/account", headers: claimed).header("Set-Cookie") ?? ""
        }
        try await Self.withStore { _, http, _ in
            #expect(try await uri(http, []).hasPrefix("http://"))
            // A client talking to the store directly: its word is not a proxy's.
            let direct = try await uri(http, claimed)
            #expect(direct.hasPrefix("http://"), "\(direct)")
            let cookie = try await signInCookie(http)
            #expect(cookie.hasPrefix("kiosk_account_csrf=") && !cookie.contains("Secure"), "\(cookie)")
        }
        // Behind a proxy the store trusts (the test's own address, as nginx's would be).
        try await Self.withStore(configure: { $0.rateLimits.trustedProxies = ["127.0.0.1"] }) { _, http, _ in
            #expect(try await uri(http, []).hasPrefix("http://"))
            let proxied = try await uri(http, claimed)
            #expect(proxied.hasPrefix("https://") && proxied.hasSuffix("/account/device"), "\(proxied)")
            // The sign-in form's cookie as the session's: Secure over HTTPS.
            #expect(try await signInCookie(http).hasSuffix("; Secure"))
        }
    }

    @Test("absolute links name the host and port the client reached; a forged Host is never written into one")
    func hostHeader() async throws {
        try await Self.withStore { _, http, _ in
            func uri(_ host: String) async throws -> String {
                let reply = try await http.send("POST", "/v1/device-codes", json: "{}", headers: [("Content-Type", "application/json"), ("Host", host)])
                return try reply.decode(DeviceCodeGrant.self).verificationUri
            }
            #expect(try await uri("store.example:8443") == "http://store.example:8443/account/device")
            #expect(try await uri("kiosk_web:8080") == "http://kiosk_web:8080/account/device", "a container's name")
            #expect(try await uri("[::1]:8080") == "http://[::1]:8080/account/device")
            for forged in ["evil.example/x\"><script>", "store.example@evil", "a,b", ":18200", "x:-1", "x:99999", "127.0.0.1:", "x:80:80", "[::1", "[zz]:80", "bücher.example"] {
                let written = try await uri(forged)
                #expect(written == "http://127.0.0.1/account/device", "\(forged) → \(written)")
            }
        }
    }
}
