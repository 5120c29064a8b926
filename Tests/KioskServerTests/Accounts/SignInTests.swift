import Foundation
import KioskCore
import KioskServer
@testable import KioskStore
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// Accounts people sign in to (issue 46): sign-ups, sign-ins with a token per device, the
/// device list and its limit, removal at once, device codes, and the refusals' sameness.
@Suite("Sign-ins and devices")
struct SignInTests: StoreSuite {
    static let password = "correct horse battery"

    static func signUp(_ http: StoreHTTP, _ email: String, password: String = password, device: String = "laptop") async throws -> StoreHTTP.Reply {
        try await http.send("POST", "/v1/accounts", json: json(["email": email, "password": password, "deviceName": device]))
    }

    static func signIn(_ http: StoreHTTP, _ email: String, password: String = password, device: String = "phone", replacing: String? = nil) async throws -> StoreHTTP.Reply {
        var body = ["email": email, "password": password, "deviceName": device]
        if let replacing { body["replacing"] = replacing }
        return try await http.send("POST", "/v1/sessions", json: json(body))
    }

    static func json(_ object: [String: String]) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: object)) ?? Data(), as: UTF8.self)
    }

    static func devices(_ http: StoreHTTP, _ token: String) async throws -> DeviceList {
        try await http.send("GET", "/v1/devices", token: token).decode(DeviceList.self)
    }

    @Test("sign-up, then a second device signs in with its own token and sees the first device's purchase", arguments: TestEngine.all)
    func signInOnSecondDevice(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let created = try await Self.signUp(http, " Ann@Example.COM ")
            #expect(created.status == 201, "\(Self.message(created))")
            let first = try created.decode(AccountCreated.self)
            #expect(first.email == "ann@example.com")
            #expect(try await http.pay(Self.book, token: first.token).status == 200)

            let reply = try await Self.signIn(http, "ANN@example.com")
            #expect(reply.status == 201, "\(Self.message(reply))")
            let second = try reply.decode(DeviceSignIn.self)
            #expect(second.accountId == first.accountId)
            #expect(second.token != first.token)
            #expect(second.deviceId != first.deviceId)
            let restored = try await http.send("GET", "/v1/transactions", token: second.token).decode(TransactionPage.self)
            #expect(restored.transactions.map(\.productId) == [Self.book])

            let list = try await Self.devices(http, second.token)
            #expect(list.devices.map(\.name) == ["laptop", "phone"])
            #expect(list.devices.map(\.current) == [false, true])
            #expect(list.email == "ann@example.com")
            #expect(list.limit == 10)
        }
    }

    @Test("an anonymous account gains a sign-in and keeps its purchases; a second sign-in or a taken email is refused", arguments: TestEngine.all)
    func anonymousGainsSignIn(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, anonymous in
            #expect(try await http.pay(Self.book, token: anonymous.token).status == 200)
            let added = try await http.send("PUT", "/v1/account/sign-in", token: anonymous.token, json: Self.json(["email": "bo@example.com", "password": Self.password]))
            #expect(added.status == 200, "\(Self.message(added))")
            let other = try await Self.signIn(http, "bo@example.com").decode(DeviceSignIn.self)
            #expect(other.accountId == anonymous.accountId)
            let owned = try await http.send("GET", "/v1/account", token: other.token).decode(AccountSummary.self).owned
            #expect(owned == [Self.book])

            let again = try await http.send("PUT", "/v1/account/sign-in", token: anonymous.token, json: Self.json(["email": "b2@example.com", "password": Self.password]))
            #expect(again.status == 409)
            #expect(try again.decode(APIError.self).code == "has_sign_in")
            let taken = try await Self.signUp(http, "BO@example.com")
            #expect(taken.status == 409)
            #expect(try taken.decode(APIError.self).code == "email_taken")
            // `{}`, as clients from before sign-ins send, still makes an anonymous account.
            #expect(try await http.send("POST", "/v1/accounts", json: "{}").status == 201)
            let half = try await http.send("POST", "/v1/accounts", json: Self.json(["email": "half@example.com"]))
            #expect(half.status == 400)
        }
    }

    @Test("passwords: at least 8 characters, up to 1024; every character counts past bcrypt's 72 bytes; Unicode forms are one password")
    func passwordRules() async throws {
        try await Self.withStore { _, http, _ in
            let short = try await Self.signUp(http, "s@example.com", password: "1234567")
            #expect(short.status == 400)
            #expect(try short.decode(APIError.self).message.contains("at least 8"))
            #expect(try await Self.signUp(http, "l@example.com", password: String(repeating: "x", count: 1025)).status == 400)
            #expect(try await Self.signUp(http, "e@example.com", password: "12345678").status == 201)

            let long = String(repeating: "a", count: 100)
            #expect(try await Self.signUp(http, "long@example.com", password: long + "1").status == 201)
            #expect(try await Self.signIn(http, "long@example.com", password: long + "2").status == 401)
            #expect(try await Self.signIn(http, "long@example.com", password: long + "1").status == 201)

            // "ﬁ" (one ligature) and "fi", "é" composed and decomposed: NFKC makes them one.
            #expect(try await Self.signUp(http, "u@example.com", password: "caf\u{E9} \u{FB01}rst").status == 201)
            #expect(try await Self.signIn(http, "u@example.com", password: "cafe\u{301} first").status == 201)
            #expect(try await Self.signUp(http, "not-an-email", password: Self.password).status == 400)
        }
    }

    @Test("a wrong email and a wrong password get the same answer", arguments: TestEngine.all)
    func noEnumeration(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            _ = try await Self.signUp(http, "real@example.com")
            let wrongPassword = try await Self.signIn(http, "real@example.com", password: "not the password")
            let wrongEmail = try await Self.signIn(http, "nobody@example.com", password: "not the password")
            #expect(wrongPassword.status == 401)
            #expect(wrongEmail.status == wrongPassword.status)
            #expect(wrongEmail.body == wrongPassword.body)
            #expect(try wrongEmail.decode(APIError.self).code == "invalid_credentials")
        }
    }

    @Test("a wrong email and a wrong password take the same time: the unknown email checks a decoy hash of the same cost")
    func sameTime() async throws {
        try await Self.withStore(configure: {
            $0.accounts.passwordCost = 9
            $0.rateLimits = .off
        }) { _, http, _ in
            _ = try await Self.signUp(http, "real@example.com")
            _ = try await Self.signIn(http, "nobody@example.com", password: "warm up the decoy")
            // Interleaved, so a busy moment of the machine falls on both alike.
            var times: [String: [Double]] = [:]
            for round in 0..<9 {
                for email in round.isMultiple(of: 2) ? ["real@example.com", "nobody@example.com"] : ["nobody@example.com", "real@example.com"] {
                    let start = ContinuousClock.now
                    #expect(try await Self.signIn(http, email, password: "not the password").status == 401)
                    let elapsed = ContinuousClock.now - start
                    times[email, default: []].append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                }
            }
            let known = (times["real@example.com"] ?? []).sorted()[4]
            let unknown = (times["nobody@example.com"] ?? []).sorted()[4]
            #expect(unknown > known * 0.5 && unknown < known * 2, "wrong password \(known) s, unknown email \(unknown) s")
        }
    }

    @Test("guessing is throttled per email, known or not, whatever the password, and per address", arguments: TestEngine.all)
    func throttled(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.rateLimits.signInsPerEmail = RateLimit(burst: 3, perSecond: 0.01)
            $0.rateLimits.signInsPerAddress = RateLimit(burst: 10, perSecond: 0.01)
        }) { _, http, _ in
            // The sign-up is the email's first attempt (it says whether the email is taken).
            _ = try await Self.signUp(http, "ann@example.com")
            for _ in 0..<2 { #expect(try await Self.signIn(http, "ann@example.com", password: "guess guess").status == 401) }
            let limited = try await Self.signIn(http, "ANN@example.com")
            #expect(limited.status == 429)
            #expect(try limited.decode(APIError.self).code == "rate_limited")
            for _ in 0..<3 { #expect(try await Self.signIn(http, "nobody@example.com", password: "guess guess").status == 401) }
            #expect(try await Self.signIn(http, "nobody@example.com").status == 429)
            // Two more emails pass the per-email limit; the address's tenth attempt was the last.
            #expect(try await Self.signIn(http, "c@example.com").status == 401)
            #expect(try await Self.signIn(http, "d@example.com").status == 401)
            #expect(try await Self.signIn(http, "e@example.com").status == 429)
        }
    }

    @Test("the backoff's second step: attempts spaced under the short limit still stop at the day's ceiling", arguments: TestEngine.all)
    func dailyCeiling(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            // The short step refills at once here; the day's ceiling is 4.
            $0.rateLimits.signInsPerEmail = RateLimit(burst: 100, perSecond: 100)
            $0.rateLimits.signInsPerEmailPerDay = RateLimit(burst: 4, perSecond: 4.0 / 86_400)
            $0.rateLimits.signInsPerAddress = nil
            $0.rateLimits.accountsPerAddress = nil
        }) { _, http, _ in
            _ = try await Self.signUp(http, "ann@example.com")
            for _ in 0..<3 { #expect(try await Self.signIn(http, "ann@example.com", password: "guess guess").status == 401) }
            let stopped = try await Self.signIn(http, "ann@example.com")
            #expect(stopped.status == 429)
            #expect(try stopped.decode(APIError.self).message.contains("today"), "\(Self.message(stopped))")
        }
    }

    @Test("every spelling the store takes for one email is one bucket of attempts; taken-email answers are limited too", arguments: TestEngine.all)
    func oneBucketPerEmail(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.rateLimits.signInsPerEmail = RateLimit(burst: 3, perSecond: 0.01)
            $0.rateLimits.signInsPerAddress = nil
            $0.rateLimits.accountsPerAddress = nil
        }) { _, http, anonymous in
            #expect(try await Self.signUp(http, "ren\u{E9}e@example.com").status == 201)
            // The sign-up took one attempt; two wrong guesses, composed é, then the decomposed
            // spelling of the same address is already at its limit.
            for _ in 0..<2 { #expect(try await Self.signIn(http, "ren\u{E9}e@example.com", password: "guess guess").status == 401) }
            #expect(try await Self.signIn(http, "rene\u{301}e@Example.com").status == 429)
            // Asking whether an email is taken counts as an attempt at it.
            for _ in 0..<3 {
                let probe = try await http.send("PUT", "/v1/account/sign-in", token: anonymous.token, json: Self.json(["email": "victim@example.com", "password": Self.password]))
                #expect(probe.status != 429)
            }
            let limited = try await http.send("PUT", "/v1/account/sign-in", token: anonymous.token, json: Self.json(["email": "victim@example.com", "password": Self.password]))
            #expect(limited.status == 429)
        }
    }

    @Test("a device's name loses controls and bidi overrides; an email with them is refused")
    func hiddenCharacters() async throws {
        try await Self.withStore { _, http, _ in
            let created = try await Self.signUp(http, "ann@example.com", device: "evil\u{202E}txt.exe\u{9B}\u{7}")
            let list = try await Self.devices(http, try created.decode(AccountCreated.self).token)
            #expect(list.devices.map(\.name) == ["eviltxt.exe"])
            #expect(try await Self.signUp(http, "bo\u{202E}b@example.com").status == 400)
        }
    }

    @Test("removing a device refuses its next request and ends its waiting long poll within 2 s; logout revokes the device's own token", arguments: TestEngine.all)
    func removeDevice(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let laptop = try await Self.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let phone = try await Self.signIn(http, "ann@example.com").decode(DeviceSignIn.self)
            let cursor = try await http.send("GET", "/v1/transactions", token: phone.token).decode(TransactionPage.self).cursor ?? ""
            let poll = Task {
                let start = ContinuousClock.now
                let reply = try await http.send("GET", "/v1/transactions?wait=30&after=\(cursor)", token: phone.token)
                return (reply, ContinuousClock.now - start)
            }
            try await Task.sleep(for: .milliseconds(500))
            let removed = try await http.send("DELETE", "/v1/devices/phone", token: laptop.token)
            #expect(removed.status == 200, "\(Self.message(removed))")
            let (answer, waited) = try await poll.value
            #expect(answer.status == 401)
            #expect(try answer.decode(APIError.self).code == "signed_out")
            #expect(waited < .seconds(2.5), "the poll waited \(waited)")
            #expect(try await http.send("GET", "/v1/account", token: phone.token).status == 401)
            #expect(try await http.send("GET", "/v1/account", token: laptop.token).status == 200)

            // Logout: the laptop's token alone goes.
            let tablet = try await Self.signIn(http, "ann@example.com", device: "tablet").decode(DeviceSignIn.self)
            #expect(try await http.send("DELETE", "/v1/sessions/current", token: laptop.token).status == 204)
            #expect(try await http.send("GET", "/v1/account", token: laptop.token).status == 401)
            #expect(try await Self.devices(http, tablet.token).devices.map(\.name) == ["tablet"])
            // Another account's device is not this account's to remove.
            let other = try await http.createAccount()
            let refused = try await http.send("DELETE", "/v1/devices/\(tablet.deviceId)", token: other.token)
            #expect(refused.status == 404)
            #expect(try await http.send("GET", "/v1/account", token: tablet.token).status == 200)
        }
    }

    @Test("the device limit: the one over it is told which to remove; --replace swaps one; sign-ins at once cannot pass it", arguments: TestEngine.all)
    func deviceLimit(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.accounts.maxDevices = 3
            $0.rateLimits = .off
        }) { _, http, _ in
            _ = try await Self.signUp(http, "ann@example.com", device: "one")
            let two = try await Self.signIn(http, "ann@example.com", device: "two").decode(DeviceSignIn.self)
            #expect(try await Self.signIn(http, "ann@example.com", device: "three").status == 201)
            let over = try await Self.signIn(http, "ann@example.com", device: "four")
            #expect(over.status == 409)
            let refusal = try over.decode(APIError.self)
            #expect(refusal.code == "device_limit")
            #expect(refusal.message.contains("one, two, three"), "\(refusal.message)")

            let swapped = try await Self.signIn(http, "ann@example.com", device: "four", replacing: "two")
            #expect(swapped.status == 201, "\(Self.message(swapped))")
            #expect(try await http.send("GET", "/v1/account", token: two.token).status == 401)

            // At the limit less one, six sign-ins at once: exactly one gets in.
            let four = try swapped.decode(DeviceSignIn.self)
            #expect(try await http.send("DELETE", "/v1/devices/three", token: four.token).status == 200)
            let replies = try await Self.concurrently(6) { index in try await Self.signIn(http, "ann@example.com", device: "race \(index)") }
            #expect(replies.map(\.status).sorted() == [201, 409, 409, 409, 409, 409])
            #expect(try await Self.devices(http, four.token).devices.count == 3)
        }
    }

    @Test("a device code: pending until approved, then one token, once; an expired or unknown code is refused", arguments: TestEngine.all)
    func deviceCodes(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: { $0.accounts.deviceCodeLifetime = 2 }) { _, http, _ in
            let phone = try await Self.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let grant = try await http.send("POST", "/v1/device-codes", json: Self.json(["deviceName": "tv"])).decode(DeviceCodeGrant.self)
            #expect(grant.userCode.count == 9)
            #expect(grant.verificationUri.hasSuffix("/account/device"))
            let token = Self.json(["deviceCode": grant.deviceCode])
            let pending = try await http.send("POST", "/v1/device-codes/token", json: token)
            #expect(pending.status == 400)
            #expect(try pending.decode(APIError.self).code == "authorization_pending")

            // Typed in lower case without the hyphen: the same code.
            let typed = grant.userCode.lowercased().replacingOccurrences(of: "-", with: " ")
            let approved = try await http.send("POST", "/v1/device-codes/approve", token: phone.token, json: Self.json(["userCode": typed]))
            #expect(approved.status == 200, "\(Self.message(approved))")
            #expect(try approved.decode(DeviceCodeApproved.self).deviceName == "tv")
            let again = try await http.send("POST", "/v1/device-codes/approve", token: phone.token, json: Self.json(["userCode": grant.userCode]))
            #expect(again.status == 404)

            let polls = try await Self.concurrently(3) { _ in try await http.send("POST", "/v1/device-codes/token", json: token) }
            #expect(polls.map(\.status).sorted() == [200, 400, 400])
            let tv = try #require(polls.first { $0.status == 200 }).decode(DeviceSignIn.self)
            #expect(tv.accountId == phone.accountId)
            #expect(try await Self.devices(http, tv.token).devices.map(\.name) == ["laptop", "tv"])
            let reused = try await http.send("POST", "/v1/device-codes/token", json: token)
            #expect(try reused.decode(APIError.self).code == "expired_token")

            // A code nobody approves in its lifetime is of no use afterwards.
            let late = try await http.send("POST", "/v1/device-codes", json: "{}").decode(DeviceCodeGrant.self)
            try await Task.sleep(for: .milliseconds(2300))
            #expect(try await http.send("POST", "/v1/device-codes/approve", token: phone.token, json: Self.json(["userCode": late.userCode])).status == 404)
            let expired = try await http.send("POST", "/v1/device-codes/token", json: Self.json(["deviceCode": late.deviceCode]))
            #expect(try expired.decode(APIError.self).code == "expired_token")
            #expect(try await http.send("POST", "/v1/device-codes/token", json: Self.json(["deviceCode": "forged"])).status == 400)
            #expect(try await http.send("POST", "/v1/device-codes/approve", json: Self.json(["userCode": late.userCode])).status == 401)
        }
    }

    @Test("a store from before devices: each account's one token becomes its device's, and the old column signs nobody in", arguments: TestEngine.all)
    func migratedStore(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        let logger = Logger(label: "test")
        let token = "0123456789abcdef0123456789abcdef0123456789abcdef"
        // The state an earlier Kiosk left: every migration up to 12, one account with its token's hash.
        let before = try await ServerDatabase.open(location, logger: logger)
        try await before.write { db in
            for table in ["device", "signIn", "deviceCode", "accountAudit"] { try await db.raw("DROP TABLE \(ident: table)").run() }
            for column in ["disabledAt", "deletedAt"] { try await db.raw("ALTER TABLE \(ident: "account") DROP COLUMN \(ident: column)").run() }
            try await db.raw(#"DELETE FROM "kioskMigration" WHERE "name" IN ('13-sign-ins-and-devices', '14-account-care')"#).run()
            try await db.raw(#"""
                INSERT INTO "account" ("id", "tokenHash", "credits", "createdAt", "revision") VALUES ('acct_0123456789abcdef', \#(bind: FileDigest.sha256(of: Data(token.utf8))), 5, \#(bind: Date()), 0)
                """#).run()
        }
        await before.close()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.database = location
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            let summary = try await http.send("GET", "/v1/account", token: token).decode(AccountSummary.self)
            #expect(summary.accountId == "acct_0123456789abcdef")
            #expect(summary.credits == 5)
            let list = try await Self.devices(http, token)
            #expect(list.devices.map(\.id) == ["dev_0123456789abcdef"])
            #expect(list.devices.map(\.name) == ["first device"])
            let retired = try await server.store.database.read { db in
                try await db.raw(#"SELECT "tokenHash" FROM "account" WHERE "id" = 'acct_0123456789abcdef'"#).first(decodingColumn: "tokenHash", as: String.self)
            }
            #expect(retired == "retired:acct_0123456789abcdef")
        }
    }

    @Test("the database keeps no password and no token: only bcrypt and SHA-256 hashes")
    func storedAsHashes() async throws {
        try await Self.withStore { server, http, _ in
            let created = try await Self.signUp(http, "ann@example.com").decode(AccountCreated.self)
            let (hashes, passwordHash) = try await server.store.database.read { db in
                (try await db.raw(#"SELECT "tokenHash" FROM "device""#).all().map { try $0.decode(column: "tokenHash", as: String.self) },
                 try await db.raw(#"SELECT "passwordHash" FROM "signIn""#).first(decodingColumn: "passwordHash", as: String.self))
            }
            #expect(hashes.contains(FileDigest.sha256(of: Data(created.token.utf8))))
            #expect(!hashes.contains(created.token))
            #expect(passwordHash?.hasPrefix("$2b$04$") == true)
            #expect(passwordHash?.contains(Self.password) == false)
        }
    }
}

/// Devices removed on one instance, refused on the other.
@Suite("Sign-ins across two instances")
struct SignInScaleOutTests: TwoInstanceSuite {
    @Test("a device removed on A is refused on B, which had its token in memory, and its long poll waiting on B ends within 2 s")
    func removedEverywhere() async throws {
        try await Self.withTwoInstances { a, b in
            let laptop = try await SignInTests.signUp(a.1, "ann@example.com").decode(AccountCreated.self)
            let phone = try await SignInTests.signIn(b.1, "ann@example.com").decode(DeviceSignIn.self)
            // B learns the phone's token (and keeps it in memory) before the removal.
            let cursor = try await b.1.send("GET", "/v1/transactions", token: phone.token).decode(TransactionPage.self).cursor ?? ""
            let poll = Task {
                let start = ContinuousClock.now
                let reply = try await b.1.send("GET", "/v1/transactions?wait=30&after=\(cursor)", token: phone.token)
                return (reply, ContinuousClock.now - start)
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await a.1.send("DELETE", "/v1/devices/\(phone.deviceId)", token: laptop.token).status == 200)
            let (answer, waited) = try await poll.value
            #expect(answer.status == 401)
            #expect(waited < .seconds(2.5), "the poll on B waited \(waited)")
            #expect(try await b.1.send("GET", "/v1/account", token: phone.token).status == 401)
            #expect(try await b.1.send("GET", "/v1/account", token: laptop.token).status == 200)
        }
    }
}

/// The process's memory of tokens: what it may remember, and how it forgets.
@Suite("Remembered tokens")
struct AccountTokensTests {
    @Test("a look-up that read a device before a removal does not bring it back once the removal forgot it")
    func readBeforeRemoval() {
        let tokens = AccountTokens()
        let device = DeviceIdentity(accountId: "acct_a", deviceId: "dev_a")
        let mark = tokens.mark()
        // The removal commits and forgets the account's tokens while the read is under way.
        tokens.forget(account: "acct_a")
        tokens.remember(device, forHash: "hash", readAfter: mark)
        #expect(tokens.device(forHash: "hash") == nil)
        // A read started after the removal is remembered as usual.
        tokens.remember(device, forHash: "hash", readAfter: tokens.mark())
        #expect(tokens.device(forHash: "hash") == device)
        tokens.forgetAll()
        #expect(tokens.device(forHash: "hash") == nil)
    }
}
