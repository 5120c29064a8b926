import KioskCore
import Testing

/// An ID as one path segment: never two segments, never a dot segment libcurl would resolve, and
/// dots inside it kept, so an answer that names it names it as written.
@Suite("An ID in a request's path")
struct PathSegmentTests {
    @Test("dots inside an ID stay; a slash, a space, a control character and a non-ASCII letter are encoded; a segment of dots alone is encoded whole")
    func encoding() {
        #expect(PathSegment.encode("com.kiosk.books.river-of-maps") == "com.kiosk.books.river-of-maps")
        #expect(PathSegment.encode("txn_0123abc") == "txn_0123abc")
        #expect(PathSegment.encode("txn_../../txn_x") == "txn_..%2F..%2Ftxn_x")
        #expect(PathSegment.encode("..") == "%2E%2E")
        #expect(PathSegment.encode(".") == "%2E")
        #expect(PathSegment.encode("a b\u{7}/é") == "a%20b%07%2F%C3%A9")
        #expect(PathSegment.encode("") == "")
    }
}
