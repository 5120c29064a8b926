import Foundation
import Hummingbird
@testable import KioskServer
@testable import KioskStore
import Logging
import Synchronization
import Testing

/// A request that fails underneath the store's own rules (a database connection dropped
/// mid-request) answers JSON the client can act on, and its cause is logged for the operator.
@Suite("Requests that fail underneath")
struct RequestFailureTests {
    /// Keeps every message logged, for the test to read.
    final class Captured: LogHandler, @unchecked Sendable {
        let lines = Mutex<[String]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.withLock { $0.append("\(event.level) \(event.message) \(event.metadata ?? [:])") }
        }
    }

    @Test("a database failure is a 503 to send again (one its operator must mend, to send later), anything else a 500 naming the log; all logged with their cause; the store's refusals answer as they are")
    func failuresAnswerJSON() throws {
        let captured = Captured()
        let logger = Logger(label: "test") { _ in captured }
        let database = RequestLogMiddleware.answer(for: InlineSQLiteError(code: 10, message: "disk I/O error"), route: "/v1/payments", logger: logger)
        let databaseFailure = try #require(database as? APIFailure)
        #expect(databaseFailure.status == .serviceUnavailable && databaseFailure.code == "unavailable" && databaseFailure.retryAfter == 1)

        struct Unexpected: Error {}
        let other = try #require(RequestLogMiddleware.answer(for: Unexpected(), route: "/v1/payments", logger: logger) as? APIFailure)
        #expect(other.status == .internalServerError && other.code == "internal" && other.message.contains("log"))

        let refusal = APIFailure.badRequest("the body is not valid JSON")
        #expect((RequestLogMiddleware.answer(for: refusal, route: "/v1/payments", logger: logger) as? APIFailure)?.code == "bad_request")
        #expect(RequestLogMiddleware.answer(for: CancellationError(), route: "/v1/payments", logger: logger) is CancellationError)

        // A refusal that lasts until the operator acts: said so, and a later retry asked for.
        for code: Int32 in [8, 13, 3] {
            let lasting = try #require(RequestLogMiddleware.answer(for: InlineSQLiteError(code: code, message: "attempt to write a readonly database"), route: "/v1/payments", logger: logger) as? APIFailure)
            #expect(lasting.status == .serviceUnavailable && lasting.retryAfter == 60 && lasting.message.contains("operator"), "\(lasting)")
        }
        let busy = try #require(RequestLogMiddleware.answer(for: InlineSQLiteError(code: 5, message: "database is locked"), route: "/v1/payments", logger: logger) as? APIFailure)
        #expect(busy.retryAfter == 1)

        let lines = captured.lines.withLock { $0 }.filter { !$0.contains("will until this is mended") && !$0.contains("database is locked") }
        #expect(captured.lines.withLock { $0 }.filter { $0.contains("will until this is mended") && $0.contains("readonly") }.count == 3)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.contains("disk I/O error") == true && lines.allSatisfy { $0.hasPrefix("error a request failed") && $0.contains("/v1/payments") }, "\(lines)")
    }
}
