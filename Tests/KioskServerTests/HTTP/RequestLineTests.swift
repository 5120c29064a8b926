@testable import KioskServer
import Testing

@Suite("The request log line's quoted header values")
struct RequestLineTests {
    @Test("quotes and backslashes are escaped; controls, C1 controls and line separators become ?; at most 200 characters; none is -")
    func quoted() {
        #expect(RequestLine.quoted(nil) == "-" && RequestLine.quoted("") == "-")
        #expect(RequestLine.quoted(#"ua" client=9.9.9.9 x="\"#) == #""ua\" client=9.9.9.9 x=\"\\""#)
        #expect(RequestLine.quoted("a\r\nb\tc\u{7f}d\u{85}e\u{9f}f\u{2028}g\u{2029}h") == "\"a??b?c?d?e?f?g?h\"")
        #expect(RequestLine.quoted("Lesegerät ☕") == "\"Lesegerät ☕\"")
        #expect(RequestLine.quoted(String(repeating: "x", count: 500)) == "\"" + String(repeating: "x", count: 200) + "\"")
    }
}
