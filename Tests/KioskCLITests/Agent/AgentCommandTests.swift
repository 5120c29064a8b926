import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk agent`: after the first purchase, only the agent runs, and the library keeps up.
@Suite("kiosk agent delivers on its own")
struct AgentCommandTests: BackgroundCommandSuite {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas
    static let book = "com.kiosk.books.small-engines"
    static let subscription = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
    static let currentIssue = "com.kiosk.magazines.harbor-monthly.issue-03"
    static let otherBook = "com.kiosk.books.river-of-maps"

    /// The store on `engine`: one instance on SQLite; on PostgreSQL a second one (with its own data
    /// and files) over the same database, for what must cross from one instance to the other.
    struct Instances {
        let directory: TemporaryDirectory
        let a: ServerProcess
        let b: ServerProcess
        /// B's store folders (A's on SQLite), for `kiosk admin --data`.
        let storeB: SampleStore
        private let directoryB: TemporaryDirectory
        private let pair: Bool

        init(_ engine: TestEngine) async throws {
            directory = try TemporaryDirectory()
            directoryB = try TemporaryDirectory()
            let store = try SampleStore(in: directory)
            var extra: [String] = []
            if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
            pair = !extra.isEmpty
            a = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("a.log"))
            storeB = pair ? try SampleStore(in: directoryB) : store
            b = pair ? try await ServerProcess.start(storeB, extraArguments: extra, log: directory.path("b.log")) : a
        }

        func stop() async {
            _ = await a.stop()
            if pair { _ = await b.stop() }
        }
    }

    @Test("two agents on one home: the second says the first runs, naming its PID, and exits 2")
    func oneAgentPerHome() async throws {
        let setup = try await Setup(megabytes: 1, buy: false)
        let first = try Self.startAgent(home: setup.home, in: setup.directory)
        try await Self.eventually(within: 5) { Self.output(setup.directory).contains("agent running") }
        let second = try await KioskCommand.run(["agent"], environment: ["KIOSK_HOME": setup.home])
        #expect(second.status == 2, "\(second)")
        #expect(second.stderr.contains("already runs") && second.stderr.contains("PID \(first.processIdentifier)"), "\(second.stderr)")
        #expect(second.stderr.split(separator: "\n").count == 1)
        let listed = try await KioskCommand.run(["downloads"], environment: ["KIOSK_HOME": setup.home])
        #expect(listed.stdout.contains("agent running (PID \(first.processIdentifier))"), "\(listed.stdout)")
        let stopped = try await Self.stop(first)
        #expect(stopped.status == 0 && stopped.seconds < Double(stopBound.components.seconds), "\(stopped) \(Self.output(setup.directory))")
        #expect(Self.output(setup.directory).components(separatedBy: "agent stopped").count == 2)
        _ = await setup.server.stop()
    }

    @Test("SIGTERM mid-download: the agent exits within a second leaving the download waiting with its bytes; the next agent resumes byte-exact")
    func stopsMidDownload() async throws {
        let setup = try await Setup()
        let agent = try Self.startAgent(home: setup.home, in: setup.directory, bytesPerSecond: 2_000_000)
        try await setup.waitForPartial(atLeast: 1 << 20)
        let stopped = try await Self.stop(agent)
        #expect(stopped.status == 0 && stopped.seconds < Double(stopBound.components.seconds), "\(stopped) \(Self.output(setup.directory))")
        let row = try await Self.downloadRow(setup.home, Self.atlas)
        #expect(row?["state"] as? String == "waiting", "\(String(describing: row))")
        let kept = row?["bytesDone"] as? Int ?? 0
        #expect(kept >= 1 << 20 && setup.partialSize() == kept)
        let next = try Self.startAgent(home: setup.home, in: setup.directory, log: "next")
        let took = try await Self.eventually(within: 30) { Self.installed(setup.home, Self.atlas) }
        #expect(took != nil, "\(Self.output(setup.directory, "next"))")
        try await setup.expectInstalledByteExact()
        #expect(Setup.received(Self.output(setup.directory, "next")) <= setup.archiveSize - kept, "the next agent started again from zero")
        _ = try await Self.stop(next)
        _ = await setup.server.stop()
    }

    @Test("the store is down, then back: the waiting download completes at its retry, byte-exact, bytes kept")
    func serverComesBack() async throws {
        let setup = try await Setup()
        // A first agent gets part of the archive, then the store goes away under it.
        let agent = try Self.startAgent(home: setup.home, in: setup.directory, bytesPerSecond: 2_000_000)
        try await setup.waitForPartial(atLeast: 1 << 20)
        let port = URLComponents(string: setup.server.url)?.port ?? 0
        // Killed, not stopped: a graceful stop would finish the transfer in flight first.
        setup.server.signal(SIGKILL)
        try await offCooperativePool { setup.server.process.waitForExit() }
        let waiting = try await Self.eventually(within: 10) { (try await Self.downloadRow(setup.home, Self.atlas)?["state"] as? String) == "waiting" }
        #expect(waiting != nil, "\(Self.output(setup.directory))")
        let kept = setup.partialSize()
        #expect(kept >= 1 << 20)
        try await Task.sleep(for: .seconds(3))
        let attemptsWhileDown = try await Self.downloadRow(setup.home, Self.atlas)?["attempts"] as? Int ?? 0
        let back = try await ServerProcess.start(setup.store, extraArguments: ["--port", String(port)], log: setup.directory.path("server-back.log"))
        let took = try await Self.eventually(within: 15) { Self.installed(setup.home, Self.atlas) }
        #expect(took != nil && (took ?? 99) < 10, "\(Self.output(setup.directory))")
        try await setup.expectInstalledByteExact()
        #expect(attemptsWhileDown <= 2, "a refused connection burnt \(attemptsWhileDown) attempts")
        let received = Setup.received(Self.output(setup.directory))
        #expect(received < setup.archiveSize + (1 << 20), "the bytes of the first attempt were not kept: \(received)")
        _ = try await Self.stop(agent)
        _ = await back.stop()
    }

    @Test("a refund on the store removes the book from the library within 3 s, with the agent alone running", arguments: TestEngine.all)
    func refundRemovesBook(engine: TestEngine) async throws {
        // On PostgreSQL the refund goes through another instance than the one the agent waits on.
        let stores = try await Instances(engine)
        let (directory, a, b, storeB) = (stores.directory, stores.a, stores.b, stores.storeB)
        let home = directory.path("home").path
        #expect(try await KioskCommand.run(["buy", Self.book, "--server", a.url], environment: ["KIOSK_HOME": home]).status == 0)
        #expect(Self.installed(home, Self.book))
        let agent = try Self.startAgent(home: home, in: directory, extra: ["--sync-interval", "600"])
        try await Task.sleep(for: .seconds(2))
        let transaction = try await Self.transactionID(of: Self.book, home: home)
        let refunded = try await KioskCommand.run(["admin", "refund", transaction, "--server", b.url, "--data", storeB.data.path])
        #expect(refunded.status == 0, "\(refunded.stderr)")
        let took = try await Self.eventually(within: 3) { !Self.installed(home, Self.book) }
        #expect(took != nil, "still installed 3 s after the refund: \(Self.output(directory))")
        // The agent says so once the round that removed it ends: a moment after the folder goes.
        let said = try await Self.eventually(within: 3) { Self.output(directory).contains("\(Self.book): the store revoked this purchase") }
        #expect(said != nil, "\(Self.output(directory))")
        _ = try await Self.stop(agent)
        await stores.stop()
    }

    @Test("a book bought on another device of the account is installed by the agent within 3 s, with no command run", arguments: TestEngine.all)
    func otherDevicePurchaseArrives(engine: TestEngine) async throws {
        // On PostgreSQL the other device buys through another instance than the one the agent waits on.
        let stores = try await Instances(engine)
        let (directory, a, b) = (stores.directory, stores.a, stores.b)
        let home = directory.path("home").path
        let phone = directory.path("phone").path
        #expect(try await KioskCommand.run(["buy", Self.book, "--server", a.url], environment: ["KIOSK_HOME": home]).status == 0)
        let shown = try await KioskCommand.run(["account", "--show-token"], environment: ["KIOSK_HOME": home]).stdout
        let token = try #require(shown.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(while: \.isHexDigit)) })
        let linked = try await KioskCommand.run(["account", "link", token, "--server", b.url], environment: ["KIOSK_HOME": phone])
        #expect(linked.status == 0, "\(linked)")
        let agent = try Self.startAgent(home: home, in: directory, extra: ["--sync-interval", "600"])
        try await Task.sleep(for: .seconds(2))
        let bought = try await KioskCommand.run(["buy", Self.otherBook, "--no-download"], environment: ["KIOSK_HOME": phone])
        #expect(bought.status == 0, "\(bought)")
        let took = try await Self.eventually(within: 10) { Self.installed(home, Self.otherBook) }
        #expect(took != nil && (took ?? 99) < 3, "the other device's purchase reached the agent after \(String(describing: took)) s: \(Self.output(directory))")
        #expect(Self.output(directory).contains("\(Self.otherBook): bought on another device"), "\(Self.output(directory))")
        // One charge: the device that did not buy it never sent a purchase.
        let listed = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": home]).stdout
        let rows = try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] ?? []
        #expect(rows.filter { $0["productId"] as? String == Self.otherBook }.count == 1, "\(listed)")
        _ = try await Self.stop(agent)
        await stores.stop()
    }

    @Test("a refund while the agent downloads the book stops the transfer within 3 s, and the book is never installed")
    func refundMidDownload() async throws {
        let setup = try await Setup()
        let agent = try Self.startAgent(home: setup.home, in: setup.directory, bytesPerSecond: 1_000_000)
        try await setup.waitForPartial(atLeast: 1 << 20)
        let transaction = try await Self.transactionID(of: Self.atlas, home: setup.home)
        let refunded = try await KioskCommand.run(["admin", "refund", transaction, "--server", setup.server.url, "--data", setup.store.data.path])
        #expect(refunded.status == 0, "\(refunded.stderr)")
        let stopped = try await Self.eventually(within: 3) { try await Self.downloadRow(setup.home, Self.atlas) == nil }
        #expect(stopped != nil, "the transfer went on after the refund: \(Self.output(setup.directory))")
        // Long enough for the rest of the archive to have arrived at that speed, had it gone on.
        try await Task.sleep(for: .seconds(Double(setup.archiveSize) / 1_000_000 + 1))
        #expect(!Self.installed(setup.home, Self.atlas), "\(Self.output(setup.directory))")
        #expect(!Self.output(setup.directory).contains("installed \(Self.atlas)"), "\(Self.output(setup.directory))")
        #expect(Self.output(setup.directory).contains("\(Self.atlas): the store revoked this purchase"))
        _ = try await Self.stop(agent)
        _ = await setup.server.stop()
    }

    @Test("kiosk agent --once against a store that is down says so and exits 3; a sync interval under a second or beyond a week is refused")
    func onceUnreachable() async throws {
        let directory = try TemporaryDirectory()
        let home = directory.path("home").path
        let once = try await KioskCommand.run(["agent", "--once", "--server", "http://127.0.0.1:1"], environment: ["KIOSK_HOME": home])
        #expect(once.status == 3, "\(once)")
        #expect(once.stderr == "kiosk: the store at http://127.0.0.1:1 cannot be reached; nothing was tried, the next run tries again\n", "\(once.stderr)")
        for interval in ["0.001", "1e308", "inf"] {
            let refused = try await KioskCommand.run(["agent", "--sync-interval", interval], environment: ["KIOSK_HOME": home])
            #expect(refused.status == 2 && refused.stderr.hasPrefix("kiosk: --sync-interval must be between 1 and 604800 seconds (a week)"), "\(interval): \(refused)")
        }
        let fetch = try await KioskCommand.run(["fetch", "http://127.0.0.1:1/x", "--max-time", "1e308", "-o", directory.path("x").path])
        #expect(fetch.status == 2 && fetch.stderr.hasPrefix("kiosk: --max-time must be a number of seconds above 0 and at most 2592000 (30 days)"), "\(fetch)")
    }

    @Test("an Ask to Buy approved by the operator is installed by the agent, with no command run")
    func approvalInstalled() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let asked = try await KioskCommand.run(["buy", Self.book, "--payment", "defer", "--server", server.url], environment: ["KIOSK_HOME": home])
        #expect(asked.status == 3 || asked.status == 0, "\(asked)")
        let agent = try Self.startAgent(home: home, in: directory, extra: ["--sync-interval", "600"])
        try await Task.sleep(for: .seconds(2))
        let transaction = try await Self.transactionID(of: Self.book, home: home)
        let approved = try await KioskCommand.run(["admin", "approve", transaction, "--server", server.url, "--data", store.data.path])
        #expect(approved.status == 0, "\(approved.stderr)")
        let took = try await Self.eventually(within: 5) { Self.installed(home, Self.book) }
        #expect(took != nil, "\(Self.output(directory))")
        _ = try await Self.stop(agent)
        _ = await server.stop()
    }

    @Test("kiosk buy while the agent runs: one charge, one download, one install")
    func buyBesideAgent() async throws {
        let setup = try await Setup(buy: false)
        let agent = try Self.startAgent(home: setup.home, in: setup.directory)
        try await Task.sleep(for: .seconds(1))
        let bought = try await KioskCommand.run(["buy", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(bought.status == 0, "\(bought)")
        try await Task.sleep(for: .seconds(2))
        try await setup.expectInstalledByteExact()
        let received = Setup.received(bought.stdout) + Setup.received(Self.output(setup.directory))
        #expect(received == setup.archiveSize, "downloaded more than once: \(received)")
        #expect(try TwoProcessCommandTests.charges(setup).values.reduce(0, +) == 1)
        // Whichever of the two claims the download installs it (the agent may, woken by the purchase's
        // change); between them, once.
        let installs = (bought.stdout + Self.output(setup.directory)).components(separatedBy: "installed \(Self.atlas) in").count - 1
        #expect(installs == 1, "\(bought.stdout)\n\(Self.output(setup.directory))")
        _ = try await Self.stop(agent)
        _ = await setup.server.stop()
    }

    @Test("a new issue of a subscribed series and a new version of an installed book arrive with the agent alone running")
    func publishedContentArrives() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let environment = ["KIOSK_HOME": home]
        #expect(try await KioskCommand.run(["buy", Self.book, "--server", server.url], environment: environment).status == 0)
        let subscribed = try await KioskCommand.run(["buy", Self.subscription], environment: environment)
        #expect(subscribed.status == 0, "\(subscribed)")
        #expect(Self.installed(home, Self.currentIssue), "buying a subscription downloads the issue it covers now: \(subscribed.stdout)")
        let agent = try Self.startAgent(home: home, in: directory)
        // The publisher adds issue 4 (published today) and a new edition of the book, then reloads.
        let issue4 = store.content.appendingPathComponent("magazines/harbor-monthly/issue-04")
        try FileManager.default.createDirectory(at: issue4, withIntermediateDirectories: true)
        try Data("# Harbor Monthly, issue 4\n".utf8).write(to: issue4.appendingPathComponent("index.md"))
        let today = SubscriptionCoverage.day(Date())
        try store.editCatalog("magazines.json") { products in
            var issue = products[2]
            issue["id"] = "com.kiosk.magazines.harbor-monthly.issue-04"
            issue["issueNumber"] = 4
            issue["publicationDate"] = today
            issue["content"] = ["path": "magazines/harbor-monthly/issue-04", "format": "tar.gz"]
            products.append(issue)
        }
        let bookFolder = store.content.appendingPathComponent("books/small-engines")
        let edition = "second edition \(UUID())\n"
        try Data(edition.utf8).write(to: bookFolder.appendingPathComponent("edition.txt"))
        server.signal(SIGHUP)
        let took = try await Self.eventually(within: 20) {
            Self.installed(home, "com.kiosk.magazines.harbor-monthly.issue-04")
                && (try? String(contentsOfFile: home + "/Library/\(Self.book)/edition.txt", encoding: .utf8)) == edition
        }
        #expect(took != nil, "\(Self.output(directory))")
        _ = try await Self.stop(agent)
        _ = await server.stop()
    }

    @Test("a catalog reload wakes the waiting agent: a new issue of its subscription is installed within 2 s, with a sync interval of 10 minutes", arguments: TestEngine.all)
    func reloadWakesAgent(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        let a = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("a.log"))
        // On PostgreSQL the agent waits on B (same files, its own data folder) and A is the one
        // told to reload: B hears of it from A and reloads too.
        let b = extra.isEmpty ? a : try await ServerProcess.start(store, extraArguments: extra + ["--data", directory.path("b-data").path], log: directory.path("b.log"))
        let home = directory.path("home").path
        let subscribed = try await KioskCommand.run(["buy", Self.subscription, "--server", b.url], environment: ["KIOSK_HOME": home])
        #expect(subscribed.status == 0, "\(subscribed)")
        let agent = try Self.startAgent(home: home, in: directory, extra: ["--sync-interval", "600"])
        try await Task.sleep(for: .seconds(2))
        let issue4 = "com.kiosk.magazines.harbor-monthly.issue-04"
        let folder = store.content.appendingPathComponent("magazines/harbor-monthly/issue-04")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("# Harbor Monthly, issue 4\n".utf8).write(to: folder.appendingPathComponent("index.md"))
        try store.editCatalog("magazines.json") { products in
            var issue = products[2]
            issue["id"] = issue4
            issue["issueNumber"] = 4
            issue["publicationDate"] = SubscriptionCoverage.day(Date())
            issue["content"] = ["path": "magazines/harbor-monthly/issue-04", "format": "tar.gz"]
            products.append(issue)
        }
        a.signal(SIGHUP)
        // From the moment the instance the agent waits on serves the new catalog.
        let served = try await Self.eventually(within: 20) {
            String(decoding: try await StoreHTTP(baseURL: b.url).send("GET", "/v1/catalog").body, as: UTF8.self).contains(issue4)
        }
        #expect(served != nil, "B never served the reloaded catalog: \(b.log)")
        let took = try await Self.eventually(within: 10) { Self.installed(home, issue4) }
        #expect(took != nil && (took ?? 99) <= 2, "installed \(String(describing: took)) s after the reload: \(Self.output(directory))")
        _ = try await Self.stop(agent)
        _ = await a.stop()
        if !extra.isEmpty { _ = await b.stop() }
    }
}
