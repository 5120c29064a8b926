import Foundation
import KioskTestSupport
import Testing
@testable import KioskClient

/// docs/states.md shows the purchase's moves; the client's writes obey `PaymentTransition.all`.
/// The document's copy is generated from that table and must stay equal to it.
@Suite("The states document")
struct StateDocumentTests {
    @Test("docs/states.md lists exactly the purchase moves the client's writes obey")
    func purchaseMovesMatchTheTable() throws {
        let document = try String(contentsOf: SampleStore.repository.appendingPathComponent("docs/states.md"), encoding: .utf8)
        let begin = "<!-- transitions: PaymentState (generated from PaymentTransition.markdownTable) -->\n"
        let end = "\n<!-- end transitions -->"
        let start = try #require(document.range(of: begin), "docs/states.md lost its transitions marker")
        let stop = try #require(document.range(of: end, range: start.upperBound..<document.endIndex))
        let shown = String(document[start.upperBound..<stop.lowerBound])
        #expect(shown == PaymentTransition.markdownTable, "replace the table in docs/states.md with:\n\(PaymentTransition.markdownTable)")
    }

    @Test("every state but restored, which rows are inserted in, is reached by a move; none is left with no way in")
    func everyStateIsReached() {
        let reached = Set(PaymentTransition.all.map(\.to))
        #expect(Set(PaymentState.allCases).subtracting(reached) == [.purchasing, .restored])
    }
}
