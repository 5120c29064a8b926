import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Synchronization
import Testing

/// A payment that decides on what the account holds is not starved by the account's credit packs,
/// which decide on nothing and so take no turn.
@Suite("Turns under a stream of credit packs")
struct TurnStarvationTests: StoreSuite {
    static let book = "com.kiosk.books.small-engines"

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    @Test("a book bought while 12 buyers keep buying credit packs on the same account, with no rate limit between: the book is bought, and the packs all charge", arguments: TestEngine.all)
    func bookAmidPacks(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, _, account in
            let payments = server.store.payments
            let stop = Flag()
            let bought = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        var count = 0
                        while !stop.value.load(ordering: .relaxed) {
                            _ = try await payments.pay(PaymentRequest(productId: Self.pack5, quantity: 1, paymentMethod: .approve, idempotencyKey: UUID().uuidString), accountId: account.accountId)
                            count += 1
                        }
                        return count
                    }
                }
                try await Task.sleep(for: .milliseconds(300))
                defer { stop.value.store(true, ordering: .relaxed) }
                for _ in 0..<3 {
                    let book = try await payments.pay(PaymentRequest(productId: Self.book, quantity: 1, paymentMethod: .approve, idempotencyKey: UUID().uuidString), accountId: account.accountId)
                    #expect(book.transaction.status == .purchased)
                }
                stop.value.store(true, ordering: .relaxed)
                return try await group.reduce(0, +)
            }
            #expect(bought > 0)
            let credits = try await server.store.accounts.summary(of: account.accountId).credits
            #expect(credits == 5 * bought)
        }
    }
}
