import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import Testing

/// The person's rights (export, deletion) and the operator's help (search by email, disable,
/// enable, reset codes), each in the account's audit list (issue 46).
@Suite("Account export, deletion and the operator's help")
struct AccountCareTests: StoreSuite {
    static let password = SignInTests.password

    static func view(_ http: StoreHTTP, _ server: KioskServer, _ id: String) async throws -> AdminAccountView {
        try await http.send("GET", "/v1/admin/accounts/\(id)", token: server.adminToken).decode(AdminAccountView.self)
    }

    @Test("export gives the account, sign-in, devices, transactions, ledger and audit, and no secret", arguments: TestEngine.all)
    func export(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            #expect(try await http.pay(Self.book, token: ann.token).status == 200)
            let reply = try await http.send("GET", "/v1/account/export", token: ann.token)
            #expect(reply.status == 200)
            let export = try reply.decode(AccountExport.self)
            #expect(export.account.id == ann.accountId)
            #expect(export.signIn?.email == "ann@example.com")
            #expect(export.devices.map(\.name) == ["laptop"] && export.devices.map(\.current) == [true])
            #expect(export.transactions.map(\.productId) == [Self.book])
            #expect(export.ledger.count == 1)
            let text = String(decoding: reply.body, as: UTF8.self)
            #expect(!text.contains(ann.token) && !text.contains("$2b$"), "the export holds a secret")
            #expect(try await http.send("GET", "/v1/account/export").status == 401)
        }
    }

    @Test("deletion asks for the password, erases the sign-in and devices, stops renewals and keeps the ledger", arguments: TestEngine.all)
    func delete(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let phone = try await SignInTests.signIn(http, "ann@example.com").decode(DeviceSignIn.self)
            #expect(try await http.pay(Self.book, token: ann.token).status == 200)
            #expect(try await http.pay(Self.subscription, token: ann.token).status == 200)

            let noPassword = try await http.send("DELETE", "/v1/account", token: ann.token)
            #expect(noPassword.status == 403)
            #expect(try noPassword.decode(APIError.self).code == "password_needed")
            let wrong = try await http.send("DELETE", "/v1/account", token: ann.token, json: SignInTests.json(["password": "not it at all"]))
            #expect(wrong.status == 403)
            #expect(try wrong.decode(APIError.self).code == "wrong_password")
            // A code approved before the deletion and not yet taken signs nothing in after it.
            let grant = try await http.send("POST", "/v1/device-codes", json: "{}").decode(DeviceCodeGrant.self)
            #expect(try await http.send("POST", "/v1/device-codes/approve", token: phone.token, json: SignInTests.json(["userCode": grant.userCode])).status == 200)
            let deleted = try await http.send("DELETE", "/v1/account", token: ann.token, json: SignInTests.json(["password": Self.password]))
            #expect(deleted.status == 200, "\(Self.message(deleted))")
            #expect(try deleted.decode(AccountDeleted.self).kept.contains { $0.contains("ledger") })

            #expect(try await http.send("GET", "/v1/account", token: ann.token).status == 401)
            #expect(try await http.send("GET", "/v1/account", token: phone.token).status == 401)
            #expect(try await SignInTests.signIn(http, "ann@example.com").status == 401)
            #expect(try await http.send("POST", "/v1/device-codes/token", json: SignInTests.json(["deviceCode": grant.deviceCode])).status == 400)
            let view = try await Self.view(http, server, ann.accountId)
            #expect(view.email == nil && view.deleted == true && view.devices == [])
            let enable = try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/enable", token: server.adminToken)
            #expect(enable.status == 403)
            #expect(try enable.decode(APIError.self).code == "account_deleted")
            #expect(view.charges.count == 2, "the ledger is kept")
            #expect(view.audit?.map(\.action) == ["deleted"])
            let subscriptions = try await server.store.subscriptions.list(accountId: ann.accountId).subscriptions
            #expect(!subscriptions.isEmpty && subscriptions.allSatisfy { !$0.autoRenew })
            // The email is free again: a new person may use it.
            #expect(try await SignInTests.signUp(http, "ann@example.com").status == 201)
        }
    }

    @Test("the operator finds an account by email, disables it (every device out, no sign-in) and enables it again, each audited", arguments: TestEngine.all)
    func disableAndEnable(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let found = try await http.send("GET", "/v1/admin/accounts?email=ANN%40example.com", token: server.adminToken).decode([AdminAccountRow].self)
            #expect(found.map(\.accountId) == [ann.accountId])
            #expect(try await http.send("GET", "/v1/admin/accounts?email=nobody%40example.com", token: server.adminToken).decode([AdminAccountRow].self).isEmpty)
            #expect(try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/disable", token: ann.token).status == 401, "a customer is no operator")

            // A code approved before the disabling would sign a device in all the same: it is cleared.
            let grant = try await http.send("POST", "/v1/device-codes", json: "{}").decode(DeviceCodeGrant.self)
            #expect(try await http.send("POST", "/v1/device-codes/approve", token: ann.token, json: SignInTests.json(["userCode": grant.userCode])).status == 200)
            let disabled = try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/disable", token: server.adminToken, json: #"{"reason": "chargeback"}"#)
            #expect(disabled.status == 200, "\(Self.message(disabled))")
            #expect(try await http.send("GET", "/v1/account", token: ann.token).status == 401)
            let refused = try await SignInTests.signIn(http, "ann@example.com")
            #expect(refused.status == 403)
            #expect(try refused.decode(APIError.self).code == "account_disabled")
            #expect(try await SignInTests.signIn(http, "ann@example.com", password: "not the password").status == 401, "a wrong password says nothing of the state")
            let taken = try await http.send("POST", "/v1/device-codes/token", json: SignInTests.json(["deviceCode": grant.deviceCode]))
            #expect(taken.status == 400, "a code approved before the disabling signed a device in: \(Self.message(taken))")

            #expect(try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/enable", token: server.adminToken).status == 200)
            #expect(try await SignInTests.signIn(http, "ann@example.com").status == 201)
            let audit = try await Self.view(http, server, ann.accountId).audit ?? []
            #expect(audit.map(\.action) == ["disabled", "enabled"])
            #expect(audit.first?.detail == "chargeback" && audit.allSatisfy { $0.actor == "operator" })
        }
    }

    @Test("an anonymous account disabled and enabled again is not lost: its devices are refused while it is disabled, and sign in again after", arguments: TestEngine.all)
    func anonymousDisableAndEnable(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, anonymous in
            #expect(try await http.pay(Self.book, token: anonymous.token).status == 200)
            let disabled = try await http.send("POST", "/v1/admin/accounts/\(anonymous.accountId)/disable", token: server.adminToken)
            #expect(disabled.status == 200, "\(Self.message(disabled))")
            #expect(try await http.send("GET", "/v1/account", token: anonymous.token).status == 401)
            #expect(try await http.pay(Self.book, token: anonymous.token).status == 401)

            #expect(try await http.send("POST", "/v1/admin/accounts/\(anonymous.accountId)/enable", token: server.adminToken).status == 200)
            let summary = try await http.send("GET", "/v1/account", token: anonymous.token)
            #expect(summary.status == 200, "the account's only token works again: \(Self.message(summary))")
            #expect(try summary.decode(AccountSummary.self).owned == [Self.book])
            let audit = try await Self.view(http, server, anonymous.accountId).audit ?? []
            #expect(audit.map(\.action) == ["disabled", "enabled"])
            #expect(audit.first?.detail == "its devices refused until enabled")
        }
    }

    @Test("the last device of an account without a sign-in that bought something is not removed (the account would be lost for good) unless forced; one with a sign-in, or holding nothing, is", arguments: TestEngine.all)
    func lastAnonymousDevice(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, anonymous in
            #expect(try await http.pay(Self.book, token: anonymous.token).status == 200)
            let device = try #require(anonymous.deviceId)
            let refused = try await http.send("DELETE", "/v1/devices/\(device)", token: anonymous.token)
            #expect(refused.status == 409, "\(Self.message(refused))")
            #expect(try refused.decode(APIError.self).code == "last_device")
            #expect(try await http.send("GET", "/v1/account", token: anonymous.token).status == 200, "still signed in")
            #expect(try await http.send("DELETE", "/v1/devices/\(device)?force=true", token: anonymous.token).status == 200)
            #expect(try await http.send("GET", "/v1/account", token: anonymous.token).status == 401)

            let empty = try await http.createAccount()
            let emptyDevice = try #require(empty.deviceId)
            #expect(try await http.send("DELETE", "/v1/devices/\(emptyDevice)", token: empty.token).status == 200, "holding nothing, nothing is lost")
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            #expect(try await http.pay(Self.book, token: ann.token).status == 200)
            let annDevice = try #require(ann.deviceId)
            #expect(try await http.send("DELETE", "/v1/devices/\(annDevice)", token: ann.token).status == 200, "a sign-in is a way back in")
        }
    }

    @Test("the operator grants a product by hand: nothing charged, audited with the reason, delivered like any purchase, once per key; even off sale; refused without a reason", arguments: TestEngine.all)
    func operatorGrant(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, reader in
            func grant(_ body: AdminGrantRequest, token: String? = nil) async throws -> StoreHTTP.Reply {
                let json = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
                return try await http.send("POST", "/v1/admin/accounts/\(reader.accountId)/grant", token: token ?? server.adminToken, json: json)
            }
            let request = AdminGrantRequest(productId: Self.book, reason: "Stripe pi_123 was unmatched", idempotencyKey: "grant-1")
            #expect(try await grant(request, token: reader.token).status == 401, "a customer is no operator")
            let first = try await grant(request)
            #expect(first.status == 200, "\(Self.message(first))")
            let granted = try first.decode(StoreTransaction.self)
            #expect(granted.status == .purchased && granted.signedTransaction != nil)
            #expect(try await grant(request).decode(StoreTransaction.self).transactionId == granted.transactionId, "one grant per key")
            // The same key for another grant is refused, naming what differs, as a payment's is.
            let reused = try await grant(AdminGrantRequest(productId: Self.book, reason: "another reason", idempotencyKey: "grant-1"))
            #expect(reused.status == 422 && String(decoding: reused.body, as: UTF8.self).contains("idempotency_key_reused") && String(decoding: reused.body, as: UTF8.self).contains("reason"), "\(String(decoding: reused.body, as: UTF8.self))")
            let otherProduct = try await grant(AdminGrantRequest(productId: Self.pack5, reason: "Stripe pi_123 was unmatched", idempotencyKey: "grant-1"))
            #expect(otherProduct.status == 422 && String(decoding: otherProduct.body, as: UTF8.self).contains("idempotency_key_reused"), "\(String(decoding: otherProduct.body, as: UTF8.self))")
            // Named as the operator gave it, not as the store keeps it.
            #expect(try otherProduct.decode(APIError.self).message.hasPrefix("idempotency key grant-1 was first sent"), "\(String(decoding: otherProduct.body, as: UTF8.self))")
            #expect(try await http.send("GET", "/v1/account", token: reader.token).decode(AccountSummary.self).owned == [Self.book])
            #expect(try await http.charges(accountId: reader.accountId, adminToken: server.adminToken).isEmpty, "nothing charged")
            let page = try await http.send("GET", "/v1/transactions", token: reader.token).decode(TransactionPage.self)
            #expect(page.transactions.map(\.transactionId) == [granted.transactionId], "in the account's feed, for its devices")
            let audit = try await Self.view(http, server, reader.accountId).audit ?? []
            #expect(audit.map(\.action) == ["granted"])
            #expect(audit.first?.detail.contains("Stripe pi_123 was unmatched") == true && audit.first?.actor == "operator")

            let credits = try await grant(AdminGrantRequest(productId: Self.pack5, quantity: 2, reason: "goodwill", idempotencyKey: "grant-2"))
            #expect(credits.status == 200, "\(Self.message(credits))")
            #expect(try await http.send("GET", "/v1/account", token: reader.token).decode(AccountSummary.self).credits == 10)
            #expect(try await grant(AdminGrantRequest(productId: Self.book, reason: "", idempotencyKey: "grant-3")).status == 400)
            #expect(try await grant(AdminGrantRequest(productId: Self.book, reason: "   ", idempotencyKey: "grant-3b")).status == 400, "a blank reason says nothing")
            #expect(try await grant(AdminGrantRequest(productId: "com.kiosk.nothing", reason: "typo", idempotencyKey: "grant-4")).status == 404)
            let elsewhere = try await http.send("POST", "/v1/admin/accounts/acct_nobody/grant", token: server.adminToken,
                                                json: String(decoding: try JSONEncoder().encode(AdminGrantRequest(productId: Self.book, reason: "x", idempotencyKey: "grant-5")), as: UTF8.self))
            #expect(elsewhere.status == 404, "\(Self.message(elsewhere))")
        }
    }

    @Test("a deleted account is charged and granted nothing more: its waiting Ask to Buy cannot be approved (declined, it still can) and the operator's grant is refused", arguments: TestEngine.all)
    func deletedAccountIsNotCharged(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let book = try await http.pay(Self.book, token: ann.token, method: .defer).decode(PaymentResponse.self).transaction.transactionId
            let pack = try await http.pay(Self.pack5, token: ann.token, method: .defer).decode(PaymentResponse.self).transaction.transactionId
            let deleted = try await http.send("DELETE", "/v1/account", token: ann.token, json: SignInTests.json(["password": Self.password]))
            #expect(deleted.status == 200, "\(Self.message(deleted))")

            for id in [book, pack] {
                let approved = try await http.send("POST", "/v1/admin/transactions/\(id)/approve", token: server.adminToken)
                #expect(approved.status == 403 && (try? approved.decode(APIError.self).code) == "account_deleted", "\(Self.message(approved))")
            }
            let json = String(decoding: try JSONEncoder().encode(AdminGrantRequest(productId: Self.book, reason: "goodwill", idempotencyKey: "grant-d")), as: UTF8.self)
            let granted = try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/grant", token: server.adminToken, json: json)
            #expect(granted.status == 403 && (try? granted.decode(APIError.self).code) == "account_deleted", "\(Self.message(granted))")
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken).isEmpty, "nothing charged")
            let declined = try await http.send("POST", "/v1/admin/transactions/\(book)/decline", token: server.adminToken)
            #expect(declined.status == 200, "\(Self.message(declined))")
            let view = try await Self.view(http, server, ann.accountId)
            #expect(view.summary.credits == 0 && view.audit?.map(\.action) == ["deleted"], "\(view)")
        }
    }

    @Test("a reset code sets a new password once, signs every device out, and a wrong or reused code is refused", arguments: TestEngine.all)
    func resetCode(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, anonymous in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let issued = try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/reset-code", token: server.adminToken).decode(ResetCodeIssued.self)
            #expect(issued.email == "ann@example.com")
            #expect(try await http.send("POST", "/v1/admin/accounts/\(anonymous.accountId)/reset-code", token: server.adminToken).status == 409)

            func reset(_ code: String, email: String = "ann@example.com") async throws -> StoreHTTP.Reply {
                try await http.send("POST", "/v1/account/password-reset", json: SignInTests.json(["email": email, "code": code, "password": "a brand new password", "deviceName": "desk"]))
            }
            let forged = try await reset("BCDF-GHJK-LMNP-QRST")
            #expect(forged.status == 401)
            #expect(try forged.decode(APIError.self).code == "invalid_reset_code")
            #expect(try await reset(issued.code, email: "other@example.com").status == 401)
            let done = try await reset(issued.code.lowercased())
            #expect(done.status == 201, "\(Self.message(done))")
            let desk = try done.decode(DeviceSignIn.self)
            #expect(try await http.send("GET", "/v1/account", token: ann.token).status == 401)
            #expect(try await Self.view(http, server, ann.accountId).devices?.map(\.name) == ["desk"])
            #expect(try await http.send("GET", "/v1/account", token: desk.token).status == 200)
            #expect(try await reset(issued.code).status == 401, "a code works once")
            #expect(try await SignInTests.signIn(http, "ann@example.com").status == 401)
            #expect(try await SignInTests.signIn(http, "ann@example.com", password: "a brand new password").status == 201)
            #expect(try await Self.view(http, server, ann.accountId).audit?.map(\.action) == ["reset_code_issued", "password_reset"])
        }
    }

    @Test("signing out everywhere and a reset clear the codes the account approved and no device took yet", arguments: TestEngine.all)
    func cleanUpClearsApprovedCodes(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            func approvedCode(_ token: String) async throws -> DeviceCodeGrant {
                let grant = try await http.send("POST", "/v1/device-codes", json: "{}").decode(DeviceCodeGrant.self)
                #expect(try await http.send("POST", "/v1/device-codes/approve", token: token, json: SignInTests.json(["userCode": grant.userCode])).status == 200)
                return grant
            }
            let first = try await approvedCode(ann.token)
            try await server.store.accounts.signOutEverywhere(ann.accountId)
            #expect(try await http.send("GET", "/v1/account", token: ann.token).status == 401)
            #expect(try await http.send("POST", "/v1/device-codes/token", json: SignInTests.json(["deviceCode": first.deviceCode])).status == 400)

            let back = try await SignInTests.signIn(http, "ann@example.com").decode(DeviceSignIn.self)
            let second = try await approvedCode(back.token)
            let issued = try await http.send("POST", "/v1/admin/accounts/\(ann.accountId)/reset-code", token: server.adminToken).decode(ResetCodeIssued.self)
            #expect(try await http.send("POST", "/v1/account/password-reset", json: SignInTests.json(["email": "ann@example.com", "code": issued.code, "password": "another good password"])).status == 201)
            #expect(try await http.send("POST", "/v1/device-codes/token", json: SignInTests.json(["deviceCode": second.deviceCode])).status == 400)
        }
    }

    @Test("guessing sign-ins with an account ID as the email does not stop its holder deleting it")
    func deletionHasItsOwnLimit() async throws {
        try await Self.withStore { _, http, _ in
            let ann = try await SignInTests.signUp(http, "ann@example.com").decode(AccountCreated.self)
            for _ in 0..<12 { _ = try await SignInTests.signIn(http, ann.accountId, password: "whatever guess") }
            let deleted = try await http.send("DELETE", "/v1/account", token: ann.token, json: SignInTests.json(["password": Self.password]))
            #expect(deleted.status == 200, "\(Self.message(deleted))")
        }
    }
}
