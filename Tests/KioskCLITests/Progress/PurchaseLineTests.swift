import Foundation
import GRDB
import KioskTestSupport
import Testing

/// What a person meets at the command line (issue 30): each point through the real `kiosk`
/// against a live store, errors asserted by their whole line.
@Suite("What a reader meets: kiosk as people expect it")
struct ReaderCommandTests {
    typealias Setup = PurchaseCommandTests.Setup
    static let book = "com.kiosk.books.small-engines"
    static let pack5 = "com.kiosk.credits.pack-5"

    static func admin(_ setup: Setup, _ arguments: String...) async throws -> KioskCommand.Result {
        try await KioskCommand.run(["admin"] + arguments + ["--server", setup.server.url, "--data", setup.store.data.path])
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// A port nothing listens on.
    static let deadServer = "http://127.0.0.1:9"

    // MARK: 1. Ask to Buy twice

    @Test("a second Ask to Buy of the same product says it is already pending (exit 0): nothing new is sent and no row is left behind")
    func askToBuyTwice() async throws {
        let setup = try await Setup()
        let first = try await setup.kiosk("buy", Self.book, "--payment", "defer")
        #expect(first.status == 0, "\(first.stderr)")
        let transaction = try #require(first.stdout.split(separator: ":").first.map { String($0.dropFirst("transaction ".count)) })
        #expect(first.stdout == "transaction \(transaction): \(Self.book) is waiting for approval (Ask to Buy); nothing was charged yet\n")

        let second = try await setup.kiosk("buy", Self.book, "--payment", "defer")
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout == "transaction \(transaction): \(Self.book) is already waiting for approval (Ask to Buy); nothing new was sent\n")
        #expect(second.stderr == "")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["deferred"])

        // Nothing left to be sent later as a new request: replay finds only the one request.
        let resume = try await setup.kiosk("resume")
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["deferred"])
        let pending = try await Self.admin(setup, "pending", "--json")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(pending.stdout.utf8)) as? [[String: Any]], "\(pending.stdout) \(pending.stderr)")
        #expect(rows.count == 1)

        // Approved, the one request is delivered.
        #expect(try await Self.admin(setup, "approve", transaction).status == 0)
        let after = try await setup.kiosk("resume")
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try await setup.transactions().map { $0["state"] as? String } == ["finished"])
    }

    // MARK: 2. The remembered server and kiosk config

    @Test("a --server whose first request failed is not remembered; kiosk config gets, sets and unsets it, naming the database")
    func rememberedServer() async throws {
        let setup = try await Setup()
        let database = "\(setup.home)/kiosk.sqlite"
        let wrong = try await setup.kiosk("sync", "--server", Self.deadServer)
        #expect(wrong.status == 1)
        #expect(wrong.stderr == "kiosk: cannot reach \(Self.deadServer)/v1/catalog (nothing answers at that address and port (connection refused or unreachable)); check the server is running and try again\n")
        #expect(try await setup.kiosk("config", "get", "server").stdout == "server = \(setup.server.url)  (in \(database))\n")
        #expect(try await setup.kiosk("sync").status == 0)

        // A fresh home remembers nothing from a failed first request.
        let fresh = ["KIOSK_HOME": setup.directory.path("fresh").path]
        #expect(try await KioskCommand.run(["sync", "--server", Self.deadServer], environment: fresh).status == 1)
        #expect(try await KioskCommand.run(["config", "get", "server"], environment: fresh).stdout
                == "server = (unset)  (in \(setup.directory.path("fresh").path)/kiosk.sqlite)\n")
        let none = try await KioskCommand.run(["sync"], environment: fresh)
        #expect(none.stderr == "kiosk: no server is known yet; pass --server URL or set KIOSK_SERVER\n")

        let set = try await setup.kiosk("config", "set", "server", setup.server.url + "/")
        #expect(set.stdout == "server = \(setup.server.url)  (saved in \(database))\n")
        let ftp = try await setup.kiosk("config", "set", "server", "ftp://example.com")
        #expect(ftp.status == 2)
        #expect(ftp.stderr == "kiosk: ftp:// is not supported; a Kiosk store is reached over http:// or https:// (e.g. --server http://127.0.0.1:8080) (--help shows the usage)\n")
        #expect(try await setup.kiosk("config", "payments", "off").stdout == "payments off\n")
        #expect(try await setup.kiosk("config").stdout == """
            server = \(setup.server.url)  (in \(database))
            payments = off  (in \(database))
            (settings in \(database))

            """)
        #expect(try await setup.kiosk("config", "unset", "payments").stdout == "payments unset  (in \(database))\n")
        #expect(try await setup.kiosk("config", "get", "payments").stdout == "payments = on  (the default; in \(database))\n")
        #expect(try await setup.kiosk("config", "unset", "server").stdout == "server unset  (in \(database))\n")
        #expect(try await setup.kiosk("sync").status == 1)
    }

    // MARK: 3. Not a Kiosk store, TLS, other schemes

    @Test("a web page from something that is not a Kiosk store is one line, never the page; https to a plain HTTP server and ftp:// are one line each")
    func notAStore() async throws {
        let directory = try TemporaryDirectory()
        let home = ["KIOSK_HOME": directory.path("home").path]
        let page = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1>\n<p>nginx</p></body></html>\n"
        try await HostileServer.run { server, url in
            server.catalog = HostileServer.Answer(status: .notFound, headers: [.contentType: "text/html"]) { AnyIterator([Data(page.utf8)].makeIterator()) }
            let missing = try await KioskCommand.run(["sync", "--server", url], environment: home)
            #expect(missing.status == 1)
            #expect(missing.stderr == "kiosk: \(url)/v1/catalog answered 404 with a web page (\"404 Not Found\"), not a Kiosk store's JSON; check the server URL (--server, or kiosk config get server) names a Kiosk store\n")

            server.catalog = HostileServer.Answer(status: .ok, headers: [.contentType: "text/html"]) { AnyIterator([Data(page.utf8)].makeIterator()) }
            let index = try await KioskCommand.run(["sync", "--server", url], environment: home)
            #expect(index.status == 1)
            #expect(index.stderr == "kiosk: \(url)/v1/catalog answered 200 with a web page, not a Kiosk store's JSON; check the server URL (--server, or kiosk config get server) names a Kiosk store\n")
            #expect(try await KioskCommand.run(["config", "get", "server"], environment: home).stdout.hasPrefix("server = (unset)"))

            let tls = url.replacingOccurrences(of: "http://", with: "https://")
            let handshake = try await KioskCommand.run(["sync", "--server", tls], environment: home)
            #expect(handshake.status == 1)
            #expect(handshake.stderr == "kiosk: cannot reach \(tls)/v1/catalog (the TLS (https) handshake failed; if the server speaks plain HTTP, use http://); check the server is running and try again\n")
        }
        let started = ContinuousClock.now
        let ftp = try await KioskCommand.run(["sync", "--server", "ftp://127.0.0.1/store"], environment: home)
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(ftp.status == 2)
        #expect(ftp.stderr == "kiosk: --server: ftp:// is not supported; a Kiosk store is reached over http:// or https:// (e.g. --server http://127.0.0.1:8080) (--help shows the usage)\n")
        let fetch = try await KioskCommand.run(["fetch", "ftp://127.0.0.1/file"], in: directory.url)
        #expect(fetch.status == 2)
        #expect(fetch.stderr == "kiosk: ftp:// is not supported; kiosk fetch downloads http:// and https:// URLs (--help shows the usage)\n")
    }

    // MARK: 4. kiosk fetch as curl and wget users type it

    @Test("fetch of a 404 is one line with the status and leaves no file; a missing folder needs --create-dirs; -C -, --retry, -s, --max-time and --json work")
    func fetchLikeCurl() async throws {
        let directory = try TemporaryDirectory()
        let work = directory.path("work")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        try await HostileServer.run { server, url in
            server.content = HostileServer.Answer(status: .notFound, headers: [.contentType: "text/html"]) {
                AnyIterator([Data("<html><body>\n<h1>Not Found</h1>\n</body></html>\n".utf8)].makeIterator())
            }
            let missing = try await KioskCommand.run(["fetch", url + "/v1/content/gone", "-o", "gone.bin"], in: work)
            #expect(missing.status == 1)
            #expect(missing.stderr == "kiosk: \(url)/v1/content/gone answered 404: Not Found; nothing was saved\n")
            #expect(missing.stdout == "")
            #expect(try FileManager.default.contentsOfDirectory(atPath: work.path) == [])

            let nowhere = try await KioskCommand.run(["fetch", url + "/a.txt", "-o", work.path + "/no/such/dir/a.txt"], in: work)
            #expect(nowhere.status == 1)
            #expect(nowhere.stderr == "kiosk: the folder \(work.path)/no/such/dir does not exist; create it, or pass --create-dirs\n")
            #expect(!FileManager.default.fileExists(atPath: work.path + "/no"))
            let created = try await KioskCommand.run(["fetch", url + "/a.txt", "-o", work.path + "/no/such/dir/a.txt", "--create-dirs", "-C", "-", "--retry", "2", "-s"], in: work)
            #expect(created.status == 0, "\(created.stderr)")
            #expect(created.stdout == "" && created.stderr == "")
            #expect(try String(contentsOfFile: work.path + "/no/such/dir/a.txt", encoding: .utf8) == "pwned\n")

            let json = try await KioskCommand.run(["fetch", url + "/b.txt", "--continue", "-q", "--json"], in: work)
            #expect(json.status == 0, "\(json.stderr)")
            let document = try Self.json(json.stdout)
            #expect(Set(document.keys) == ["url", "path", "size", "sha256", "bytesReceived", "attempts"])
            #expect(document["size"] as? Int == 6 && document["path"] as? String == work.path + "/b.txt")

            server.content = HostileServer.endless()
            let slow = try await KioskCommand.run(["fetch", url + "/v1/content/endless", "-o", "endless.bin", "--max-time", "1"],
                                                  environment: ["KIOSK_MAX_RECEIVE_SPEED": "100000"], in: work)
            #expect(slow.status == 3)
            #expect(slow.stderr.hasSuffix("kiosk: \(url)/v1/content/endless: gave up after 1 s (--max-time); the partial file is kept, run the same command again to continue\n"), "\(slow.stderr)")
            #expect(FileManager.default.fileExists(atPath: work.path + "/endless.bin.partial"))
        }
    }

    // MARK: 5. The purchase line when it is true

    @Test("off a terminal, buy says the receipt is saved before the download ends; inside kiosk resume nothing says to run kiosk resume")
    func purchaseLineBeforeDownload() async throws {
        let setup = try await DownloadCommandTests.Setup(buy: false)
        let buy = try setup.startSlow(["buy", DownloadCommandTests.atlas], log: "buy")
        try await setup.waitForPartial(atLeast: 1 << 20)
        #expect(buy.isRunning)
        let early = setup.output("buy").stdout
        #expect(early.range(of: #"^transaction txn_[0-9a-f]+: purchased com\.kiosk\.books\.atlas; receipt saved\n$"#, options: .regularExpression) != nil, "\(early)")
        kill(buy.processIdentifier, SIGINT)
        try await offCooperativePool { buy.waitUntilExit() }
        #expect(buy.terminationStatus == 3)
        let lines = setup.output("buy").stdout.split(separator: "\n")
        #expect(lines.first.map(String.init) == early.trimmingCharacters(in: .newlines))
        #expect(lines.filter { $0.contains("receipt saved") }.count == 1)
        #expect(lines.last?.hasPrefix("\(DownloadCommandTests.atlas): interrupted;") == true && lines.last?.hasSuffix("kiosk resume continues from there") == true)

        let resume = try setup.startSlow(["resume"], log: "resume")
        try await Task.sleep(for: .milliseconds(800))
        kill(resume.processIdentifier, SIGINT)
        try await offCooperativePool { resume.waitUntilExit() }
        let said = setup.output("resume")
        #expect(resume.terminationStatus == 3)
        #expect(said.stdout.contains("\(DownloadCommandTests.atlas): interrupted;") && said.stdout.contains("the same command continues from there"), "\(said)")
        #expect(!said.stdout.contains("kiosk resume") && !said.stderr.contains("kiosk resume"), "\(said)")
        _ = await setup.server.stop()
    }

    /// A command run on a pseudo-terminal (util-linux `script`), and what that terminal shows: the
    /// bytes it wrote, with carriage returns and erase-to-end-of-line applied as a terminal does.
    struct Terminal {
        let process = Process()
        let log: URL

        init(_ command: String, log: URL) throws {
            self.log = log
            process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            process.arguments = ["-qfec", command, log.path]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        /// The program `script` runs (its only child).
        var child: pid_t? {
            let pid = process.processIdentifier
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").first.flatMap { pid_t(String($0)) }
        }

        /// The screen's lines, oldest first, without script's own header and footer.
        func screen() -> [String] {
            // Unicode scalars, not Characters: "\r\n" is one Character in Swift.
            let text = Array(((try? String(contentsOf: log, encoding: .utf8)) ?? "").unicodeScalars)
            var lines: [String] = []
            var line: [Unicode.Scalar] = []
            var cursor = 0
            var index = 0
            func endLine() {
                let done = String(String.UnicodeScalarView(line))
                if !done.hasPrefix("Script started on "), !done.hasPrefix("Script done on ") { lines.append(done) }
                line = []
                cursor = 0
            }
            while index < text.count {
                let scalar = text[index]
                if scalar == "\u{1B}", index + 2 < text.count, text[index + 1] == "[", text[index + 2] == "K" {
                    line.removeSubrange(min(cursor, line.count)...)
                    index += 3
                    continue
                }
                index += 1
                switch scalar {
                case "\n": endLine()
                case "\r": cursor = 0
                default:
                    if cursor < line.count { line[cursor] = scalar } else { line.append(scalar) }
                    cursor += 1
                }
            }
            if !line.isEmpty { endLine() }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
    }

    @Test("on a terminal: progress is one line updated in place, the purchase line comes before the download ends, and Ctrl-C leaves one line and a resumable download",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func terminal() async throws {
        let setup = try await DownloadCommandTests.Setup(buy: false)
        let terminal = try Terminal(
            "exec env TERM=xterm KIOSK_HOME=\(setup.home) KIOSK_MAX_RECEIVE_SPEED=1500000 \(KioskCommand.executable.path) buy \(DownloadCommandTests.atlas)",
            log: setup.directory.path("terminal.log"))
        try await setup.waitForPartial(atLeast: 2 << 20)
        try await Task.sleep(for: .milliseconds(600))
        let during = terminal.screen()
        #expect(during.count == 2, "\(during)")
        #expect(during.first?.range(of: #"^transaction txn_[0-9a-f]+: purchased com\.kiosk\.books\.atlas; receipt saved$"#, options: .regularExpression) != nil, "\(during)")
        #expect(during.last?.range(of: #"^com\.kiosk\.books\.atlas: [0-9.]+ MiB of [0-9.]+ MiB \([0-9]+%\)"#, options: .regularExpression) != nil, "\(during)")

        let kiosk = try #require(terminal.child)
        kill(kiosk, SIGINT)
        try await offCooperativePool { terminal.process.waitUntilExit() }
        #expect(terminal.process.terminationStatus == 3)
        let after = terminal.screen()
        #expect(after.count == 3 && after.first == during.first && after.dropFirst().first?.hasPrefix("received ") == true, "\(after)")
        #expect(after.last?.hasPrefix("\(DownloadCommandTests.atlas): interrupted; ") == true, "\(after)")
        #expect(!after.contains { $0.contains("/s") }, "the progress line was left on the screen: \(after)")
        let kept = setup.partialSize()
        #expect(kept >= 2 << 20)
        let resume = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(DownloadCommandTests.Setup.received(resume.stdout) == setup.archiveSize - kept)
        _ = await setup.server.stop()
    }

    // MARK: 6. kiosk account

    @Test("account hides the token unless --show-token, creates nothing by looking, and link names what it replaces and wants --force over purchases")
    func account() async throws {
        let setup = try await Setup()
        let look = try await setup.kiosk("account")
        #expect(look.status == 0, "\(look.stderr)")
        #expect(look.stdout == "no account on this device yet; the first purchase creates one (or use an existing one with kiosk account link TOKEN)\n")
        #expect(try await setup.kiosk("balance").stdout == "0 credits\n")
        #expect(try await Self.admin(setup, "accounts", "--json").stdout == "[]\n")

        #expect(try await setup.kiosk("buy", Self.pack5).status == 0)
        let shown = try await setup.kiosk("account")
        #expect(!shown.stdout.contains("token: ") || shown.stdout.contains("token: hidden (kiosk account --show-token prints it)\n"))
        let account = try #require(shown.stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        let withToken = try await setup.kiosk("account", "--show-token")
        let token = try #require(withToken.stdout.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(64)) })
        #expect(withToken.stdout.contains("token: \(token)  (link another device with `kiosk account link TOKEN`)\n"))
        let document = try Self.json(try await setup.kiosk("account", "--json").stdout)
        #expect(Set(document.keys) == ["accountId", "credits", "owned", "subscriptions"] && document["credits"] as? Int == 5)
        #expect(try Self.json(try await setup.kiosk("balance", "--json").stdout) as NSDictionary == ["accountId": account, "credits": 5] as NSDictionary)

        // A second device that bought credits of its own.
        let second = ["KIOSK_HOME": setup.directory.path("second").path]
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", setup.server.url], environment: second).status == 0)
        let own = try #require(try await KioskCommand.run(["account"], environment: second).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        let refused = try await KioskCommand.run(["account", "link", token], environment: second)
        #expect(refused.status == 1)
        #expect(refused.stderr == "kiosk: this device's account \(own) owns 0 purchase(s) and 5 credits, which this device would no longer reach; keep its token first (kiosk account --show-token), then link with --force\n")
        let forced = try await KioskCommand.run(["account", "link", token, "--force"], environment: second)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stdout == "linked to account \(account), replacing account \(own) on this device (which owns 0 purchase(s) and 5 credits); run `kiosk restore` to bring back its purchases\n")
        #expect(try await KioskCommand.run(["account", "link", token], environment: second).stdout == "this device already uses account \(account); nothing changed\n")
    }

    // MARK: 7. resume, restore and refunds say what is true

    @Test("resume exits 1 naming a download that failed for good, then and at the next resume")
    func resumeFailedForGood() async throws {
        let setup = try await DownloadCommandTests.Setup(megabytes: 1)
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        // A receipt the store refuses for good: the download can never succeed as it stands.
        try await database.write { try $0.execute(sql: "UPDATE download SET receipt = 'not-a-receipt'") }
        let failed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
        let lines = failed.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasPrefix("kiosk: \(DownloadCommandTests.atlas): ") == true, "\(failed.stderr)")
        let again = try await KioskCommand.run(["resume", "--json"], environment: ["KIOSK_HOME": setup.home])
        #expect(again.status == 1)
        let reason = try await database.read { try String.fetchOne($0, sql: "SELECT lastError FROM download") } ?? ""
        #expect(again.stderr == "kiosk: \(DownloadCommandTests.atlas): failed for good earlier (\(reason)); kiosk restore downloads it again, kiosk cancel \(DownloadCommandTests.atlas) drops it\n")
        let document = try Self.json(again.stdout)
        #expect(document["outcome"] as? String == "failed" && document["failedEarlier"] as? [String] == [DownloadCommandTests.atlas])
        _ = await setup.server.stop()
    }

    @Test("restore of a product the operator removed for good says so instead of restored; a refunded credit pack does not speak of content")
    func withdrawnAndRefunded() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("buy", Self.book).status == 0)
        let pack = try Self.json(try await setup.kiosk("buy", Self.pack5, "--json").stdout)
        #expect(pack["outcome"] as? String == "complete" && pack["credits"] as? Int == 5 && pack["owned"] as? Bool == false)
        let transaction = try #require((pack["transaction"] as? [String: Any])?["transactionId"] as? String)
        let token = try await RetiredKeyCommandTests.token(setup)

        // The book leaves the catalog files, and the operator removes it on purpose (a withdrawn
        // book stays deliverable to its owners until then).
        try setup.store.editCatalog("books.json") { products in products.removeAll { $0["id"] as? String == Self.book } }
        setup.server.signal(SIGHUP)
        for _ in 0..<50 where !(try await Self.admin(setup, "products", "owners", Self.book).stdout.contains("owned by 1")) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let removed = try await Self.admin(setup, "products", "remove", Self.book, "--force")
        #expect(removed.status == 0 && removed.stdout.contains("1 account(s) owned it"), "\(removed)")
        for _ in 0..<50 where !(try await setup.kiosk("sync").stdout.contains("1 removed")) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let second = ["KIOSK_HOME": setup.directory.path("second").path]
        #expect(try await KioskCommand.run(["account", "link", token, "--server", setup.server.url], environment: second).status == 0)
        let restored = try await KioskCommand.run(["restore"], environment: second)
        #expect(restored.stdout.contains(try #require(restored.stdout.split(separator: "\n").first { $0.contains(Self.book) }.map(String.init))))
        let line = restored.stdout.split(separator: "\n").first { $0.contains(Self.book) }.map(String.init) ?? ""
        #expect(line.range(of: #"^  com\.kiosk\.books\.small-engines  \(transaction txn_[0-9a-f]+\): withdrawn from the store's catalog; its receipt is kept, but there is no content to download$"#,
                           options: .regularExpression) != nil, "\(restored.stdout)")

        #expect(try await Self.admin(setup, "refund", transaction, "--reason", "asked").status == 0)
        let balance = try await setup.kiosk("balance")
        #expect(balance.stdout == "0 credits\n")
        #expect(balance.stderr == "kiosk: \(Self.pack5): the store revoked this purchase of credits; no library content changed (kiosk balance shows what is left)\n")
    }

    @Test("a purchase saved offline on a second device, of a book the account bought meanwhile, is shown as not charged, in the list and as JSON", arguments: TestEngine.all)
    func freeRebuyShownFree(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var extra: [String] = []
        if case .postgres(let url)? = try await engine.freshDatabase() { extra = ["--database", url] }
        var server = try await ServerProcess.start(store, extraArguments: extra, log: directory.path("server.log"))
        let port = try #require(URLComponents(string: server.url)?.port)
        let first = ["KIOSK_HOME": directory.path("first").path]
        let second = ["KIOSK_HOME": directory.path("second").path]
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", server.url], environment: first).status == 0)
        let shown = try await KioskCommand.run(["account", "--show-token"], environment: first).stdout
        let token = try #require(shown.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(while: \.isHexDigit)) })
        #expect(try await KioskCommand.run(["account", "link", token, "--server", server.url], environment: second).status == 0)
        #expect(try await KioskCommand.run(["sync"], environment: second).status == 0)
        _ = await server.stop()
        let offline = try await KioskCommand.run(["buy", Self.book], environment: second)
        #expect(offline.stdout.contains("saved"), "\(offline)")
        server = try await ServerProcess.start(store, extraArguments: extra + ["--port", String(port)], log: directory.path("server-back.log"))
        #expect(try await KioskCommand.run(["buy", Self.book], environment: first).status == 0)
        // The second device's saved purchase reaches the store now: it owns the book already.
        #expect(try await KioskCommand.run(["sync"], environment: second).status == 0)
        let listed = try await KioskCommand.run(["transactions"], environment: second)
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.contains(Self.book) }, "\(listed)")
        #expect(line.hasSuffix("nothing charged (already owned)") && !line.contains("USD"), "\(line)")
        let json = try await KioskCommand.run(["transactions", "--json"], environment: second)
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
        let row = try #require(rows.first { $0["productId"] as? String == Self.book })
        #expect(row["price"] as? String == "nothing charged (already owned)", "\(row)")
        // What the first device paid is still shown as paid.
        let paid = try await KioskCommand.run(["transactions"], environment: first)
        #expect(paid.stdout.split(separator: "\n").first { $0.contains(Self.book) }?.contains("USD") == true, "\(paid.stdout)")
        _ = await server.stop()
    }

    // MARK: 8. --version, did you mean

    @Test("kiosk --version names the version, commit, Swift, libcurl and libarchive; a mistyped command gets a did-you-mean")
    func versionAndTypos() async throws {
        let version = try await KioskCommand.run(["--version"])
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(version.stdout)")
        #expect(lines.first?.range(of: #"^kiosk [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}(-dirty)?\)$"#, options: .regularExpression) != nil, "\(version.stdout)")
        #expect(lines.dropFirst().first?.hasPrefix("Swift 6.") == true)
        #expect(lines.dropFirst(2).first?.hasPrefix("libcurl/") == true)
        #expect(lines.dropFirst(3).first?.hasPrefix("libarchive ") == true)
        let server = try await KioskCommand.run(["--version"], program: KioskCommand.executable.deletingLastPathComponent().appendingPathComponent("kiosk-server"))
        let serverLines = server.stdout.split(separator: "\n").map(String.init)
        #expect(server.status == 0 && serverLines.count == 3, "\(server)")
        #expect(serverLines.first == lines.first?.replacingOccurrences(of: "kiosk ", with: "kiosk-server "), "one version and commit for the pair: \(server.stdout)")
        #expect(serverLines.dropFirst().first == lines.dropFirst().first && serverLines.last == lines.last)

        let typo = try await KioskCommand.run(["byu", "com.kiosk.books.small-engines"])
        #expect(typo.status == 2)
        #expect(typo.stderr == "kiosk: 'byu' is not a kiosk command; did you mean 'buy'? (kiosk --help lists them)\n")
        let serve = try await KioskCommand.run(["serv"])
        #expect(serve.stderr == "kiosk: 'serv' is not a kiosk command; did you mean 'serve'? (kiosk --help lists them)\n")
        let helpTypo = try await KioskCommand.run(["help", "byu"])
        #expect(helpTypo.status == 2 && helpTypo.stderr == typo.stderr, "\(helpTypo)")
        let nothing = try await KioskCommand.run(["frobnicate"])
        #expect(nothing.status == 2)
        #expect(nothing.stderr == "kiosk: 'frobnicate' is not a kiosk command; kiosk --help lists them\n")
    }
}
