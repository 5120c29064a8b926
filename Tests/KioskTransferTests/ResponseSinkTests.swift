import Foundation
import Testing
@testable import KioskTransfer

/// The response's status and fields as libcurl hands them over, a line at a time with its CR LF.
@Suite("A response's header lines")
struct ResponseSinkTests {
    private func sink(after lines: [String]) -> ResponseSink {
        let sink = ResponseSink(limit: 0)
        for line in lines {
            var line = line
            line.withUTF8 { sink.addHeaderLine(UnsafeRawBufferPointer($0)) }
        }
        return sink
    }

    @Test("the status of the last status line, its fields alone: a 100 Continue's are forgotten")
    func lastStatusLine() {
        let answer = sink(after: ["HTTP/1.1 100 Continue\r\n", "X-Early: 1\r\n", "\r\n",
                                  "HTTP/1.1 201 Created\r\n", "Content-Type: application/json\r\n", "\r\n"])
        #expect(answer.status == 201)
        #expect(answer.headers == ["content-type": "application/json"])
        #expect(sink(after: ["HTTP/2 304\r\n"]).status == 304)
        // libcurl passes a status line with more than one space after the version, and counts it.
        #expect(sink(after: ["HTTP/1.1  200 OK\r\n"]).status == 200)
        // A status line without a number leaves no status of the one before.
        #expect(sink(after: ["HTTP/1.1 200 OK\r\n", "HTTP/1.1 abc OK\r\n"]).status == 0)
        #expect(sink(after: ["HTTP/1.1 200 OK\r\n", "HTTP/1.1\r\n"]).status == 0)
    }

    @Test("a line that starts with white space (a folded line) is read from its first visible byte")
    func leadingWhiteSpace() {
        let answer = sink(after: ["HTTP/1.1 200 OK\r\n", " \tX-Folded:  on \r\n", "  \r\n"])
        #expect(answer.headers == ["x-folded": "on"])
        #expect(answer.status == 200)
    }

    @Test("names in lower case, values trimmed of spaces and tabs, a field sent twice joined by a comma; a line without a colon ignored")
    func fields() {
        let answer = sink(after: ["HTTP/1.1 200 OK\r\n", "Cache-Control:  no-store \t\r\n", "cache-control: private\r\n",
                                  "ETag:\"v1\"\r\n", "Empty:\r\n", "no colon here\r\n", "Location: http://a:8080/b\r\n", "\r\n"])
        #expect(answer.status == 200)
        #expect(answer.headers == ["cache-control": "no-store, private", "etag": "\"v1\"", "empty": "", "location": "http://a:8080/b"])
    }

    @Test("a value's own bytes are kept: inner spaces and text beyond ASCII")
    func valueBytes() {
        let answer = sink(after: ["HTTP/1.1 200 OK\r\n", "Content-Disposition: attachment; filename=\"Café  Noir.epub\"\r\n"])
        #expect(answer.headers["content-disposition"] == "attachment; filename=\"Café  Noir.epub\"")
    }
}

/// A request body goes to libcurl as text: one it could not send as text is refused before any connection.
@Suite("Request bodies that are not text")
struct RequestBodyTests {
    @Test("a NUL byte or bytes that are not UTF-8 are refused, naming why, before any connection", arguments: [
        Data([0x7B, 0x00, 0x7D]), Data([0x7B, 0xFF, 0x7D]), Data([0xC3]),
    ])
    func refused(body: Data) async throws {
        // Port 9 (discard) on loopback: nothing listens there, so a request that went out would fail otherwise.
        let error = await #expect(throws: TransferError.self) {
            _ = try await HTTPClient().send(HTTPRequest(method: "POST", url: "http://127.0.0.1:9/hook", body: body))
        }
        #expect(error?.message == "request bodies must be UTF-8 text")
    }
}
