import Foundation
import KioskCore
import KioskServer
import KioskStore
import KioskTestSupport
import Testing

/// Android's channel (issue 45): Google Play purchases signed by `openssl dgst -sha1 -sign` under
/// a key openssl made, as Play signs them, and Pub/Sub push tokens signed by joserfc
/// (`scripts/play_push_token.py`), so neither is checked only against Kiosk's own signer.
@Suite("The Android channel: Google Play purchases and notifications")
struct PlayChannelTests: StoreSuite {
    static let package = "com.example.reader"
    static let playBook = "play.book.small-engines"
    static let playIssue = "play.issue.harbor-02"
    static let playPack = "play.credits.pack-5"
    static let audience = "https://store.example/v1/play/notifications"
    static let pushAccount = "play-rtdn@example.iam.gserviceaccount.com"
    static let python = SampleStore.repository.appendingPathComponent(".build/venv/bin/python")

    /// openssl's keys for one test: Play's licensing key pair and Google's push-token key.
    struct Keys: Sendable {
        let directory: TemporaryDirectory
        /// The Play Console's base64 public key.
        let playPublicKey: String
        let jwks: Data

        init() throws {
            try #require(FileManager.default.isExecutableFile(atPath: python.path), "no \(python.path): run make test-tools (it installs joserfc into that venv)")
            directory = try TemporaryDirectory()
            try OpenSSL.run(["genrsa", "-out", "play.pem", "2048"], in: directory)
            try OpenSSL.run(["rsa", "-in", "play.pem", "-pubout", "-outform", "DER", "-out", "play.der"], in: directory)
            try OpenSSL.run(["genrsa", "-out", "other.pem", "2048"], in: directory)
            try OpenSSL.run(["genrsa", "-out", "google.pem", "2048"], in: directory)
            try OpenSSL.run(["genrsa", "-out", "impostor.pem", "2048"], in: directory)
            playPublicKey = try Data(contentsOf: directory.path("play.der")).base64EncodedString()
            jwks = Data(try Self.script(["jwks", directory.path("google.pem").path, "google-1"]).utf8)
        }


        static func script(_ arguments: [String]) throws -> String {
            let process = Process()
            let output = Pipe()
            process.executableURL = python
            process.arguments = [SampleStore.repository.appendingPathComponent("scripts/play_push_token.py").path] + arguments
            process.standardOutput = output
            try process.runAlone()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitForExit()
            try #require(process.terminationStatus == 0, "play_push_token.py \(arguments.first ?? "") failed")
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Play's base64 signature of `json`, by the app's key (or another).
        func sign(_ json: String, key: String = "play") throws -> String {
            let name = UUID().uuidString
            try Data(json.utf8).write(to: directory.path("\(name).json"))
            try OpenSSL.run(["dgst", "-sha1", "-sign", "\(key).pem", "-out", "\(name).sig", "\(name).json"], in: directory)
            return try Data(contentsOf: directory.path("\(name).sig")).base64EncodedString()
        }

        /// A Pub/Sub push token, as Google signs it (or as an impostor does).
        func token(audience: String = PlayChannelTests.audience, email: String = PlayChannelTests.pushAccount, seconds: Int = 3600,
                   key: String = "google", issuer: String = "https://accounts.google.com") throws -> String {
            try Self.script(["token", directory.path("\(key).pem").path, "google-1", audience, email, String(seconds), issuer])
        }
    }

    static func playStore<T: Sendable>(engine: TestEngine, keys: Keys, environment: StoreEnvironment = .sandbox,
                                       _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> T) async throws -> T {
        let play = try PlayPurchaseVerifier(publicKey: keys.playPublicKey, packageName: package)
        let notifications = try await PlayNotificationVerifier(jwks: keys.jwks, audience: audience, serviceAccount: pushAccount)
        return try await withStore(engine: engine, environment: environment, prepare: { store in
            try store.editCatalog("books.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.book { products[index]["playProductId"] = Self.playBook }
            }
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.issue { products[index]["playProductId"] = Self.playIssue }
            }
            try store.editCatalog("credits.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.pack5 { products[index]["playProductId"] = Self.playPack }
            }
        }, configure: {
            $0.channels.play = play
            $0.channels.playNotifications = notifications
        }, body)
    }

    /// A purchase's JSON as Play Billing returns it (compact, in Play's field order).
    static func purchase(token: String, product: String = playBook, state: Int = 0, package: String = package, account: String? = nil,
                         quantity: Int = 1) -> String {
        let named = account.map { #","obfuscatedAccountId":"\#($0)""# } ?? ""
        return #"{"orderId":"GPA.3344-\#(token.prefix(8))","packageName":"\#(package)","productId":"\#(product)","purchaseTime":1795760000000,"purchaseState":\#(state),"purchaseToken":"\#(token)","quantity":\#(quantity),"acknowledged":false\#(named)}"#
    }

    static func present(_ http: StoreHTTP, _ account: AccountCreated, json: String, signature: String) async throws -> StoreHTTP.Reply {
        let body = String(decoding: try JSONEncoder().encode(PlayPurchaseProof(purchase: json, signature: signature)), as: UTF8.self)
        return try await http.send("POST", "/v1/play/purchases", token: account.token, json: body)
    }

    static func push(_ http: StoreHTTP, messageId: String, notification: [String: Any], token: String?) async throws -> StoreHTTP.Reply {
        let data = try JSONSerialization.data(withJSONObject: notification).base64EncodedString()
        let body = String(decoding: try JSONSerialization.data(withJSONObject: [
            "message": ["data": data, "messageId": messageId, "publishTime": "2026-11-27T10:00:00Z"],
            "subscription": "projects/example/subscriptions/play-rtdn"]), as: UTF8.self)
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        return try await http.send("POST", "/v1/play/notifications", json: body, headers: headers)
    }

    static func voided(_ purchaseToken: String, refundType: Int = 1) -> [String: Any] {
        ["version": "1.0", "packageName": package, "eventTimeMillis": "1795760000000",
         "voidedPurchaseNotification": ["purchaseToken": purchaseToken, "orderId": "GPA.3344-\(purchaseToken.prefix(8))", "productType": 2, "refundType": refundType]]
    }

    static func owned(_ http: StoreHTTP, _ account: AccountCreated) async throws -> [String] {
        try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).owned
    }

    @Test("a purchased Play purchase grants the book as a signed Kiosk purchase in the account's feed; presented again it is the same one", arguments: TestEngine.all)
    func grant(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { server, http, account in
            let json = Self.purchase(token: "tok-grant-1.AO-J1Oz")
            let signature = try keys.sign(json)
            let reply = try await Self.present(http, account, json: json, signature: signature)
            #expect(reply.status == 200, "\(Self.message(reply))")
            let answer = try reply.decode(ChannelPurchaseAnswer.self)
            #expect(answer.state == "granted" && answer.productId == Self.book)
            let receipt = try #require(answer.transaction?.signedTransaction)
            let claims = try await KioskReceiptPolicy(keySet: try await server.keys.jwks()).check(receipt, presentedBy: account.accountId)
            #expect(claims.productId == Self.book)
            #expect(try await Self.owned(http, account) == [Self.book])
            let page = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            #expect(page.transactions.map(\.transactionId) == [answer.transaction?.transactionId])

            // Presented again (the app retrying, another of the account's devices), four at once too: one purchase.
            let again = try await Self.concurrently(4) { _ in try await Self.present(http, account, json: json, signature: signature) }
            #expect(again.allSatisfy { $0.status == 200 })
            #expect(Set(try again.map { try $0.decode(ChannelPurchaseAnswer.self).transaction?.transactionId }) == [answer.transaction?.transactionId])
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).count == 1)

            // Credits from Play: the quantity's worth.
            let pack = Self.purchase(token: "tok-pack-1", product: Self.playPack, quantity: 2)
            #expect(try await Self.present(http, account, json: pack, signature: try keys.sign(pack)).status == 200)
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == 10)

            let byChannel = try await http.send("GET", "/v1/admin/sales?by=channel", token: server.adminToken).decode([AdminSalesRow].self)
            #expect(Set(byChannel.compactMap(\.channel)) == ["play"], "\(byChannel)")
        }
    }

    @Test("a forged, tampered, other app's, cancelled or unknown product's purchase is refused with its reason and grants nothing", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { server, http, account in
            let json = Self.purchase(token: "tok-refuse-1")
            /// The status and code of presenting `json` under the signature `key` made of `signed` (or `json`).
            func code(_ json: String, signed: String? = nil, key: String = "play", signature: String? = nil) async throws -> String {
                let reply = try await Self.present(http, account, json: json, signature: try signature ?? keys.sign(signed ?? json, key: key))
                return "\(reply.status) \((try? reply.decode(APIError.self).code) ?? "")"
            }
            let answer1 = try await code(json, key: "other")
            #expect(answer1 == "400 play_signature", "another key")
            let answer2 = try await code(json.replacingOccurrences(of: "refuse", with: "refusx"), signed: json)
            #expect(answer2 == "400 play_signature", "tampered")
            let answer3 = try await code(json.replacingOccurrences(of: ",", with: ", "), signed: json)
            #expect(answer3 == "400 play_signature", "re-serialized")
            let answer4 = try await code(json, signature: "not base64!")
            #expect(answer4 == "400 play_signature")
            let answer5 = try await code(Self.purchase(token: "tok-refuse-2", package: "com.example.other"))
            #expect(answer5 == "400 play_package")
            let answer6 = try await code(Self.purchase(token: "tok-refuse-3", state: 1))
            #expect(answer6 == "402 play_cancelled")
            let answer7 = try await code(Self.purchase(token: "tok-refuse-4", product: "play.unknown"))
            #expect(answer7 == "404 unknown_product")
            let answer8 = try await code("{\"purchaseToken\": 3}")
            #expect(answer8 == "400 play_format")
            let answer9 = try await code(Self.purchase(token: "tok/../<script>"))
            #expect(answer9 == "400 play_format")
            // A signed quantity past what Kiosk grants is a refusal, not an overflow (the server lived).
            let huge = try await code(Self.purchase(token: "tok-refuse-5", product: Self.playPack, quantity: 4_611_686_018_427_387_904))
            #expect(huge == "400 bad_request")
            let tooMany = try await code(Self.purchase(token: "tok-refuse-6", product: Self.playPack, quantity: 101))
            #expect(tooMany == "400 bad_request")
            // Without an account token: 401, as every purchase.
            #expect(try await http.send("POST", "/v1/play/purchases", json: "{}").status == 401)
            #expect(try await Self.owned(http, account).isEmpty)
            #expect(try await http.charges(accountId: account.accountId, adminToken: server.adminToken).isEmpty)
        }
    }

    @Test("a pending purchase grants nothing until the same token comes back purchased", arguments: TestEngine.all)
    func pending(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { _, http, account in
            let pending = Self.purchase(token: "tok-pending-1", state: 2)
            let reply = try await Self.present(http, account, json: pending, signature: try keys.sign(pending))
            #expect(reply.status == 202)
            #expect(try reply.decode(ChannelPurchaseAnswer.self).state == "pending")
            #expect(try await Self.owned(http, account).isEmpty)
            let purchased = Self.purchase(token: "tok-pending-1", state: 0)
            let granted = try await Self.present(http, account, json: purchased, signature: try keys.sign(purchased))
            #expect(try granted.status == 200 && granted.decode(ChannelPurchaseAnswer.self).state == "granted")
            #expect(try await Self.owned(http, account) == [Self.book])
        }
    }

    @Test("a token presented by two accounts at once is granted to one; the other gets a 409 saying so, as does an account the app did not name", arguments: TestEngine.all)
    func twoAccounts(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { server, http, _ in
            for round in 0..<8 {
                let (first, second) = (try await http.createAccount(), try await http.createAccount())
                let json = Self.purchase(token: "tok-race-\(round)")
                let signature = try keys.sign(json)
                let race = try await Self.race({ try await Self.present(http, first, json: json, signature: signature) },
                                               { try await Self.present(http, second, json: json, signature: signature) })
                #expect(race.statuses.sorted() == [200, 409], "round \(round): \(race.statuses)")
                let (winner, loser) = race.first.status == 200 ? (first, race.second) : (second, race.first)
                let other = winner.accountId == first.accountId ? second : first
                #expect(try loser.decode(APIError.self).code == "purchase_owned")
                #expect(try await Self.owned(http, winner) == [Self.book], "round \(round)")
                #expect(try await Self.owned(http, other).isEmpty, "round \(round)")
                #expect(try await http.charges(accountId: other.accountId, adminToken: server.adminToken).isEmpty)
            }
            let (named, stranger) = (try await http.createAccount(), try await http.createAccount())
            let forNamed = Self.purchase(token: "tok-named", account: named.accountId)
            let refused = try await Self.present(http, stranger, json: forNamed, signature: try keys.sign(forNamed))
            #expect(try refused.status == 409 && refused.decode(APIError.self).code == "purchase_owned")
            #expect(try await Self.present(http, named, json: forNamed, signature: try keys.sign(forNamed)).status == 200)
        }
    }

    @Test("a voided purchase is revoked whichever comes first; a push sent again is one; a forged, expired or other audience's token is a 401", arguments: TestEngine.all)
    func voided(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { server, http, account in
            let token = try keys.token()
            // Voided after the grant.
            let json = Self.purchase(token: "tok-void-1")
            #expect(try await Self.present(http, account, json: json, signature: try keys.sign(json)).status == 200)
            let reply = try await Self.push(http, messageId: "m-1", notification: Self.voided("tok-void-1"), token: token)
            #expect(reply.status == 200, "\(Self.message(reply))")
            #expect(try reply.decode(AdminChannelEventRow.self).outcome == "revoked")
            #expect(try await Self.owned(http, account).isEmpty)
            let charges = try await http.charges(accountId: account.accountId, adminToken: server.adminToken)
            #expect(charges.count == 2 && charges.reduce(0, +) == 0, "\(charges)")
            // Sent again by Pub/Sub: answered as kept.
            #expect(try await Self.push(http, messageId: "m-1", notification: Self.voided("tok-void-1"), token: token).decode(AdminChannelEventRow.self).outcome == "revoked")
            // Presented again after the void: refused.
            let again = try await Self.present(http, account, json: json, signature: try keys.sign(json))
            #expect(try again.status == 402 && again.decode(APIError.self).code == "payment_withdrawn")

            // Voided before it was presented: the purchase is refused when it comes.
            let early = try await Self.push(http, messageId: "m-2", notification: Self.voided("tok-void-2"), token: token)
            #expect(try early.decode(AdminChannelEventRow.self).outcome == "unmatched")
            let late = Self.purchase(token: "tok-void-2", product: Self.playIssue)
            let refused = try await Self.present(http, account, json: late, signature: try keys.sign(late))
            #expect(refused.status == 402, "\(Self.message(refused))")
            #expect(try await Self.owned(http, account).isEmpty)

            // Other kinds are recorded; a partial void revokes nothing.
            let test = try await Self.push(http, messageId: "m-3", notification: ["version": "1.0", "packageName": Self.package, "testNotification": ["version": "1.0"]], token: token)
            #expect(try test.decode(AdminChannelEventRow.self).outcome == "ignored")

            // Refused tokens: Pub/Sub retries, nothing is applied.
            let void3 = Self.voided("tok-void-3")
            for (why, bad) in [("impostor", try keys.token(key: "impostor")), ("expired", try keys.token(seconds: -120)),
                               ("other audience", try keys.token(audience: "https://elsewhere.example/")),
                               ("other account", try keys.token(email: "someone@example.com")), ("not Google", try keys.token(issuer: "https://evil.example")),
                               ("tampered", String(token.dropLast(3)) + "AAA")] {
                let refusedPush = try await Self.push(http, messageId: "m-bad", notification: void3, token: bad)
                #expect(refusedPush.status == 401, "\(why): \(refusedPush.status)")
            }
            #expect(try await Self.push(http, messageId: "m-bad", notification: void3, token: nil).status == 401)
            let events = try await http.send("GET", "/v1/admin/channel-events", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(!events.contains { $0.eventId == "m-bad" })
        }
    }

    @Test("a void and the purchase it voids arriving at once end revoked, never granted", arguments: TestEngine.all)
    func voidRace(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { _, http, _ in
            let token = try keys.token()
            for round in 0..<8 {
                let account = try await http.createAccount()
                let json = Self.purchase(token: "tok-vr-\(round)")
                let signature = try keys.sign(json)
                _ = try await Self.race({ try await Self.present(http, account, json: json, signature: signature) },
                                        { try await Self.push(http, messageId: "vr-\(round)", notification: Self.voided("tok-vr-\(round)"), token: token) })
                #expect(try await Self.owned(http, account).isEmpty, "round \(round)")
            }
        }
    }

    @Test("a void of a credit pack whose credits were spent revokes nothing, says so, and is listed for the operator", arguments: TestEngine.all)
    func voidOfSpentPack(engine: TestEngine) async throws {
        let keys = try Keys()
        try await Self.playStore(engine: engine, keys: keys) { server, http, account in
            let json = Self.purchase(token: "tok-spent-1", product: Self.playPack)
            #expect(try await Self.present(http, account, json: json, signature: try keys.sign(json)).status == 200)
            let redeem = #"{"productId": "\#(Self.issue)", "idempotencyKey": "\#(UUID().uuidString)"}"#
            let redeemed = try await http.send("POST", "/v1/redemptions", token: account.token, json: redeem)
            #expect(redeemed.status == 200, "\(Self.message(redeemed))")
            let before = try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits
            #expect(before < 5)

            let reply = try await Self.push(http, messageId: "m-spent", notification: Self.voided("tok-spent-1"), token: try keys.token())
            let row = try reply.decode(AdminChannelEventRow.self)
            #expect(row.outcome == "unsettled", "\(row)")
            #expect(!row.detail.contains("content removed"), "\(row.detail)")
            #expect(try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits == before)
            let listed = try await http.send("GET", "/v1/admin/channel-events?unmatched=1", token: server.adminToken).decode([AdminChannelEventRow].self)
            #expect(listed.map(\.eventId) == ["m-spent"], "\(listed)")
            // The operator settles it by hand: a revocation, which nothing refuses.
            let transaction = try #require(row.transactionId)
            #expect(try await http.send("POST", "/v1/admin/transactions/\(transaction)/revoke", token: server.adminToken).status == 200)
        }
    }
}
