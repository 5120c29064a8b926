import Foundation
import Hummingbird
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Synchronization
import Testing

@Suite("Signed notifications to the publisher's endpoints")
struct NotificationDeliveryTests {
    @Test("POSTs to one endpoint through a connection cache reuse one connection; without it, each opens its own")
    func connectionsAreKept() async throws {
        let receiver = WebhookReceiver()
        receiver.failing.store(false, ordering: .relaxed)
        try await receiver.run { url in
            let request = KioskTransfer.HTTPRequest(method: "POST", url: url, body: Data(#"{"signedPayload":""}"#.utf8))
            let cache = ConnectionCache(capacity: 4)
            var opened: [Int] = []
            for _ in 0..<3 {
                opened.append(try await HTTPClient(keepingConnectionsIn: cache).send(request).connectionsOpened)
            }
            #expect(opened == [1, 0, 0])
            let alone = try await HTTPClient().send(request).connectionsOpened
            #expect(alone == 1)
        }
    }

    static let monthly = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
    static let book = "com.kiosk.books.small-engines"
    static let pack = "com.kiosk.credits.pack-5"

    static func admin(_ http: StoreHTTP, _ token: String, _ method: String, _ path: String, json: String? = nil) async throws -> StoreHTTP.Reply {
        let reply = try await http.send(method, path, token: token, json: json)
        #expect((200..<300).contains(reply.status), "\(method) \(path): \(String(decoding: reply.body, as: UTF8.self))")
        return reply
    }

    /// Waits until `condition` holds, up to `seconds`.
    static func eventually(_ seconds: Double, _ condition: @Sendable () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return try await condition()
    }

    /// The interpreter with joserfc: the Makefile's venv when it made one, else the first
    /// python3 on PATH that imports it.
    static func python() -> String {
        let venv = SampleStore.repository.appendingPathComponent(".build/pyjose/bin/python3").path
        if FileManager.default.isExecutableFile(atPath: venv) { return venv }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin"
        for folder in path.split(separator: ":") {
            let candidate = "\(folder)/python3"
            guard FileManager.default.isExecutableFile(atPath: candidate) else { continue }
            let probe = Process()
            probe.executableURL = URL(fileURLWithPath: candidate)
            probe.arguments = ["-c", "import joserfc"]
            probe.standardError = FileHandle.nullDevice
            if (try? probe.run()) != nil {
                probe.waitForExit()
                if probe.terminationStatus == 0 { return candidate }
            }
        }
        return "python3-with-joserfc-not-found (make test-tools installs it)"
    }

    /// Checks every accepted body against the store's JWKS with python joserfc.
    static func verifyWithJoserfc(_ arrivals: [WebhookReceiver.Arrival], jwks: Data, in directory: TemporaryDirectory) throws -> String {
        let keys = directory.path("jwks.json")
        let bodies = directory.path("bodies.jsonl")
        try jwks.write(to: keys)
        try Data(arrivals.map { String(decoding: $0.body, as: UTF8.self) }.joined(separator: "\n").utf8).write(to: bodies)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python())
        process.arguments = [SampleStore.repository.appendingPathComponent("scripts/verify_notifications.py").path, keys.path, bodies.path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.runAlone()
        process.waitForExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "joserfc: \(message)")
        return message
    }

    @Test("an endpoint answering 500 for a while and the server killed and restarted meanwhile: every notification arrives once, in order per account, verifying with joserfc", arguments: TestEngine.all)
    func survivesFailuresAndKill(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var arguments = ["--notification-retry", "0.3,0.6,1"]
        if case .postgres(let url) = try await engine.freshDatabase() { arguments += ["--database", url] }
        let serveArguments = arguments
        let receiver = WebhookReceiver()
        try await receiver.run { hook in
            var server = try await ServerProcess.start(store, extraArguments: serveArguments, log: directory.path("server-1.log"))
            let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            var http = StoreHTTP(baseURL: server.url)
            _ = try await Self.admin(http, adminToken, "POST", "/v1/admin/webhooks", json: #"{"url": "\#(hook)"}"#)
            let token = UUID().uuidString.lowercased()
            var accounts: [AccountCreated] = []
            for _ in 0..<3 {
                let account = try await http.createAccount()
                accounts.append(account)
                let bought = try await http.send("POST", "/v1/payments", token: account.token, json: """
                    {"productId": "\(Self.monthly)", "quantity": 1, "paymentMethod": "approve", "idempotencyKey": "\(UUID().uuidString)", "appAccountToken": "\(token)"}
                    """)
                #expect(bought.status == 200)
                let original = try bought.decode(PaymentResponse.self).transaction.transactionId
                #expect(try await http.pay(Self.book, token: account.token).status == 200)
                #expect(try await http.send("POST", "/v1/subscriptions/\(original)/cancel", token: account.token).status == 200)
                #expect(try await http.send("POST", "/v1/subscriptions/\(original)/resume", token: account.token).status == 200)
            }
            // Failing attempts pile up, then the server dies without a word and comes back.
            #expect(try await Self.eventually(10) { receiver.attempts >= 3 })
            // What the failed attempts left on record, as each engine writes a pass's outcomes.
            let firstServer = http
            #expect(try await Self.eventually(10) {
                try await Self.admin(firstServer, adminToken, "GET", "/v1/admin/notifications").decode([AdminNotificationRow].self).contains { $0.attempts > 0 }
            })
            let tried = try await Self.admin(http, adminToken, "GET", "/v1/admin/notifications").decode([AdminNotificationRow].self).filter { $0.attempts > 0 }
            #expect(!tried.isEmpty)
            #expect(tried.allSatisfy { $0.state == "pending" && $0.lastStatus == 500 && $0.lastError == "answered 500" && $0.deliveredAt == nil },
                    "\(tried.map { "\($0.state) \($0.lastStatus ?? -1) \($0.lastError ?? "nil") \($0.deliveredAt.map { "\($0)" } ?? "nil")" })")
            // Listed as failing while the endpoint refuses them (their last attempt failed).
            let failing = try await Self.admin(http, adminToken, "GET", "/v1/admin/notifications?failed=true").decode([AdminNotificationRow].self)
            #expect(Set(failing.map(\.notificationId)).isSuperset(of: tried.map(\.notificationId)), "\(failing.count) listed as failing")
            server.signal(SIGKILL)
            _ = await server.stop()
            server = try await ServerProcess.start(store, extraArguments: serveArguments, log: directory.path("server-2.log"))
            http = StoreHTTP(baseURL: server.url)
            // More changes after the restart, on the new process.
            #expect(try await http.pay(Self.pack, token: accounts[0].token).status == 200)
            try await Task.sleep(for: .seconds(1))
            receiver.failing.store(false, ordering: .relaxed)

            let expected = 3 * 4 + 1
            #expect(try await Self.eventually(30) { Set(receiver.accepted.map(\.notificationUUID)).count >= expected })
            let accepted = receiver.accepted
            #expect(accepted.count == expected, "each notification accepted once: \(accepted.map(\.type))")
            #expect(Set(accepted.map(\.notificationUUID)).count == accepted.count)

            // In order per account: as the store wrote them.
            // A delivery is marked delivered just after the endpoint accepted it: wait for that commit.
            let reader = http
            _ = try await Self.eventually(10) {
                try await Self.admin(reader, adminToken, "GET", "/v1/admin/notifications").decode([AdminNotificationRow].self).allSatisfy { $0.state == "delivered" }
            }
            let rows = try await Self.admin(http, adminToken, "GET", "/v1/admin/notifications").decode([AdminNotificationRow].self)
            #expect(rows.allSatisfy { $0.state == "delivered" && $0.lastStatus == 200 && $0.lastError == nil && $0.deliveredAt != nil })
            for account in accounts {
                let written = rows.filter { $0.accountId == account.accountId }.map(\.notificationId).reversed()
                let arrived = accepted.filter { $0.accountId == account.accountId }.map(\.notificationUUID)
                #expect(Array(written) == arrived)
                #expect(accepted.filter { $0.accountId == account.accountId }.map(\.type).prefix(4)
                    == ["SUBSCRIBED", "ONE_TIME_CHARGE", "DID_CHANGE_RENEWAL_STATUS", "DID_CHANGE_RENEWAL_STATUS"])
            }
            // The app's account token is in the receipt and in the renewal info of the notifications.
            let subscribed = try #require(accepted.first { $0.type == "SUBSCRIBED" })
            let payload = try WebhookReceiver.payload(try JSONDecoder().decode([String: String].self, from: subscribed.body)["signedPayload"] ?? "")
            let data = try #require(payload["data"] as? [String: Any])
            let renewal = try WebhookReceiver.payload(data["signedRenewalInfo"] as? String ?? "")
            let transaction = try WebhookReceiver.payload(data["signedTransactionInfo"] as? String ?? "")
            #expect(renewal["appAccountToken"] as? String == token)
            #expect(transaction["appAccountToken"] as? String == token)
            #expect(payload["notificationUUID"] as? String == subscribed.notificationUUID)
            #expect(payload["signedDate"] is NSNumber)

            let jwks = try await http.send("GET", "/.well-known/jwks.json").body
            _ = try Self.verifyWithJoserfc(accepted, jwks: jwks, in: directory)

            // resend and test, as a publisher would.
            let test = try await Self.admin(http, adminToken, "POST", "/v1/admin/notifications/test").decode([String: String].self)
            let testId = try #require(test["notificationUUID"])
            #expect(try await Self.eventually(10) { receiver.accepted.contains { $0.notificationUUID == testId && $0.type == "TEST" } })
            _ = try await Self.admin(http, adminToken, "POST", "/v1/admin/notifications/\(subscribed.notificationUUID)/resend")
            #expect(try await Self.eventually(10) { receiver.accepted.filter { $0.notificationUUID == subscribed.notificationUUID }.count == 2 })
            // The one sent again is not failing, recorded or still in flight (pending, attempts
            // counted, no error): listed so, it failed this check once (run AO).
            let failed = try await Self.admin(http, adminToken, "GET", "/v1/admin/notifications?failed=true").decode([AdminNotificationRow].self)
            #expect(failed.isEmpty, "\(failed)")
            _ = await server.stop()
        }
    }
}
