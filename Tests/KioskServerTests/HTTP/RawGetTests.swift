@testable import KioskServer
import Testing

@Suite("A GET recognised from its bytes")
struct RawGetTests {
    static func parse(_ text: String) -> RawGet? {
        Array(text.utf8).withUnsafeBytes { RawGet($0) }
    }

    @Test("a plain request: its fields, its length, repeated fields joined, names in any case, spaces around values trimmed")
    func recognised() throws {
        let request = "GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nif-none-match:  \"a\"\t\r\nIF-NONE-MATCH: W/\"b\"\r\n"
            + "Accept-Encoding: br\r\naccept-encoding: gzip;q=1\r\nUser-Agent: kiosk/1.0 (linux)\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n"
        let parsed = try #require(Self.parse(request + "GET /next"))
        #expect(parsed == RawGet(
            isHead: false, target: "/v1/catalog", ifNoneMatch: "\"a\",W/\"b\"", acceptEncoding: "br,gzip;q=1", forwardedFor: "10.0.0.1",
            userAgent: "kiosk/1.0 (linux)", length: request.utf8.count))
        let head = try #require(Self.parse("HEAD /v1/catalog HTTP/1.1\r\n\r\n"))
        #expect(head.isHead && head.target == "/v1/catalog" && head.ifNoneMatch.isEmpty && head.userAgent == nil && head.length == 29)
        // Any target in origin form, as sent: the responder decides what it answers.
        for target in ["/", "/v1/catalogs", "/v1/catalog?x=1", "/v1/catalog/", "/products/com.kiosk.books.salt-and-stars",
                       "/search?q=Sea%20stories&page=2", "/subjects/Sea%20stories", "/a:b@c!$&'()*+,;=-._~"] {
            #expect(Self.parse("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")?.target == target, "\(target)")
        }
    }

    @Test("anything unusual is left to llhttp", arguments: [
        // Not in origin form, not HTTP/1.1, not GET or HEAD, not one space apart.
        "GET http://h/v1/catalog HTTP/1.1\r\n\r\n", "GET * HTTP/1.1\r\n\r\n", "GET v1/catalog HTTP/1.1\r\n\r\n",
        "GET /v1/catalog  HTTP/1.1\r\n\r\n", "GET /v1/catalog HTTP/1.1 \r\n\r\n", "GET /v1/catalog HTTP/1.0\r\n\r\n", "get /v1/catalog HTTP/1.1\r\n\r\n",
        "POST /v1/catalog HTTP/1.1\r\n\r\n", "GET  /v1/catalog HTTP/1.1\r\n\r\n",
        // A target with what a path and a query do not hold: a fragment, a space, a quote, angle
        // brackets, a backslash, a byte outside ASCII.
        "GET /#x HTTP/1.1\r\n\r\n", "GET /a b HTTP/1.1\r\n\r\n", "GET /\"x HTTP/1.1\r\n\r\n", "GET /<x> HTTP/1.1\r\n\r\n",
        "GET /a\\b HTTP/1.1\r\n\r\n", "GET /büch HTTP/1.1\r\n\r\n", "GET /{x}|^` HTTP/1.1\r\n\r\n",
        // A field that frames a body or the connection; two Authorization lines.
        "GET /v1/catalog HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
        "GET /v1/catalog HTTP/1.1\r\nUpgrade: h2c\r\n\r\n", "GET /v1/catalog HTTP/1.1\r\nAuthorization: Bearer x\r\nAuthorization: Bearer y\r\n\r\n",
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

    @Test("a request over 8 KiB, with over 100 fields or a target over 1 KiB is left to llhttp; one just under each is recognised")
    func limits() {
        let longest = "/" + String(repeating: "a", count: RawGet.maximumTarget - 1)
        #expect(Self.parse("GET \(longest) HTTP/1.1\r\n\r\n")?.target == longest)
        #expect(Self.parse("GET \(longest)a HTTP/1.1\r\n\r\n") == nil)
        let start = "GET /v1/catalog HTTP/1.1\r\n"
        let hundred = start + String(repeating: "X-A: b\r\n", count: 100) + "\r\n"
        #expect(Self.parse(hundred) != nil)
        #expect(Self.parse(start + String(repeating: "X-A: b\r\n", count: 101) + "\r\n") == nil)
        let filler = String(repeating: "a", count: RawGet.maximumLength - start.utf8.count - "X: \r\n\r\n".utf8.count)
        #expect(Self.parse(start + "X: " + filler + "\r\n\r\n") != nil)
        #expect(Self.parse(start + "X: " + filler + "a\r\n\r\n") == nil)
    }

    @Test("an Authorization line: a bearer token is kept (any case of the scheme, spaces trimmed), any other only noted")
    func authorization() throws {
        let bearer = try #require(Self.parse("GET /v1/transactions?wait=30 HTTP/1.1\r\nAuthorization: bEaReR \t tok-1 \r\n\r\n"))
        #expect(bearer.bearerToken == "tok-1" && bearer.hasAuthorization)
        for other in ["Basic dTpw", "Bearer ", "Bearertok", "Token x"] {
            let parsed = try #require(Self.parse("GET /v1/catalog HTTP/1.1\r\nAuthorization: \(other)\r\n\r\n"))
            #expect(parsed.bearerToken == nil && parsed.hasAuthorization, "\(other)")
        }
        #expect(Self.parse("GET /v1/catalog HTTP/1.1\r\n\r\n")?.hasAuthorization == false)
    }
}
