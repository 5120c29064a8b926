import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import NIOPosix
import SQLKit
import Testing

/// A request that cannot have a database connection answers 503 with Retry-After, never a 500:
/// with PostgreSQL's pool exhausted, one request answered a 500 whose cause nobody found (the
/// pool's timeout was no database error the request's answer knew).
@Suite("A database connection that cannot be had")
struct ConnectionPoolTests: StoreSuite {
    @Test("PostgreSQL: every pooled connection busy past the pool's wait answers 503 with Retry-After and charges nothing; once one is free, the same request succeeds")
    func poolExhausted() async throws {
        try await Self.withStore(engine: .postgres, configure: {
            $0.databasePool = DatabasePool(connectionsPerThread: 1, wait: .milliseconds(300))
        }) { server, http, account in
            let database = server.store.database
            let threads = MultiThreadedEventLoopGroup.singleton.makeIterator().reduce(0) { count, _ in count + 1 }
            // Every connection the pool may open (one per event-loop thread), held by a slow statement:
            // four holders a thread, since requests go round the threads and the store's own
            // workers may have a connection for a moment (a holder that waits past the pool's wait
            // gives up; the others hold on).
            let held = Task {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<(4 * threads) {
                        group.addTask { _ = try? await database.read { db in try await db.raw("SELECT pg_sleep(3)").run() } }
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            let key = UUID().uuidString
            let refused = try await http.pay(Self.pack5, token: account.token, key: key)
            #expect(refused.status == 503, "\(Self.message(refused))")
            #expect(refused.header("Retry-After") != nil)
            #expect(try refused.decode(APIError.self).code == "unavailable")
            await held.value
            let paid = try await http.pay(Self.pack5, token: account.token, key: key)
            #expect(paid.status == 200, "\(Self.message(paid))")
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [499], "charged once")
        }
    }

    @Test("a connection that cannot be had is a database failure: 503 with Retry-After, on either engine's error")
    func answeredAsUnavailable() {
        let unavailable = ConnectionUnavailable(underlying: CancellationError())
        #expect(Store.isDatabaseFailure(unavailable))
        #expect(!Store.needsOperator(unavailable))
        #expect(Store.describe(unavailable).hasPrefix("no database connection could be had"))
    }
}
