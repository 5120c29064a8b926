import Crypto
import Foundation
import KioskCore
@testable import KioskServer
import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// KOReader's progress sync (kosync) against the store, with requests built as KOReader's kosync
/// plugin builds them (`plugins/kosync.koplugin/api.json` and `KOSyncClient.lua`: its paths,
/// methods, JSON bodies and headers), and the document named as KOReader names a file, by an
/// independent reckoning of `util.partialMD5` (dd and md5sum).
@Suite("Reading progress: KOReader's sync")
struct KOSyncTests: StoreSuite {
    static let epub = "com.kiosk.books.salt-and-stars"

    /// A request as the plugin sends it: `accept`, `x-auth-user` and `x-auth-key` (the MD5 of the password typed).
    static func kosync(_ http: StoreHTTP, _ method: String, _ path: String, user: String, password: String, body: [String: Any]? = nil) async throws -> (status: Int, json: [String: Any]) {
        let key = Insecure.MD5.hash(data: Data(password.utf8)).map { String(format: "%02x", $0) }.joined()
        var headers = [("accept", "application/vnd.koreader.v1+json"), ("x-auth-user", user), ("x-auth-key", key)]
        var data: Data?
        if let body {
            data = try JSONSerialization.data(withJSONObject: body)
            headers.append(("Content-Type", "application/json"))
        }
        let response = try await HTTPClient().send(HTTPRequest(method: method, url: http.baseURL + path, headers: headers, body: data))
        return (response.status, (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:])
    }

    /// KOReader's name for `file`, reckoned by the shell: 1 KiB at 0, 1 Ki, 4 Ki, … 1 Gi, up to
    /// the end, through md5sum.
    static func partialMD5(_ file: URL) throws -> String {
        let offsets = [0] + (0...10).map { 1_024 << (2 * $0) }
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0
        let reads = offsets.filter { $0 < size }.map { "dd if='\(file.path)' bs=1 skip=\($0) count=1024 status=none" }.joined(separator: "; ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "{ \(reads); } | md5sum"]
        let out = Pipe()
        process.standardOutput = out
        try process.runAlone()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return String(text.prefix(32))
    }

    /// Rewrites the EPUB at `file` with its first XHTML document one paragraph longer, as a
    /// revised edition is: the mimetype first and stored, everything else as it was.
    static func revise(_ file: URL) throws {
        let script = """
            import sys, zipfile, shutil
            path = sys.argv[1]
            with zipfile.ZipFile(path) as old:
                entries = [(info, old.read(info.filename)) for info in old.infolist()]
            first = next(info.filename for info, _ in entries if info.filename.endswith(".xhtml"))
            with zipfile.ZipFile(path + ".new", "w") as new:
                for info, data in entries:
                    if info.filename == first:
                        data = data.replace(b"</body>", b"<p>" + b"A revised paragraph. " * 200 + b"</p></body>", 1)
                    new.writestr(info, data, compress_type=info.compress_type)
            shutil.move(path + ".new", path)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script, file.path]
        try process.runAlone()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    /// A sync password made on `/account`, as a reader makes one.
    static func syncPassword(_ http: StoreHTTP, _ email: String) async throws -> String {
        let browser = try await WebSession.signIn(http, email, next: "/account")
        let page = String(decoding: try await browser.post("/account/sync-password", ["csrf": browser.csrf]).body, as: UTF8.self)
        return String(try #require(page.firstMatch(of: /shown this once: <code>([a-z0-9-]+)<\/code>/)?.1, "\(page)"))
    }

    @Test("a sync password made on /account signs KOReader in; a position written by one device is read by another; another account's password, a wrong one and an app token are refused", arguments: TestEngine.all)
    func twoDevices(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await WebSession.account(http, "ann@example.com")
            _ = try await WebSession.account(http, "bo@example.com")
            #expect(try await http.pay(Self.epub, token: ann.token).status == 200)
            let password = try await Self.syncPassword(http, "ann@example.com")
            let boPassword = try await Self.syncPassword(http, "bo@example.com")
            #expect(password.count == 19 && password != boPassword)

            let authorized = try await Self.kosync(http, "GET", "/users/auth", user: "ann@example.com", password: password)
            #expect(authorized.status == 200 && authorized.json["authorized"] as? String == "OK")
            for (user, typed) in [("ann@example.com", boPassword), ("ann@example.com", "wrong-pass-word-xxxx"), ("bo@example.com", password)] {
                #expect(try await Self.kosync(http, "GET", "/users/auth", user: user, password: typed).status == 401, "\(user)")
            }
            // Registering through the plugin is not how accounts are made: the answer it knows as a refusal.
            let registered = try await Self.kosync(http, "POST", "/users/create", user: "new@example.com", password: "x",
                                                   body: ["username": "new@example.com", "password": "x"])
            #expect(registered.status == 402)

            // Device one writes its place in the store's EPUB; device two reads it.
            let file = SampleStore.repository.appendingPathComponent("Content/publications/salt-and-stars.epub")
            let document = try Self.partialMD5(file)
            #expect(try await server.catalog.current.productsByDocument[document] == Self.epub, "the store names the file as KOReader does")
            let written = try await Self.kosync(http, "PUT", "/syncs/progress", user: "ann@example.com", password: password, body: [
                "document": document, "progress": "/body/DocFragment[12]/body/p[3]/text().17", "percentage": 0.42, "device": "Kobo", "device_id": "KOBO-1",
            ])
            #expect(written.status == 200 && written.json["document"] as? String == document && (written.json["timestamp"] as? Int ?? 0) > 0, "\(written.json)")
            let read = try await Self.kosync(http, "GET", "/syncs/progress/\(document)", user: "ann@example.com", password: password)
            #expect(read.status == 200 && read.json["progress"] as? String == "/body/DocFragment[12]/body/p[3]/text().17")
            #expect(read.json["percentage"] as? Double == 0.42 && read.json["device"] as? String == "Kobo" && read.json["device_id"] as? String == "KOBO-1")
            // The library in a browser says where the reader is.
            let library = try await WebSession.signIn(http, "ann@example.com", next: "/account/library").get("/account/library")
            #expect(String(decoding: library.body, as: UTF8.self).contains("continue at 42 %"))
            // Bo's shelf of places is his own; nothing is known of a book never synced.
            let bos = try await Self.kosync(http, "GET", "/syncs/progress/\(document)", user: "bo@example.com", password: boPassword)
            #expect(bos.status == 200 && bos.json.isEmpty, "\(bos.json)")
            // A later write wins, with the device that wrote it.
            _ = try await Self.kosync(http, "PUT", "/syncs/progress", user: "ann@example.com", password: password, body: [
                "document": document, "progress": "51", "percentage": 0.5, "device": "Phone", "device_id": "PHONE-2",
                // KOReader since April 2026 may send the document's metadata (its "Send document metadata"); it is not needed here.
                "metadata": ["filename": "salt-and-stars.epub", "title": "Salt and Stars", "authors": "A. Writer"],
            ])
            let newest = try await Self.kosync(http, "GET", "/syncs/progress/\(document)", user: "ann@example.com", password: password)
            #expect(newest.json["device"] as? String == "Phone" && newest.json["percentage"] as? Double == 0.5)
            // A bad body is a 400 naming the field; nothing is written.
            let bad = try await Self.kosync(http, "PUT", "/syncs/progress", user: "ann@example.com", password: password, body: [
                "document": document, "progress": "9", "percentage": 4.2, "device": "Phone", "device_id": "PHONE-2",
            ])
            #expect(bad.status == 400)
            #expect(try await Self.kosync(http, "GET", "/syncs/progress/\(document)", user: "ann@example.com", password: password).json["percentage"] as? Double == 0.5)
            // An OPDS Progression app and KOReader share the place: each reads what the other wrote.
            // (Dated tomorrow, taken as now: a clock ahead of the store's cannot make later places stale.)
            let tomorrow = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400))
            let progression = ##"{"modified": "\##(tomorrow)", "device": {"id": "urn:uuid:thorium-1", "name": "Thorium"}, "progression": 0.75, "references": ["#page=12"]}"##
            #expect(try await http.send("PUT", "/opds/progression/\(Self.epub)", token: ann.token, json: progression).status == 200)
            let fromProgression = try await Self.kosync(http, "GET", "/syncs/progress/\(document)", user: "ann@example.com", password: password)
            #expect(fromProgression.json["percentage"] as? Double == 0.75 && fromProgression.json["device"] as? String == "Thorium")
            #expect(fromProgression.json["progress"] as? String == "12", "a page is a page to KOReader")
            // A percentage alone, or a reference into a chapter, is no place KOReader can go to: it is told none.
            let chapter = #"{"modified": "2026-01-27T11:00:00.123Z", "device": {"id": "urn:uuid:thorium-1", "name": "Thorium"}, "progression": 0.76, "references": ["ch3.xhtml#p2"]}"#
            let older = try await http.send("PUT", "/opds/progression/\(Self.epub)", token: ann.token, json: chapter)
            #expect(older.status == 409, "fractional seconds are read, and January is older than now")
            _ = try await Self.kosync(http, "PUT", "/syncs/progress", user: "ann@example.com", password: password, body: [
                "document": document, "progress": "/body/DocFragment[20]", "percentage": 0.8, "device": "Kobo", "device_id": "KOBO-1",
            ])
            let fromKOReader = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/progression/\(Self.epub)", token: ann.token).body) as? [String: Any]
            #expect(fromKOReader?["progression"] as? Double == 0.8 && (fromKOReader?["device"] as? [String: Any])?["id"] as? String == "urn:kosync:KOBO-1")
            // A sync password is no API token.
            let key = Insecure.MD5.hash(data: Data(password.utf8)).map { String(format: "%02x", $0) }.joined()
            #expect(try await http.send("GET", "/v1/account", token: key).status == 401)
            #expect(try await http.send("GET", "/healthcheck").status == 200)
        }
    }

    @Test("sync passwords have a limit of their own: five are made, the sixth is refused in one line; they take no reading device's room, and one signed out makes room", arguments: TestEngine.all)
    func syncPasswordLimit(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.accounts.maxDevices = 2
            $0.rateLimits = .off
        }) { _, http, _ in
            let ann = try await WebSession.account(http, "ann@example.com")
            let first = try await WebSession.signIn(http, "ann@example.com", next: "/account")
            // A reload sends the form again: the password was shown once, and no second one is made.
            let formKey = try #require(String(decoding: try await first.get("/account").body, as: UTF8.self).firstMatch(of: /name="key" value="([0-9A-F-]+)"/)?.1)
            let shown = String(decoding: try await first.post("/account/sync-password", ["csrf": first.csrf, "key": String(formKey)]).body, as: UTF8.self)
            let reloaded = String(decoding: try await first.post("/account/sync-password", ["csrf": first.csrf, "key": String(formKey)]).body, as: UTF8.self)
            #expect(shown.contains("shown this once") && !reloaded.contains("shown this once") && reloaded.contains("This form was sent before"), "\(reloaded)")
            for _ in 1..<AccountPolicy.maxSyncPasswords { _ = try await Self.syncPassword(http, "ann@example.com") }
            // (Each of those signed in a browser of its own, which signs the last one out.)
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account")
            let refused = try await browser.post("/account/sync-password", ["csrf": browser.csrf])
            let page = String(decoding: refused.body, as: UTF8.self)
            #expect(refused.status == 409 && page.contains("the account has 5 sync passwords"), "\(refused.status) \(page)")
            // The account's app and its browser fill the two reading devices; the five passwords took none.
            #expect(try await SignInTests.signIn(http, "ann@example.com", device: "tablet").status == 409, "the limit of two holds for devices")
            let devices = try await http.send("GET", "/v1/devices", token: ann.token).decode(DeviceList.self).devices
            let passwords = devices.filter { $0.kind == "sync" }
            #expect(passwords.map(\.name) == (1...5).map { "KOReader progress sync \($0)" }, "each told apart by its number")
            let accountPage = String(decoding: try await browser.get("/account").body, as: UTF8.self)
            #expect(devices.filter(\.countsAsDevice).count == 2 && accountPage.contains("2 of at most 2"), "sync passwords are not devices")
            let sync = try #require(passwords.first)
            #expect(try await http.send("DELETE", "/v1/devices/\(sync.id)", token: ann.token).status == 200)
            #expect(!String(decoding: try await browser.post("/account/sync-password", ["csrf": browser.csrf]).body, as: UTF8.self).contains("5 sync passwords"))
        }
    }

    @Test("keys tried too often from one address: every key from it is refused until the limit lets it try again, the right one too", arguments: [TestEngine.sqlite])
    func keysLimited(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.rateLimits.signInsPerAddress = RateLimit(burst: 3, perSecond: 1.0 / 3600)
            $0.rateLimits.signInsPerEmail = nil
        }) { _, http, _ in
            _ = try await WebSession.account(http, "ann@example.com")
            let password = try await Self.syncPassword(http, "ann@example.com")
            // The account's making and the browser's sign-in took from the address's three too.
            var statuses: [Int] = []
            for guess in 0..<3 {
                statuses.append(try await Self.kosync(http, "GET", "/users/auth", user: "ann@example.com", password: "guess-\(guess)").status)
            }
            #expect(statuses.first == 401 && statuses.last == 429, "\(statuses)")
            #expect(try await Self.kosync(http, "GET", "/users/auth", user: "ann@example.com", password: password).status == 429, "the right key learns nothing meanwhile")
        }
    }

    @Test("eight devices send their place at once, dated in shuffled order: the newest is kept whatever order they land in, each one beaten is a 409 carrying a newer place than the oldest", arguments: TestEngine.all)
    func concurrentPlaces(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let ann = try await WebSession.account(http, "ann@example.com")
            #expect(try await http.pay(Self.epub, token: ann.token).status == 200)
            let minutes = [5, 2, 7, 0, 6, 3, 1, 4]
            let replies = try await Self.concurrently(minutes.count) { index in
                let minute = minutes[index]
                let document = #"{"modified": "2026-03-01T10:0\#(minute):00Z", "device": {"id": "urn:kiosk:test:\#(minute)", "name": "Device \#(minute)"}, "progression": 0.\#(minute)}"#
                return try await http.send("PUT", "/opds/progression/\(Self.epub)", token: ann.token, json: document)
            }
            #expect(replies.allSatisfy { $0.status == 200 || $0.status == 409 }, "\(replies.map(\.status))")
            for reply in replies where reply.status == 409 {
                let kept = try JSONDecoder().decode(ReadingPosition.self, from: reply.body)
                #expect(kept.progression > 0, "a 409 carries the place that beat it, never the oldest")
            }
            let kept = try JSONDecoder().decode(ReadingPosition.self, from: try await http.send("GET", "/opds/progression/\(Self.epub)", token: ann.token).body)
            #expect(kept.progression == 0.7 && kept.device.name == "Device 7" && kept.modified == "2026-03-01T10:07:00Z", "\(kept)")
        }
    }

    @Test("an updated edition keeps the reader's place: the earlier file's name still leads to the book, and the new file reads the same position", arguments: TestEngine.all)
    func updateKeepsThePlace(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            _ = try await WebSession.account(http, "ann@example.com")
            let password = try await Self.syncPassword(http, "ann@example.com")
            // What the store's catalog loading does (CatalogReloadService) at the first catalog and each reload.
            try await server.store.reading.remember(documents: try await server.catalog.current.productsByDocument)
            let file = server.configuration.contentDirectory.appendingPathComponent("publications/salt-and-stars.epub")
            let before = try Self.partialMD5(file)
            _ = try await Self.kosync(http, "PUT", "/syncs/progress", user: "ann@example.com", password: password, body: [
                "document": before, "progress": "/body/DocFragment[3]/body/p[1]", "percentage": 0.3, "device": "Kobo", "device_id": "KOBO-1",
            ])
            // The publisher revises the book: its first chapter is longer, so every later byte moves.
            try Self.revise(file)
            #expect(await server.catalog.reload())
            try await server.store.reading.remember(documents: try await server.catalog.current.productsByDocument)
            let after = try Self.partialMD5(file)
            #expect(after != before)
            let names = try await server.catalog.current.productsByDocument
            #expect(names[after] == Self.epub, "\(names) \(after)")
            let onTheNew = try await Self.kosync(http, "GET", "/syncs/progress/\(after)", user: "ann@example.com", password: password)
            #expect(onTheNew.json["progress"] as? String == "/body/DocFragment[3]/body/p[1]", "\(onTheNew.json)")
            let onTheOld = try await Self.kosync(http, "GET", "/syncs/progress/\(before)", user: "ann@example.com", password: password)
            #expect(onTheOld.json["progress"] as? String == "/body/DocFragment[3]/body/p[1]")
        }
    }
}
