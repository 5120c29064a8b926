import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk fetch` as curl and wget users type it: resuming, failing in one line, and its options.
@Suite("kiosk fetch, as curl and wget users type it")
struct FetchCommandTests: KioskCommandSuite {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas

    @Test("kiosk fetch resumes an interrupted download from its partial file and checks the SHA-256")
    func fetchResumes() async throws {
        let setup = try await Setup()
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        let receipt = try await database.read { try String.fetchOne($0, sql: "SELECT receipt FROM payment WHERE productId = ?", arguments: [Self.atlas]) } ?? ""
        let digest = try await database.read { try String.fetchOne($0, sql: "SELECT sha256 FROM download WHERE productId = ?", arguments: [Self.atlas]) } ?? ""
        let url = "\(setup.server.url)/v1/content/\(Self.atlas)"
        let output = setup.directory.path("atlas.zip")
        let arguments = ["fetch", url, "-o", output.path, "--sha256", digest, "--header", "Authorization: Receipt \(receipt)"]

        let slow = Process()
        slow.executableURL = KioskCommand.executable
        slow.arguments = arguments
        slow.environment = ProcessInfo.processInfo.environment.merging(["KIOSK_MAX_RECEIVE_SPEED": "2000000"]) { $1 }
        slow.standardOutput = FileHandle.nullDevice
        try slow.runAlone()
        let partial = output.appendingPathExtension("partial")
        for _ in 0..<300 where ((try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0) < 2 << 20 {
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(slow.processIdentifier, SIGKILL)
        try await offCooperativePool { slow.waitForExit() }
        let kept = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
        #expect(kept >= 2 << 20)

        let resumed = try await KioskCommand.run(arguments)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("\(setup.archiveSize - kept) bytes received"))
        #expect(try FileDigest.sha256(of: output) == digest)
        #expect(!FileManager.default.fileExists(atPath: partial.path))

        let wrong = try await KioskCommand.run(["fetch", url, "-o", setup.directory.path("again.zip").path,
            "--sha256", String(repeating: "a", count: 64), "--header", "Authorization: Receipt \(receipt)"])
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("twice"))
        _ = await setup.server.stop()
    }

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
}
