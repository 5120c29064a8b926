import Foundation
import KioskTestSupport
import Testing

/// A store that lies: names that are paths, bodies that never end, gzip bombs. The client refuses
/// each with one line, stays small, and writes nothing outside its home.
@Suite("A hostile server against the client")
struct HostileServerTests {
    /// `fence/` holds only `home/` (and `work/`); anything else appearing in it escaped.
    struct Fence {
        let directory: TemporaryDirectory
        var fence: URL { directory.path("fence") }
        var home: URL { fence.appendingPathComponent("home") }
        var work: URL { fence.appendingPathComponent("work") }

        init() throws {
            directory = try TemporaryDirectory()
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        }

        /// Every path under the fence, outside `home/` and `work/`.
        func escaped() throws -> [String] {
            let top = try FileManager.default.contentsOfDirectory(atPath: fence.path)
            let outsideFence = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0 != "fence" }
            return top.filter { $0 != "home" && $0 != "work" } + outsideFence
        }
    }

    static func product(_ id: String) -> String {
        let escaped = id.replacingOccurrences(of: "\0", with: "\\u0000")
        return #"{"products": [{"id": "\#(escaped)", "kind": "nonConsumable", "title": "x", "summary": "x", "price": {"amount": "1.00", "currency": "USD"}, "content": {"format": "zip", "size": 10, "sha256": "\#(String(repeating: "0", count: 64))", "version": "v1"}}]}"#
    }

    @Test("product IDs that are paths, absolute, slashed, with NUL or 300 characters: the catalog is refused in one line, nothing outside the home",
          arguments: ["../../x", "/etc/passwd", "com.evil/../../x", "com.evil.a\0b", "com.evil." + String(repeating: "a", count: 291)])
    func badProductIDs(id: String) async throws {
        let fence = try Fence()
        try await HostileServer.run { server, url in
            server.catalog = .json(Self.product(id))
            let (result, peak) = try await KioskCommand.runMeasured(["sync", "--server", url], environment: ["KIOSK_HOME": fence.home.path], in: fence.work)
            #expect(result.status == 1)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.contains("is not a reverse-DNS product ID") == true && lines.first?.contains("refused") == true, "\(result.stderr)")
            #expect(!result.stderr.contains("\0"))
            #expect(peak < 256 << 20)
            #expect(try fence.escaped().isEmpty)
            let products = try await KioskCommand.run(["products", "--json"], environment: ["KIOSK_HOME": fence.home.path])
            #expect(!products.stdout.contains("evil") && !products.stdout.contains("passwd"))
        }
    }

    @Test("a catalog broken at its 700th product is refused in one line naming the place; the cache keeps the last good catalog whole")
    func catalogBrokenLate() async throws {
        let fence = try Fence()
        @Sendable func catalog(_ count: Int, brokenAt broken: Int? = nil) -> String {
            let products = (0..<count).map { index in
                let amount = index == broken ? "1.00" : "\"1.00\""
                return #"{"id": "com.example.p\#(index)", "kind": "consumable", "title": "p\#(index)", "summary": "x", "price": {"amount": \#(amount), "currency": "USD"}, "credits": 1}"#
            }
            return #"{"products": [\#(products.joined(separator: ","))]}"#
        }
        try await HostileServer.run { server, url in
            let home = ["KIOSK_HOME": fence.home.path]
            server.catalog = .json(catalog(3))
            let good = try await KioskCommand.run(["sync", "--server", url], environment: home)
            #expect(good.status == 0, "\(good.stderr)")

            // Products 0…699 are read (and written into the cache's transaction) before the error.
            server.catalog = .json(catalog(1_000, brokenAt: 700))
            let result = try await KioskCommand.run(["sync"], environment: home, in: fence.work)
            #expect(result.status == 1)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.contains("products[700].price.amount: expected a string") == true
                    && lines.first?.contains("the local catalog was kept") == true, "\(result.stderr)")
            let products = try await KioskCommand.run(["products", "--json"], environment: home)
            let list = try #require(try JSONSerialization.jsonObject(with: Data(products.stdout.utf8)) as? [String: Any])
            let ids = try #require(list["products"] as? [[String: Any]]).compactMap { $0["id"] as? String }
            #expect(ids == ["com.example.p0", "com.example.p1", "com.example.p2"])
        }
    }

    @Test("a catalog naming one product twice is refused in one line; the cache keeps the last good catalog")
    func duplicateProduct() async throws {
        let fence = try Fence()
        try await HostileServer.run { server, url in
            let home = ["KIOSK_HOME": fence.home.path]
            server.catalog = .json(Self.product("com.example.first"))
            #expect(try await KioskCommand.run(["sync", "--server", url], environment: home).status == 0)
            let twice = Self.product("com.example.twice")
            let open = try #require(twice.firstIndex(of: "[")), close = try #require(twice.lastIndex(of: "]"))
            let product = twice[twice.index(after: open)..<close]
            server.catalog = .json(#"{"products": [\#(product), \#(product)]}"#)
            let result = try await KioskCommand.run(["sync"], environment: home)
            #expect(result.status == 1)
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.contains("names com.example.twice twice"), "\(result.stderr)")
            let products = try await KioskCommand.run(["products", "--json"], environment: home)
            #expect(products.stdout.contains("com.example.first") && !products.stdout.contains("com.example.twice"))
        }
    }

    @Test("a 100 MB catalog body is refused in one line and the client stays under 256 MiB")
    func hugeCatalog() async throws {
        let fence = try Fence()
        try await HostileServer.run { server, url in
            server.catalog = .huge(100_000_000)
            let (result, peak) = try await KioskCommand.runMeasured(["sync", "--server", url], environment: ["KIOSK_HOME": fence.home.path], in: fence.work)
            #expect(result.status == 1)
            #expect(result.stderr.split(separator: "\n").count == 1)
            #expect(result.stderr.contains("larger than 64 MiB"), "\(result.stderr)")
            #expect(peak < 256 << 20, "peak \(peak >> 20) MiB")
            #expect(try fence.escaped().isEmpty)
        }
    }

    @Test("a gzip bomb (300 MB of spaces in under 1 MB) is cut off as it unpacks; under 256 MiB")
    func gzipBomb() async throws {
        let fence = try Fence()
        let bomb = fence.directory.path("bomb.gz")
        let make = Process()
        make.executableURL = URL(fileURLWithPath: "/bin/sh")
        make.arguments = ["-c", "head -c 300000000 /dev/zero | tr '\\0' ' ' | gzip -1 > '\(bomb.path)'"]
        try make.runAlone()
        try await offCooperativePool { make.waitForExit() }
        #expect(make.terminationStatus == 0)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: bomb.path)[.size] as? Int)
        #expect(size < 8 << 20)
        try await HostileServer.run { server, url in
            server.catalog = .file(bomb, headers: [.contentType: "application/json", .contentEncoding: "gzip"])
            let (result, peak) = try await KioskCommand.runMeasured(["sync", "--server", url], environment: ["KIOSK_HOME": fence.home.path], in: fence.work)
            #expect(result.status == 1)
            #expect(result.stderr.split(separator: "\n").count == 1)
            #expect(result.stderr.contains("larger than 64 MiB"), "\(result.stderr)")
            #expect(peak < 256 << 20, "peak \(peak >> 20) MiB")
        }
        try? FileManager.default.removeItem(at: bomb)
        #expect(try fence.escaped().isEmpty)
    }

    @Test("kiosk fetch names files like curl -O: %2e%2e%2f stays in the name, a trailing / needs -o, -o - is stdout, finished files are kept")
    func fetchNames() async throws {
        let fence = try Fence()
        try await HostileServer.run { _, url in
            let encoded = try await KioskCommand.run(["fetch", url + "/%2e%2e%2fpwned.txt"], in: fence.work)
            #expect(encoded.status == 0, "\(encoded.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: fence.work.path) == ["%2e%2e%2fpwned.txt"])
            #expect(try fence.escaped().isEmpty)

            let folder = try await KioskCommand.run(["fetch", url + "/books/"], in: fence.work)
            #expect(folder.status == 2)
            #expect(folder.stderr.contains("names no file; give one with -o FILE"), "\(folder.stderr)")
            #expect(!FileManager.default.fileExists(atPath: fence.work.appendingPathComponent(".partial").path))

            let stdout = try await KioskCommand.run(["fetch", url + "/a.txt", "-o", "-"], in: fence.work)
            #expect(stdout.status == 0)
            #expect(stdout.stdout == "pwned\n")
            #expect(!FileManager.default.fileExists(atPath: fence.work.appendingPathComponent("-").path))

            let again = try await KioskCommand.run(["fetch", url + "/%2e%2e%2fpwned.txt"], in: fence.work)
            #expect(again.status == 1)
            #expect(again.stderr.contains("already exists; pass --force to replace it"))
            let forced = try await KioskCommand.run(["fetch", url + "/%2e%2e%2fpwned.txt", "--force"], in: fence.work)
            #expect(forced.status == 0, "\(forced.stderr)")

            try FileManager.default.createSymbolicLink(atPath: fence.work.appendingPathComponent("link.txt").path, withDestinationPath: fence.directory.path("victim.txt").path)
            let throughLink = try await KioskCommand.run(["fetch", url + "/link.txt", "--force"], in: fence.work)
            #expect(throughLink.status == 1)
            #expect(throughLink.stderr.contains("is not a regular file"))
            let device = try await KioskCommand.run(["fetch", url + "/a.txt", "-o", "/dev/stdout", "--force"], in: fence.work)
            #expect(device.status == 1)
            #expect(device.stderr.contains("is not a regular file"))
            #expect(!FileManager.default.fileExists(atPath: fence.directory.path("victim.txt").path))
        }
    }

    enum PartialSwap: String, CaseIterable, CustomStringConvertible {
        /// FILE.partial replaced by a link to a file of the reader's.
        case symlink
        /// FILE.partial replaced by a hard link to the reader's file.
        case hardLink
        var description: String { rawValue }
    }

    @Test("kiosk fetch: FILE.partial swapped between attempts (a link, another file) is refused in one line; the file it points at is untouched, nothing is saved", arguments: PartialSwap.allCases)
    func fetchPartialSwapped(swap: PartialSwap) async throws {
        let fence = try Fence()
        let victim = fence.directory.path("victim.txt")
        let original = Data("the reader's own file\n".utf8)
        try original.write(to: victim)
        try await TestOrigin.run(content: TestOrigin.incompressible(1 << 20)) { origin, url in
            origin.behaviour = .resetAfter(200_000)
            let output = fence.work.appendingPathComponent("book.bin")
            let partial = fence.work.appendingPathComponent("book.bin.partial")
            let fetch = Task { try await KioskCommand.run(["fetch", url, "-o", output.path], in: fence.work) }
            for _ in 0..<200 where ((try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0) < 200_000 {
                try await Task.sleep(for: .milliseconds(10))
            }
            // The first attempt broke off; the fetch waits to retry. Swap the partial file now.
            try await Task.sleep(for: .milliseconds(300))
            origin.behaviour = .normal
            try FileManager.default.removeItem(at: partial)
            switch swap {
            case .symlink: try FileManager.default.createSymbolicLink(atPath: partial.path, withDestinationPath: victim.path)
            case .hardLink: try FileManager.default.linkItem(at: victim, to: partial)
            }
            let result = try await fetch.value
            #expect(result.status == 1, "\(result)")
            // Progress lines, then one line that says what was refused.
            let last = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(last.hasPrefix("kiosk: refusing to write \(partial.path): ") && last.hasSuffix("; nothing was saved"), "\(result.stderr)")
            #expect(try Data(contentsOf: victim) == original, "the file the swapped partial pointed at was written")
            #expect(!FileManager.default.fileExists(atPath: output.path))
        }
    }

    @Test("a damaged kiosk.sqlite: one line naming the file and how to recover")
    func damagedDatabase() async throws {
        let fence = try Fence()
        try FileManager.default.createDirectory(at: fence.home, withIntermediateDirectories: true)
        try Data(repeating: 0x41, count: 8192).write(to: fence.home.appendingPathComponent("kiosk.sqlite"))
        let result = try await KioskCommand.run(["products"], environment: ["KIOSK_HOME": fence.home.path])
        #expect(result.status == 1)
        let path = fence.home.appendingPathComponent("kiosk.sqlite").path
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(result.stderr.hasPrefix("kiosk: \(path): is damaged"), "\(result.stderr)")
        #expect(result.stderr.contains("kiosk restore"))
    }

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
}
