import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// HEAD as curl -I sends it.
@Suite("HEAD requests")
struct HeadRequestTests: LargeBookSuite {
    @Test("HEAD answers every GET route with its status and headers and no body, as curl -I expects; a HEAD of content counts no download")
    func headOfEveryGet() async throws {
        try await Self.withLargeBook { server, _, url, receipt in
            for path in ["/healthz", "/v1/catalog", "/.well-known/jwks.json", "/metrics"] {
                let get = try await HTTPClient().send(HTTPRequest(method: "GET", url: url + path))
                let head = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + path))
                #expect(head.status == 200 && get.status == 200, "\(path): \(head.status)")
                #expect(head.body.isEmpty, "\(path)")
                #expect(head.headers["content-type"] == get.headers["content-type"], "\(path)")
            }
            let catalog = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/catalog"))
            #expect(catalog.headers["etag"] != nil)
            let missing = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/no-such-route"))
            #expect(missing.status == 404)
            let unauthorized = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/account"))
            #expect(unauthorized.status == 401)
            let auth = ("Authorization", "Receipt \(receipt)")
            _ = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/content/\(Self.large)", headers: [auth]))
            let admin = try await HTTPClient().send(HTTPRequest(method: "GET", url: url + "/v1/admin/downloads", headers: [("Authorization", "Bearer \(server.adminToken)")]))
            #expect(!String(decoding: admin.body, as: UTF8.self).contains(Self.large), "a HEAD is not a download: \(String(decoding: admin.body, as: UTF8.self))")
        }
    }
}
