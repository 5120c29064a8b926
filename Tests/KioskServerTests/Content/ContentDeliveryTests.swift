import Crypto
import Foundation
import KioskCore
import KioskServer
import KioskTestSupport
import KioskTransfer
import Logging
import Testing

/// The bytes behind an ETag, reloads that do not stall the store, secrets and slow clients.
@Suite("The server's bytes, reloads, secrets and connections")
struct ServerOperationsTests {
    static let large = "com.kiosk.books.large-atlas"

    static func get(_ url: String, headers: [(name: String, value: String)] = []) async throws -> HTTPResponse {
        try await HTTPClient().send(HTTPRequest(url: url, headers: headers, maxResponseBytes: 256 << 20))
    }

    static func receipt(for product: String, _ http: StoreHTTP) async throws -> String {
        let account = try await http.createAccount()
        let reply = try await http.pay(product, token: account.token)
        return try #require(try reply.decode(PaymentResponse.self).transaction.signedTransaction)
    }

    /// A live server whose store has an 8 MiB book, and a receipt that entitles it.
    static func withLargeBook(_ body: @Sendable (KioskServer, SampleStore, String, String) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.addLargeBook(large, megabytes: 8)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            try await body(server, store, url, try await receipt(for: large, StoreHTTP(baseURL: url)))
        }
    }

    static func rewriteLargeBook(_ store: SampleStore, seed: String) throws {
        try TestOrigin.incompressible(8 << 20, seed: seed).write(to: store.content.appendingPathComponent("books/large-atlas/plates.bin"))
    }

    @Test("a reload that changes a book while a ranged download of the old version is in flight: the resume finishes the old version byte-exact, an unknown If-Range restarts, never a splice")
    func reloadDuringResume() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=0-1048575")])
            #expect(first.status == 206)
            let oldTag = try #require(first.headers["etag"])

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            // The resume of the old version finishes from the old bytes: byte-exact, one version.
            let resumed = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", oldTag)])
            #expect(resumed.status == 206)
            #expect(resumed.headers["etag"] == oldTag)
            #expect("\"\(FileDigest.sha256(of: first.body + resumed.body))\"" == oldTag)

            // A tag the store no longer has restarts with the whole new version, never a splice.
            let restarted = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", "\"0000\"")])
            #expect(restarted.status == 200)
            let newTag = try #require(restarted.headers["etag"])
            #expect(newTag != oldTag)
            #expect("\"\(FileDigest.sha256(of: restarted.body))\"" == newTag)

            // The old archive is still there under its own name, with its own bytes.
            let oldFile = store.data.appendingPathComponent("content/\(oldTag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))).zip")
            #expect("\"\(try FileDigest.sha256(of: oldFile))\"" == oldTag)
        }
    }

    @Test("a reload that changes nothing, right after one that changed a book, keeps the replaced version: its resume is still 206 from its own bytes")
    func noOpReloadKeepsPrevious() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=0-1048575")])
            #expect(first.status == 206)
            let oldTag = try #require(first.headers["etag"])

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            // A second SIGHUP with nothing changed (a deploy script reloading every instance, say).
            #expect(await server.catalog.reload())

            let resumed = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=1048576-"), ("If-Range", oldTag)])
            #expect(resumed.status == 206)
            #expect(resumed.headers["etag"] == oldTag)
            #expect("\"\(FileDigest.sha256(of: first.body + resumed.body))\"" == oldTag)
            let named = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", oldTag), ("Range", "bytes=0-99")])
            #expect(named.status == 206)
        }
    }

    @Test("If-Match names the version: the current one or the one a reload replaced is served, any other is 412 and no bytes")
    func ifMatch() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let first = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth])
            let firstTag = try #require(first.headers["etag"])
            #expect(try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag)]).status == 200)

            try Self.rewriteLargeBook(store, seed: "second edition")
            #expect(await server.catalog.reload())
            let replaced = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag), ("Range", "bytes=0-99")])
            #expect(replaced.status == 206)
            #expect(replaced.headers["etag"] == firstTag)
            #expect(replaced.body == first.body.prefix(100))

            try Self.rewriteLargeBook(store, seed: "third edition")
            #expect(await server.catalog.reload())
            let gone = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("If-Match", firstTag)])
            #expect(gone.status == 412)
            #expect(String(decoding: gone.body, as: UTF8.self).contains("version_changed"))
            #expect(gone.body.count < 1024)
        }
    }

    /// A HEAD of the large book, and the archive file its ETag names in the server's data folder.
    static func headAndArchive(_ url: String, auth: (String, String), store: SampleStore) async throws -> (head: HTTPResponse, archive: URL) {
        let head = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/content/\(large)", headers: [auth]))
        let tag = try #require(head.headers["etag"]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return (head, store.data.appendingPathComponent("content/\(tag).zip"))
    }

    @Test("HEAD answers every GET route with its status and headers and no body, as curl -I expects; a HEAD of content counts no download")
    func headOfEveryGet() async throws {
        try await Self.withLargeBook { server, _, url, receipt in
            for path in ["/healthz", "/v1/catalog", "/.well-known/jwks.json", "/metrics"] {
                let get = try await HTTPClient().send(HTTPRequest(method: "GET", url: url + path))
                let head = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + path))
                #expect(head.status == 200 && get.status == 200, "\(path): \(head.status)")
                #expect(head.body.isEmpty, "\(path)")
                #expect(head.headers["content-type"] == get.headers["content-type"], "\(path)")
            }
            let catalog = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/catalog"))
            #expect(catalog.headers["etag"] != nil)
            let missing = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/no-such-route"))
            #expect(missing.status == 404)
            let unauthorized = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/account"))
            #expect(unauthorized.status == 401)
            let auth = ("Authorization", "Receipt \(receipt)")
            _ = try await HTTPClient().send(HTTPRequest(method: "HEAD", url: url + "/v1/content/\(Self.large)", headers: [auth]))
            let admin = try await HTTPClient().send(HTTPRequest(method: "GET", url: url + "/v1/admin/downloads", headers: [("Authorization", "Bearer \(server.adminToken)")]))
            #expect(!String(decoding: admin.body, as: UTF8.self).contains(Self.large), "a HEAD is not a download: \(String(decoding: admin.body, as: UTF8.self))")
        }
    }

    @Test("stream delivery sends by sendfile: 24 ranged GETs at once each get exactly their slice and Content-Length, a HEAD its size; the internal file field never reaches the wire")
    func sendfileRanges() async throws {
        try await Self.withLargeBook { _, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let (head, archive) = try await Self.headAndArchive(url, auth: auth, store: store)
            let file = try Data(contentsOf: archive)
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == String(file.count))
            #expect(head.body.isEmpty)

            let size = file.count
            var ranges: [ClosedRange<Int>] = [0...0, (size - 1)...(size - 1), 0...(size - 1), 4095...4096, 1...(size - 2)]
            var generator = SystemRandomNumberGenerator()
            while ranges.count < 24 {
                let lower = Int.random(in: 0..<size, using: &generator)
                ranges.append(lower...Int.random(in: lower..<size, using: &generator))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for range in ranges {
                    group.addTask {
                        let response = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth, ("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")])
                        #expect(response.status == 206)
                        #expect(response.headers["content-length"] == String(range.count))
                        #expect(response.headers["content-range"] == "bytes \(range.lowerBound)-\(range.upperBound)/\(size)")
                        #expect(response.headers["kiosk-sendfile"] == nil)
                        #expect(response.body == file[range], "bytes \(range)")
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("curl reusing one connection for three downloads of the archive gets each byte-exact: a sendfile answer ends where its Content-Length says")
    func sendfileKeepAlive() async throws {
        try await Self.withLargeBook { _, _, url, receipt in
            let directory = try TemporaryDirectory()
            let target = url + "/v1/content/\(Self.large)"
            let curl = Process()
            curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            let outputs = (0..<3).map { directory.path("copy\($0).zip").path }
            // `--next` starts each transfer's own options; curl keeps its connections across them.
            let common = ["-sf", "-w", "%{num_connects} ", "-H", "Authorization: Receipt \(receipt)"]
            curl.arguments = ["curl"] + common + ["-r", "0-99", target, "-o", outputs[0], "--next"]
                + common + [target, "-o", outputs[1], "--next"]
                + common + ["-r", "5-", target, "-o", outputs[2]]
            let pipe = Pipe()
            curl.standardOutput = pipe
            try curl.run()
            let written = try await offCooperativePool { pipe.fileHandleForReading.readDataToEndOfFile() }
            curl.waitUntilExit()
            #expect(curl.terminationStatus == 0)
            // One connection opened for the first transfer, none for the two after it.
            #expect(String(decoding: written, as: UTF8.self) == "1 0 0 ")
            let whole = try await Self.get(target, headers: [("Authorization", "Receipt \(receipt)")]).body
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[0])) == whole.prefix(100))
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[1])) == whole)
            #expect(try Data(contentsOf: URL(fileURLWithPath: outputs[2])) == whole.dropFirst(5))
        }
    }

    @Test("an archive gone from the data folder is a one-line 503 naming it, no bytes; the server keeps answering")
    func sendfileMissingArchive() async throws {
        try await Self.withLargeBook { _, store, url, receipt in
            let auth = ("Authorization", "Receipt \(receipt)")
            let archive = try await Self.headAndArchive(url, auth: auth, store: store).archive
            try FileManager.default.removeItem(at: archive)

            let gone = try await Self.get(url + "/v1/content/\(Self.large)", headers: [auth])
            #expect(gone.status == 503)
            let failure = try JSONDecoder().decode(APIError.self, from: gone.body)
            #expect(failure.code == "content_unavailable")
            #expect(failure.message.contains(archive.path))
            #expect(!failure.message.contains("\n"))
            #expect(try await Self.get(url + "/v1/catalog").status == 200)
        }
    }

    @Test("GETs racing reloads: every body's SHA-256 is its ETag")
    func racingReloads() async throws {
        try await Self.withLargeBook { server, store, url, receipt in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for round in 0..<4 {
                        try Self.rewriteLargeBook(store, seed: "edition \(round)")
                        _ = await server.catalog.reload()
                    }
                }
                for _ in 0..<3 {
                    group.addTask {
                        for _ in 0..<4 {
                            let response = try await Self.get(url + "/v1/content/\(Self.large)", headers: [("Authorization", "Receipt \(receipt)")])
                            #expect(response.status == 200)
                            #expect("\"\(FileDigest.sha256(of: response.body))\"" == response.headers["etag"])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("while a slow reload packs, the catalog and payments keep answering from the last good catalog")
    func requestsDuringSlowReload() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            let http = StoreHTTP(baseURL: url)
            let account = try await http.createAccount()
            try store.addLargeBook(Self.large, megabytes: 48)
            let reload = Task { await server.catalog.reload() }
            try await Task.sleep(for: .milliseconds(200))
            var slowest = Duration.zero
            for _ in 0..<5 {
                let started = ContinuousClock.now
                #expect(try await http.send("GET", "/v1/catalog").status == 200)
                #expect(try await http.pay("com.kiosk.credits.pack-5", token: account.token).status == 200)
                slowest = max(slowest, ContinuousClock.now - started)
            }
            let catalogBefore = try await http.send("GET", "/v1/catalog").decode(CatalogDocument.self)
            #expect(!catalogBefore.products.contains { $0.id == Self.large }, "the reload had already finished; the test proves nothing")
            #expect(slowest < .milliseconds(500), "a request waited \(slowest) for the reload")
            #expect(await reload.value)
            #expect(try await http.send("GET", "/v1/catalog").decode(CatalogDocument.self).products.contains { $0.id == Self.large })
        }
    }

    @Test("secrets are created 0600 (the database holds the signing keys); a legacy key file is imported, and an unreadable or corrupt one, or an unreadable admin token, stops the server, naming the file")
    func secrets() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await KioskServer(configuration: configuration).shutdown()
        for name in ["kiosk-server.sqlite", "admin-token"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: store.data.appendingPathComponent(name).path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(name) is \(String(mode, radix: 8))")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.data.path).allSatisfy { !$0.hasPrefix(".") })

        // A key file kept by an earlier Kiosk becomes the store's first key: its receipts keep verifying.
        let legacy = try TemporaryDirectory()
        var legacyConfiguration = configuration
        legacyConfiguration.dataDirectory = legacy.url
        let key = legacy.url.appendingPathComponent("signing-key.json")
        let privateKey = Curve25519.Signing.PrivateKey()
        let d = privateKey.rawRepresentation.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try Data("{\"kid\": \"legacy-1\", \"d\": \"\(d)\"}".utf8).write(to: key)
        let imported = try await KioskServer(configuration: legacyConfiguration)
        #expect(try await imported.keys.jwks().keys.map { $0.keyIdentifier?.string } == ["legacy-1"])
        await imported.shutdown()

        let fresh = try TemporaryDirectory()
        legacyConfiguration.dataDirectory = fresh.url
        let badKey = fresh.url.appendingPathComponent("signing-key.json")
        try Data("{\"kid\": \"x\", \"d\": \"not a key\"}".utf8).write(to: badKey)
        let corrupt = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: legacyConfiguration) }
        #expect(corrupt?.description.hasPrefix("\(badKey.path): is not a signing key Kiosk can read") == true)
        #expect(try Data(contentsOf: badKey) == Data("{\"kid\": \"x\", \"d\": \"not a key\"}".utf8), "the key file was replaced")

        try FileManager.default.removeItem(at: badKey)
        try FileManager.default.createDirectory(at: badKey, withIntermediateDirectories: false)
        let unreadable = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: legacyConfiguration) }
        #expect(unreadable?.description.hasPrefix("\(badKey.path): exists but cannot be read") == true)

        let token = store.data.appendingPathComponent("admin-token")
        try FileManager.default.removeItem(at: token)
        try FileManager.default.createDirectory(at: token, withIntermediateDirectories: false)
        let badToken = await #expect(throws: ServerSetupError.self) { try await KioskServer(configuration: configuration) }
        #expect(badToken?.description.hasPrefix("\(token.path): exists but cannot be read") == true)
    }

    @Test("connections that never finish their request headers are closed after the request timeout")
    func slowHeaders() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        configuration.requestHeaderTimeout = 1
        try await LiveServer.run(configuration) { _, url in
            let port = try #require(Int(url.split(separator: ":").last ?? ""))
            let sockets = try (0..<50).map { _ in try SlowClient(port: port) }
            for socket in sockets { socket.send("GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") }
            try await Task.sleep(for: .seconds(3))
            let closed = sockets.filter { $0.isClosedByPeer() }.count
            #expect(closed == sockets.count, "\(sockets.count - closed) slow connections still open")
            // A connection that completes its request is answered as usual.
            #expect(try await StoreHTTP(baseURL: url).send("GET", "/healthz").status == 200)
        }
    }
}

/// A raw TCP connection that sends what a test says, as slowly as it likes.
final class SlowClient {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw CocoaError(.fileReadUnknown) }
    }

    deinit { close(descriptor) }

    func send(_ text: String) {
        _ = text.withCString { Glibc.send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// True when the server has closed the connection: reads reach end of file (or a reset),
    /// after whatever it said last.
    func isClosedByPeer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<8 {
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorSet, 1, 100) > 0 else { return false }
            if recv(descriptor, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }
}
