@testable import KioskServer
import Testing

@Suite("A conditional GET of the catalog recognised from its bytes")
struct ConditionalCatalogGetTests {
    static func parse(_ text: String) -> ConditionalCatalogGet? {
        Array(text.utf8).withUnsafeBytes { ConditionalCatalogGet($0) }
    }

    @Test("a plain request: its fields, its length, repeated fields joined, names in any case, spaces around values trimmed")
    func recognised() throws {
        let request = "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nif-none-match:  \"a\"\t\r\nIF-NONE-MATCH: W/\"b\"\r\n"
            + "Accept-Encoding: br\r\naccept-encoding: gzip;q=1\r\nUser-Agent: kiosk/1.0 (linux)\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n"
        let parsed = try #require(Self.parse(request + "GET /next"))
        #expect(parsed == ConditionalCatalogGet(
            isHead: false, ifNoneMatch: "\"a\",W/\"b\"", acceptEncoding: "br,gzip;q=1", forwardedFor: "10.0.0.1",
            userAgent: "kiosk/1.0 (linux)", length: request.utf8.count))
        let head = try #require(Self.parse("HEAD /v1/catalog HTTP/1.1\r\n\r\n"))
        #expect(head.isHead && head.ifNoneMatch.isEmpty && head.userAgent == nil && head.length == 29)
    }

    @Test("anything unusual is left to llhttp", arguments: [
        // Not the catalog, not exactly its path, not HTTP/1.1, not GET or HEAD.
        "GET /v1/catalogs HTTP/1.1\r\n\r\n", "GET /v1/catalog?x=1 HTTP/1.1\r\n\r\n", "GET /v1/catalog/ HTTP/1.1\r\n\r\n",
        "GET http://h/v1/catalog HTTP/1.1\r\n\r\n", "GET /v1/catalog HTTP/1.0\r\n\r\n", "get /v1/catalog HTTP/1.1\r\n\r\n",
        "POST /v1/catalog HTTP/1.1\r\n\r\n", "GET  /v1/catalog HTTP/1.1\r\n\r\n",
        // A field that frames a body or the connection, or names an account.
        "GET /v1/catalog HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nUpgrade: h2c\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n",
        // Malformed or unusual framing: folded lines, bare CR or LF, a space before the colon, no name.
        "GET /v1/catalog HTTP/1.1\r\nIf-None-Match: \"a\",\r\n \"b\"\r\n\r\n", "GET /v1/catalog HTTP/1.1\nHost: h\n\n",
        "GET /v1/catalog HTTP/1.1\r\nHost: h\n\r\n", "GET /v1/catalog HTTP/1.1\r\nHost: h\r\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nIf-None-Match : \"a\"\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\n: x\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nHost h\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\n\r\r\n",
        // Bytes outside visible ASCII, in a name or a value.
        "GET /v1/catalog HTTP/1.1\r\nUser-Agent: Lesegerät\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nX-\u{1}: a\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nUser-Agent: a\u{7f}\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nUser-Agent: a\u{0}b\r\n\r\n",
        // Not yet whole.
        "GET /v1/catalog HTTP/1.1\r\n", "GET /v1/catalog HTTP/1.1\r\nHost: h\r\n", "GET /v1/catalog HTTP/1.1\r\nHost: h\r\n\r",
        "GET /v1/cat",
    ])
    func refused(request: String) {
        #expect(Self.parse(request) == nil, "\(request.debugDescription)")
    }

    @Test("a request over 8 KiB or with over 100 fields is left to llhttp; one just under both is recognised")
    func limits() {
        let start = "GET /v1/catalog HTTP/1.1\r\n"
        let hundred = start + String(repeating: "X-A: b\r\n", count: 100) + "\r\n"
        #expect(Self.parse(hundred) != nil)
        #expect(Self.parse(start + String(repeating: "X-A: b\r\n", count: 101) + "\r\n") == nil)
        let filler = String(repeating: "a", count: ConditionalCatalogGet.maximumLength - start.utf8.count - "X: \r\n\r\n".utf8.count)
        #expect(Self.parse(start + "X: " + filler + "\r\n\r\n") != nil)
        #expect(Self.parse(start + "X: " + filler + "a\r\n\r\n") == nil)
    }
}
