import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import Testing

/// A long poll of the change feed sent as a device's first request on its connection is held on
/// the event loop (``HeldFeedPoll``), not in a task of the HTTP stack. These tests send it in
/// that form over a raw connection and check it answers as the route does.
@Suite("A long poll held on the event loop")
struct HeldPollTests: StoreSuite, TwoInstanceSuite {
    static func poll(_ token: String, after cursor: String? = nil, wait: Int = 20, extra: String = "") -> String {
        "GET /v1/transactions?wait=\(wait)" + (cursor.map { "&after=\($0)" } ?? "") + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Authorization: Bearer \(token)\r\nUser-Agent: held-test\r\n\r\n" + extra
    }

    static func port(_ server: KioskServer, _ http: StoreHTTP) throws -> Int {
        try #require(Int(http.baseURL.split(separator: ":").last ?? ""))
    }

    static func answer(_ client: SlowClient, within seconds: Double = 30) async throws -> (status: Int, body: TransactionPage?, text: String) {
        let text = try #require(try await offCooperativePool { client.response(within: seconds) }, "no answer")
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        let body = text.components(separatedBy: "\r\n\r\n").last.flatMap { try? JSONDecoder.kiosk.decode(TransactionPage.self, from: Data($0.utf8)) }
        return (status, body, text)
    }

    /// Until `server` holds `count` waiting polls; a bound, not a measure.
    static func waiting(_ server: KioskServer, _ count: Int) async throws {
        for _ in 0..<300 where server.store.changes.waiting != count { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.store.changes.waiting == count)
    }

    @Test("the request a device's agent sends is one the event loop holds; a HEAD, a bad wait or cursor, or no bearer token go to the route")
    func recognised() throws {
        func held(_ text: String) -> HeldFeedPoll? {
            Array(text.utf8).withUnsafeBytes { RawGet($0) }.flatMap(HeldFeedPoll.init)
        }
        let poll = try #require(held(Self.poll("tok", after: "41", wait: 4500) + "&catalog=x"))
        #expect(poll.token == "tok" && poll.after == "41" && poll.wait == .seconds(AccountRoutes.longestWait))
        let catalog = try #require(held("GET /v1/transactions?wait=5&after=&catalog=%22abc%22 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n"))
        #expect(catalog.catalog == "\"abc\"" && catalog.after == "" && catalog.wait == .seconds(5))
        for refused in ["HEAD /v1/transactions?wait=5 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
                        "GET /v1/transactions?after=3 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
                        "GET /v1/transactions?wait=-1 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
                        "GET /v1/transactions?wait=5&after=x HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
                        "GET /v1/transactions?wait=5&after=-2 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n",
                        "GET /v1/transactions?wait=5 HTTP/1.1\r\nAuthorization: Basic dTpw\r\n\r\n",
                        "GET /v1/transactions?wait=5 HTTP/1.1\r\n\r\n",
                        "GET /v1/transactionsX?wait=5 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n"] {
            #expect(held(refused) == nil, "\(refused.debugDescription)")
        }
    }

    @Test("held with no task: a purchase wakes it with the route's answer, and a pipelined request is answered after it, in order", arguments: TestEngine.all)
    func wakes(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let start = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            let client = try SlowClient(port: try Self.port(server, http))
            client.send(Self.poll(account.token, after: start.cursor ?? "0", extra: "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"))
            try await Self.waiting(server, 1)
            let bought = try await http.pay(Self.pack5, token: account.token).decode(PaymentResponse.self)
            let answer = try await Self.answer(client)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.body?.transactions.map(\.transactionId) == [bought.transaction.transactionId])
            #expect(answer.text.contains("Content-Type: application/json\r\n") && answer.text.contains("Server: kiosk\r\n"))
            let next = try await Self.answer(client)
            #expect(next.status == 200 && next.text.hasSuffix("ok"), "\(next.text)")
            try await Self.waiting(server, 0)
        }
    }

    @Test("its wait ends empty on the monotonic deadline; an unknown token is the route's 401; a device removed while it waits is told it is signed out", arguments: TestEngine.all)
    func endsAndRefuses(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            let port = try Self.port(server, http)
            let start = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self)
            let quiet = try SlowClient(port: port)
            let began = ContinuousClock.now
            quiet.send(Self.poll(account.token, after: start.cursor ?? "0", wait: 1))
            let empty = try await Self.answer(quiet)
            #expect(empty.status == 200 && empty.body?.transactions.isEmpty == true && empty.body?.cursor == (start.cursor ?? "0"))
            #expect(ContinuousClock.now - began >= .milliseconds(900))

            let stranger = try SlowClient(port: port)
            stranger.send(Self.poll("not-a-token"))
            let refused = try await Self.answer(stranger)
            #expect(refused.status == 401 && refused.text.contains("WWW-Authenticate: Bearer\r\n") && refused.text.contains("\"code\":\"unauthorized\""), "\(refused.text)")

            let device = try #require(account.deviceId)
            let held = try SlowClient(port: port)
            held.send(Self.poll(account.token, after: start.cursor ?? "0"))
            try await Self.waiting(server, 1)
            #expect(try await http.send("DELETE", "/v1/devices/\(device)", token: account.token).status == 200)
            let signedOut = try await Self.answer(held)
            #expect(signedOut.status == 401, "\(signedOut.text)")
        }
    }

    @Test("a device that goes away while its poll waits leaves nothing waiting (a stopping server: ServeLifecycleTests)", arguments: TestEngine.all)
    func gone(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, account in
            var gone: SlowClient? = try SlowClient(port: try Self.port(server, http))
            gone?.send(Self.poll(account.token, after: "999999"))
            try await Self.waiting(server, 1)
            gone = nil
            try await Self.waiting(server, 0)
            #expect(gone == nil)
        }
    }

    @Test("a client that half-closes after its poll gets its answer (at once, with what is there), then the connection closes; more than a request's worth pipelined behind a waiting poll holds reading back and is answered after it")
    func halfClosedAndPipelined() async throws {
        try await Self.withStore { server, http, account in
            let port = try Self.port(server, http)
            // Sent and half-closed at once: the first look's answer (a page; a 401) still comes.
            _ = try await http.pay(Self.pack5, token: account.token)
            for (token, status) in [(account.token, 200), ("not-a-token", 401)] {
                let client = try SlowClient(port: port)
                client.send(Self.poll(token, after: "0", wait: 30))
                client.finishSending()
                let answer = try await Self.answer(client)
                #expect(answer.status == status, "\(answer.text)")
                #expect(try await offCooperativePool { client.isClosedByPeer() })
            }
            // Half-closed while it waits: answered at once, empty.
            let waiting = try SlowClient(port: port)
            let cursor = try await http.send("GET", "/v1/transactions", token: account.token).decode(TransactionPage.self).cursor ?? "0"
            waiting.send(Self.poll(account.token, after: cursor, wait: 300))
            try await Self.waiting(server, 1)
            waiting.finishSending()
            let empty = try await Self.answer(waiting, within: 30)
            #expect(empty.status == 200 && empty.body?.transactions.isEmpty == true, "\(empty.text)")
            try await Self.waiting(server, 0)
            // 12 KiB of a request pipelined behind a waiting poll: reading waits for the poll's answer.
            let pipelined = try SlowClient(port: port)
            pipelined.send(Self.poll(account.token, after: cursor, wait: 300))
            try await Self.waiting(server, 1)
            pipelined.send("GET /livez HTTP/1.1\r\nHost: x\r\nX-Pad: \(String(repeating: "a", count: 12 << 10))\r\n\r\n")
            _ = try await http.pay(Self.pack5, token: account.token)
            let woken = try await Self.answer(pipelined)
            #expect(woken.status == 200 && woken.body?.transactions.count == 1, "\(woken.text)")
            let next = try await Self.answer(pipelined)
            #expect(next.status == 200 && next.text.hasSuffix("ok"), "\(next.text)")
        }
    }

    /// How many devices wait at once in the tests below: thousands, within the file descriptors one
    /// test process has (each device is a socket here and one in the server).
    static let devices = 2_000

    /// `devices` accounts, each with a device waiting on its own fresh connection to `ports[i % 2]`;
    /// then `buy` buys a pack for each, through the other instance; every poll must answer with
    /// its own account's purchase, none lost, none another's.
    ///
    /// The accounts are made and the packs bought through the store itself, not its routes: the
    /// waits under test are the devices' polls on real sockets, and what wakes them is a purchase's
    /// commit (`Payments.pay`), on either engine, which the routes' own tests cover. Through the
    /// debug build's routes the 4,000 requests took most of these tests' 93 s (2026-11-30).
    static func everyWaitWakes(ports: [Int], servers: [KioskServer],
                               buy: @escaping @Sendable (Int, AccountCreated) async throws -> PaymentResponse) async throws {
        let accounts = try await withThrowingTaskGroup(of: (Int, AccountCreated).self) { group in
            for index in 0..<devices { group.addTask { (index, try await servers[0].store.accounts.createAccount()) } }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        let clients = try (0..<devices).map { index in
            let client = try SlowClient(port: ports[index % ports.count])
            client.send(poll(accounts[index]?.token ?? "", after: "0", wait: 300))
            return client
        }
        for _ in 0..<1_500 where servers.reduce(0, { $0 + $1.store.changes.waiting }) != devices {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(servers.reduce(0, { $0 + $1.store.changes.waiting }) == devices)
        // Sixteen purchases at a time.
        let bought = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            var bought: [Int: String?] = [:]
            for index in 0..<devices {
                group.addTask {
                    guard let account = accounts[index] else { return (index, nil) }
                    return (index, try? await buy(index, account).transaction.transactionId)
                }
                if index >= 16, let (done, id) = try await group.next() { bought[done] = id }
            }
            for try await (done, id) in group { bought[done] = id }
            return bought
        }
        var woken = 0
        for (index, client) in clients.enumerated() {
            let answer = try await offCooperativePool { client.response(within: 60) }
            let page = answer.flatMap { $0.components(separatedBy: "\r\n\r\n").last }
                .flatMap { try? JSONDecoder.kiosk.decode(TransactionPage.self, from: Data($0.utf8)) }
            if let page, page.transactions.map(\.transactionId) == [(bought[index] ?? nil) ?? "none"] { woken += 1 }
        }
        #expect(woken == devices, "\(devices - woken) of \(devices) waiting devices missed their purchase")
    }

    /// A pack of five credits, approved, under a fresh idempotency key.
    static func packPayment() -> PaymentRequest {
        PaymentRequest(productId: pack5, quantity: 1, paymentMethod: .approve, idempotencyKey: UUID().uuidString)
    }

    @Test("thousands of devices waiting on one SQLite instance: a purchase for each wakes its own poll, none lost")
    func thousandsOnSQLite() async throws {
        try await Self.withStore(engine: .sqlite, configure: { $0.rateLimits = .off }) { server, http, _ in
            let port = try Self.port(server, http)
            try await Self.everyWaitWakes(ports: [port], servers: [server]) { _, account in
                try await server.store.payments.pay(Self.packPayment(), accountId: account.accountId)
            }
        }
    }

    @Test("thousands of devices waiting on two instances over one PostgreSQL database: each bought through the other instance, every poll wakes with its own purchase")
    func thousandsAcrossInstances() async throws {
        try await Self.withTwoInstances(configure: { $0.rateLimits = .off }) { a, b in
            let ports = [try Self.port(a.0, a.1), try Self.port(b.0, b.1)]
            try await Self.everyWaitWakes(ports: ports, servers: [a.0, b.0]) { index, account in
                // Waiting on A (even) is bought through B, and the other way round.
                try await (index % 2 == 0 ? b.0 : a.0).store.payments.pay(Self.packPayment(), accountId: account.accountId)
            }
        }
    }
}
