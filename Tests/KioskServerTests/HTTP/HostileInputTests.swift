import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// Inputs the store must refuse: over-long, control-character and ill-typed fields and path IDs are
/// a 400 naming the field, never a 500.
@Suite("Hostile inputs: keys, product IDs, reasons and IDs in paths")
struct HostileInputTests: StoreSuite {
    @Test("keys are limited by UTF-8 bytes and printable; NULs, control characters and long texts are a 400 naming the field, never a 500", arguments: TestEngine.all)
    func hostileTexts(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let combining = "e" + String(repeating: "\u{0301}", count: 3_000)
            #expect(combining.count == 1)
            for (key, accepted) in [
                (String(repeating: "k", count: 255), true), (String(repeating: "é", count: 127), true), ("ключ-заказа-1", true),
                (String(repeating: "k", count: 256), false), (combining, false), (String(repeating: "k", count: 3_000), false),
                ("nul\u{0}key", false), ("line\nbreak", false), ("tab\tkey", false), ("del\u{7F}", false), ("", false),
            ] {
                let reply = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(Self.pack5, key: key))
                if accepted {
                    #expect(reply.status == 200, "a key of \(key.utf8.count) bytes: \(reply.status) \(Self.message(reply))")
                } else {
                    #expect(reply.status == 400, "a key of \(key.utf8.count) bytes: \(reply.status) \(Self.message(reply))")
                    #expect(Self.message(reply).contains("idempotencyKey"), "\(Self.message(reply))")
                }
            }
            let redemption = try await http.send("POST", "/v1/redemptions", token: account.token, json: #"{"productId": "\#(Self.issue)", "idempotencyKey": "a\u0000b"}"#)
            #expect(redemption.status == 400 && Self.message(redemption).contains("idempotencyKey"), "\(redemption.status) \(Self.message(redemption))")

            for product in ["com.kiosk\u{0}.x", String(repeating: "p", count: 3_000)] {
                let reply = try await http.send("POST", "/v1/payments", token: account.token, json: Self.payment(product, key: UUID().uuidString))
                #expect(reply.status == 400 && Self.message(reply).contains("productId"), "\(reply.status) \(Self.message(reply))")
            }

            let book = try await http.pay(Self.book, token: account.token).decode(PaymentResponse.self).transaction.transactionId
            for action in ["revoke", "refund"] {
                for reason in ["nul \u{0} reason", String(repeating: "r", count: 3_000), "two\nlines"] {
                    let body = String(decoding: try JSONSerialization.data(withJSONObject: ["reason": reason]), as: UTF8.self)
                    let reply = try await http.send("POST", "/v1/admin/transactions/\(book)/\(action)", token: server.adminToken, json: body)
                    #expect(reply.status == 400 && Self.message(reply).contains("reason"), "\(action): \(reply.status) \(Self.message(reply))")
                }
                let wrongType = try await http.send("POST", "/v1/admin/transactions/\(book)/\(action)", token: server.adminToken, json: #"{"reason": 7}"#)
                #expect(wrongType.status == 400 && Self.message(wrongType).contains("reason"), "\(action): \(wrongType.status) \(Self.message(wrongType))")
            }
            let standing = try await Self.outcome(of: book, account: account, http: http, adminToken: server.adminToken)
            #expect(standing.transaction.status == .purchased, "a refused revocation changed the transaction")

            // IDs in paths: a long ID is refused before the database sees it; the router does not
            // decode percent escapes, so "%00" is three printable characters and names nothing.
            let longID = String(repeating: "t", count: 3_000)
            for action in ["transactions/\(longID)/finish", "admin/transactions/\(longID)/approve", "admin/transactions/\(longID)/decline",
                           "admin/transactions/\(longID)/revoke", "admin/transactions/\(longID)/refund"] {
                let reply = try await http.send("POST", "/v1/" + action, token: action.hasPrefix("admin") ? server.adminToken : account.token)
                #expect(reply.status == 400 && Self.message(reply).contains("transaction ID"), "\(action.suffix(9)): \(reply.status) \(Self.message(reply))")
            }
            let longAccount = try await http.send("GET", "/v1/admin/accounts/\(longID)", token: server.adminToken)
            #expect(longAccount.status == 400 && Self.message(longAccount).contains("account ID"), "\(longAccount.status) \(Self.message(longAccount))")
            for (method, path, token) in [("POST", "/v1/transactions/txn%00x/finish", account.token), ("POST", "/v1/admin/transactions/txn%00x/refund", server.adminToken),
                                          ("GET", "/v1/admin/accounts/acct%00x", server.adminToken)] {
                let reply = try await http.send(method, path, token: token)
                #expect(reply.status == 404, "\(path): \(reply.status) \(Self.message(reply))")
            }
        }
    }
}
