import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// A purchase's idempotency key: the same key is the same transaction, however often and however
/// raced.
@Suite("Idempotency keys: one transaction and one charge per key")
struct IdempotencyTests: StoreSuite {
    @Test("the same idempotency key gives the same transaction and one charge, even when racing", arguments: TestEngine.all)
    func idempotency(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let key = UUID().uuidString
            let replies = try await withThrowingTaskGroup(of: PaymentResponse.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await http.pay(Self.pack5, token: account.token, quantity: 2, key: key).decode(PaymentResponse.self) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(replies.map(\.transaction.transactionId)).count == 1)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [998])
            let summary = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self)
            #expect(summary.credits == 10)

            // The same key for another product is another request: refused, naming what differs.
            let reused = try await http.pay(Self.book, token: account.token, key: key)
            #expect(reused.status == 422)
        }
    }

    @Test("a replayed idempotency key with another quantity, payment method or product is refused with 422 naming what differs", arguments: TestEngine.all)
    func keyReplayDiffers(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let key = "order-7"
            let first = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, quantity: 2, key: key))
            #expect(first.status == 200)
            let same = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, quantity: 2, key: key))
            #expect(same.status == 200)
            #expect(try same.decode(PaymentResponse.self).transaction == first.decode(PaymentResponse.self).transaction)
            for (body, field) in [
                (Self.payment(Self.pack5, quantity: 3, key: key), "quantity"),
                (Self.payment(Self.pack5, quantity: 2, method: "defer", key: key), "payment method"),
                (Self.payment(Self.pack10, quantity: 2, key: key), "product"),
                (#"{"productId": "\#(Self.issue)", "idempotencyKey": "\#(key)"}"#, "product"),
            ] {
                let path = body.contains("quantity") ? "/v1/payments" : "/v1/redemptions"
                let reply = try await http.send("POST", path, token: account.token, json: body)
                #expect(reply.status == 422, "\(body): \(reply.status) \(Self.message(reply))")
                let refusal = try? reply.decode(APIError.self)
                #expect(refusal?.code == "idempotency_key_reused")
                #expect(refusal?.message.contains(field) == true, "\(Self.message(reply))")
                #expect(refusal?.message.contains("\n") == false)
            }
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken) == [998])
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 10)
        }
    }
}
