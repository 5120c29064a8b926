import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import SQLKit
import KioskTestSupport
import Testing

/// `GET /v1/transactions` is the account's change feed: what changed after a cursor, and a long poll
/// that a change wakes through whichever instance wrote it.
@Suite("The account change feed")
struct ChangeFeedTests: StoreSuite, TwoInstanceSuite {
    static func page(_ http: StoreHTTP, _ token: String, after cursor: String?, wait: Int? = nil) async throws -> TransactionPage {
        var query: [String] = []
        if let cursor { query.append("after=\(cursor)") }
        if let wait { query.append("wait=\(wait)") }
        let reply = try await http.send("GET", "/v1/transactions" + (query.isEmpty ? "" : "?" + query.joined(separator: "&")), token: token)
        #expect(reply.status == 200)
        return try reply.decode(TransactionPage.self)
    }

    @Test("a refund of an older purchase comes after the cursor, once, with its new state; the full walk sees each transaction once", arguments: TestEngine.all)
    func refundAfterCursor(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let book = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction
            _ = try await http.pay(Self.pack5, token: account.token)
            let first = try await Self.page(http, account.token, after: nil)
            #expect(first.transactions.count == 2)
            let refunded = try await http.send("POST", "/v1/admin/transactions/\(book.transactionId)/refund", authorization: "Bearer \(server.adminToken)", json: "{}")
            #expect(refunded.status == 200)
            let next = try await Self.page(http, account.token, after: first.cursor)
            #expect(next.transactions.map(\.transactionId) == [book.transactionId])
            #expect(next.transactions.first?.status == .revoked)
            let nothing = try await Self.page(http, account.token, after: next.cursor)
            #expect(nothing.transactions.isEmpty && nothing.cursor == next.cursor)
            let walk = try await Self.page(http, account.token, after: nil)
            #expect(walk.transactions.count == 2 && Set(walk.transactions.map(\.transactionId)).count == 2)
        }
    }

    @Test("a long poll with nothing new is held until the account changes, then answers the change", arguments: TestEngine.all)
    func longPollWakes(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            let start = try await Self.page(http, account.token, after: nil)
            let clock = ContinuousClock()
            let began = clock.now
            async let held = Self.page(http, account.token, after: start.cursor ?? "0", wait: 20)
            try await Task.sleep(for: .milliseconds(500))
            _ = try await http.pay(Self.pack5, token: account.token)
            let answer = try await held
            #expect(answer.transactions.count == 1)
            #expect(clock.now - began < .seconds(3))
            // Nothing after it: the poll answers empty once its wait is over.
            let quiet = clock.now
            let empty = try await Self.page(http, account.token, after: answer.cursor, wait: 1)
            #expect(empty.transactions.isEmpty && clock.now - quiet >= .milliseconds(900))
        }
    }

    @Test("a wake that brings nothing after the poll's cursor (an instance's late notice of a change already read) does not answer the poll empty: it waits on and answers the next change", arguments: TestEngine.all)
    func emptyWakeWaitsOn(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let changes = server.store.changes
            let start = try await Self.page(http, account.token, after: nil)
            async let held = Self.page(http, account.token, after: start.cursor ?? "0", wait: 30)
            /// Waits until the poll is registered (it waits), for at most 20 s.
            func pollWaits() async throws -> Bool {
                for _ in 0..<200 where changes.waiting != 1 { try await Task.sleep(for: .milliseconds(100)) }
                return changes.waiting == 1
            }
            try #require(try await pollWaits())
            // What PostgreSQL's NOTIFY of an earlier commit does when it arrives late: nothing new.
            changes.signal(account.accountId)
            #expect(try await pollWaits(), "the poll answered the empty wake instead of waiting on")
            _ = try await http.pay(Self.pack5, token: account.token)
            let answer = try await held
            #expect(answer.transactions.map(\.productId) == [Self.pack5], "\(answer)")
        }
    }

    @Test("a refund, a pack and a subscription bought through instance A each wake a long poll waiting on instance B")
    func crossInstanceWake() async throws {
        try await Self.withTwoInstances { a, b in
            let (serverA, httpA) = a
            let (_, httpB) = b
            let account = try await httpA.createAccount()
            let book = try await httpA.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction
            var cursor = try await Self.page(httpB, account.token, after: nil).cursor
            let clock = ContinuousClock()
            // Each change is written by a different path (a refund's statements, a pack's one
            // statement, a subscription's start); each must reach B's waiting poll at once.
            let changes: [(String, TransactionStatus, @Sendable () async throws -> Void)] = [
                ("refund", .revoked, {
                    let refunded = try await httpA.send("POST", "/v1/admin/transactions/\(book.transactionId)/refund",
                                                        authorization: "Bearer \(serverA.adminToken)", json: "{}")
                    #expect(refunded.status == 200)
                }),
                ("pack", .purchased, {
                    let bought = try await httpA.pay(Self.pack5, token: account.token)
                    #expect(bought.status == 200)
                }),
                ("subscription", .purchased, {
                    let bought = try await httpA.pay(Self.subscription, token: account.token)
                    #expect(bought.status == 200)
                }),
            ]
            for (name, status, change) in changes {
                let after = cursor
                async let held = Self.page(httpB, account.token, after: after, wait: 20)
                try await Task.sleep(for: .milliseconds(700))
                let changedAt = clock.now
                try await change()
                let answer = try await held
                #expect(answer.transactions.map(\.status) == [status], "\(name)")
                #expect(clock.now - changedAt < .seconds(2), "\(name) woke the poll on the other instance after \(clock.now - changedAt)")
                cursor = answer.cursor
            }
        }
    }

    @Test("PostgreSQL drops the other instance's LISTEN connection: a purchase committed before it listens again still reaches its polls within seconds")
    func wakeAfterListenLost() async throws {
        try await Self.withTwoInstances { a, b in
            let (_, httpA) = a
            let (serverB, httpB) = b
            let account = try await httpA.createAccount()
            let start = try await Self.page(httpB, account.token, after: nil).cursor
            let clock = ContinuousClock()
            // A device on B, asking again at once after each answer, as the agent does.
            let poller = Task { () -> ContinuousClock.Instant? in
                var cursor = start
                while !Task.isCancelled {
                    let page = try await Self.page(httpB, account.token, after: cursor, wait: 20)
                    if !page.transactions.isEmpty { return clock.now }
                    cursor = page.cursor
                }
                return nil
            }
            try await Task.sleep(for: .milliseconds(500))
            // A failover or an operator's pg_terminate_backend: every LISTEN connection is gone.
            try await serverB.store.database.read { db in
                try await db.raw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()").run()
            }
            // Committed while B has no LISTEN in place (it tries again after a second).
            try await Task.sleep(for: .milliseconds(300))
            let boughtAt = clock.now
            #expect(try await httpA.pay(Self.book, token: account.token).status == 200)
            let wokeAt = try await poller.value
            let waited = try #require(wokeAt) - boughtAt
            #expect(waited < .seconds(3), "B's poll saw the purchase after \(waited)")
        }
    }

    @Test("every feed page names the entity tag of GET /v1/store, which answers 304 to it and 200 with the tag to another")
    func storeTag() async throws {
        try await Self.withStore { _, http, account in
            let page = try await Self.page(http, account.token, after: nil)
            let tag = try #require(page.store)
            let described = try await http.send("GET", "/v1/store")
            #expect(described.status == 200 && described.header("ETag") == tag)
            #expect(try described.decode(StoreDescription.self).entityTag == tag)
            #expect(try await http.send("GET", "/v1/store", headers: [("If-None-Match", tag)]).status == 304)
            #expect(try await http.send("GET", "/v1/store", headers: [("If-None-Match", "\"other\"")]).status == 200)
            let waited = try await Self.page(http, account.token, after: page.cursor ?? "0", wait: 1)
            #expect(waited.store == tag)
        }
    }

    @Test("the transaction list pages with a cursor and finish is recorded", arguments: TestEngine.all)
    func transactionsAndFinish(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, account in
            for _ in 0..<3 { _ = try await http.pay(Self.pack5, token: account.token) }
            let all = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(all.transactions.count == 3)
            #expect(all.transactions.allSatisfy { !$0.finished })
            let after = try await http.send("GET", "/v1/transactions?after=\(all.cursor ?? "")", token: account.token).decode(TransactionPage.self)
            #expect(after.transactions.isEmpty)

            let id = all.transactions[0].transactionId
            let finished = try await http.send("POST", "/v1/transactions/\(id)/finish", token: account.token).decode(StoreTransaction.self)
            #expect(finished.finished)
            let other = try await http.createAccount()
            #expect(try await http.send("POST", "/v1/transactions/\(id)/finish", token: other.token).status == 404)
        }
    }
}
