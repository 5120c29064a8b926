import Foundation
import Hummingbird
import KioskCore
import KioskTestSupport
import KioskTransfer
import Synchronization
import Testing
@testable import KioskClient

/// Every path that talks to a server — a download, `kiosk fetch`, a replayed purchase — asks the one
/// ``RetryRule`` what a status means, so each gives the same answer on the same status: waits and
/// tries again when it is transient, and stops for good when it is the server's final word.
@Suite("One retry rule on every client path")
struct RetryAgreementTests {
    static let statuses = [400, 401, 403, 404, 408, 409, 410, 422, 429, 500, 502, 503, 504]
    static let book = "com.kiosk.books.rule-check"

    /// Answers every request with `status`, counting them by path.
    final class Answering: Sendable {
        let status: Int
        let hits = Mutex<[String: Int]>([:])

        init(status: Int) { self.status = status }

        func count(_ path: String) -> Int { hits.withLock { $0[path, default: 0] } }

        var router: Router<BasicRequestContext> {
            let router = Router()
            let answer: @Sendable (Request, BasicRequestContext) async throws -> Response = { [self] request, _ in
                hits.withLock { $0[request.uri.path, default: 0] += 1 }
                let body = #"{"error":"rule_check","message":"answered \#(status) on purpose"}"#
                return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
            }
            router.get("**", use: answer)
            router.post("**", use: answer)
            return router
        }
    }

    @Test("a download waits for a transient status and fails for good on any other", arguments: statuses)
    func download(status: Int) async throws {
        let answering = Answering(status: status)
        let directory = try TemporaryDirectory()
        try await LoopbackServer.run(answering.router, label: "rule-check") { port in
            var configuration = KioskClient.Configuration()
            configuration.backoff = Backoff(base: 60, cap: 60)
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: "http://127.0.0.1:\(port)", configuration: configuration)
            let content = ContentDescriptor(format: .zip, size: 10, sha256: String(repeating: "a", count: 64), version: "1")
            try DownloadRows(database: client.database).enqueueDownload(productId: Self.book, content: content, receipt: "not-checked-here", transactionId: nil)
            let report = try await client.runDownloads()
            if RetryRule.isTransient(status: status) {
                #expect(report.waiting == [Self.book], "status \(status)")
                #expect(try client.downloads().first?.state == .waiting)
            } else {
                #expect(report.failed == [Self.book], "status \(status)")
                #expect(try client.downloads().first?.state == .failed)
            }
        }
    }

    @Test("kiosk fetch tries a transient status again and stops at once on any other", arguments: statuses)
    func fetch(status: Int) async throws {
        let answering = Answering(status: status)
        let directory = try TemporaryDirectory()
        try await LoopbackServer.run(answering.router, label: "rule-check") { port in
            var fetch = URLFetch(url: "http://127.0.0.1:\(port)/file", output: directory.path("file"), expectedSHA256: nil, headers: [])
            fetch.attempts = 3
            fetch.backoff = Backoff(base: 0.01, cap: 0.02)
            await #expect(throws: (any Error).self) { try await fetch.run() }
            #expect(answering.count("/file") == (RetryRule.isTransient(status: status) ? 3 : 1), "status \(status)")
        }
    }

    @Test("a replayed purchase stays saved for a transient status (or a 401, which refuses the device, not the purchase) and fails on any other", arguments: statuses)
    func purchase(status: Int) async throws {
        let answering = Answering(status: status)
        let directory = try TemporaryDirectory()
        try await LoopbackServer.run(answering.router, label: "rule-check") { port in
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: "http://127.0.0.1:\(port)")
            _ = try client.database.account.save(id: "account-1", token: "token-1", replacing: false, store: try client.server())
            let record = try PurchaseRows(database: client.database).beginPurchase(productId: Self.book, kind: .nonConsumable, quantity: 1, method: "approve", storeURL: "http://127.0.0.1:\(port)", storeKeys: nil)
            _ = try? await client.purchases.send(record)
            let id = try #require(record.id)
            let stored = try #require(try PurchaseRows(database: client.database).payment(id))
            let keptForLater = RetryRule.isTransient(status: status) || status == 401
            #expect(stored.state == (keptForLater ? .purchasing : .failed), "status \(status)")
            #expect(answering.count("/v1/payments") >= 1)
        }
    }
}
