import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

@Suite("Multi-MiB downloads cut and resumed, as a person runs them")
struct DownloadCommandTests {
    static let atlas = "com.kiosk.books.atlas"
    static let atlasMiB = 8

    /// The sample store plus a book of `megabytes` MiB of bytes that do not compress.
    struct Setup {
        let atlasBytes: Int
        let directory: TemporaryDirectory
        let store: SampleStore
        var server: ServerProcess
        let home: String
        let archiveSize: Int

        init(megabytes: Int = DownloadCommandTests.atlasMiB, buy: Bool = true, home: URL? = nil) async throws {
            atlasBytes = megabytes << 20
            directory = try TemporaryDirectory()
            store = try SampleStore(in: directory)
            let folder = store.content.appendingPathComponent("books/atlas")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try TestOrigin.incompressible(atlasBytes).write(to: folder.appendingPathComponent("plates.bin"))
            try Data("# Atlas\n\nEight mebibytes of plates.\n".utf8).write(to: folder.appendingPathComponent("index.md"))
            try store.editCatalog("books.json") { products in
                var atlas = products[0]
                atlas["id"] = DownloadCommandTests.atlas
                atlas["title"] = "The Atlas of Plates"
                atlas["content"] = ["path": "books/atlas", "format": "zip"]
                products.append(atlas)
            }
            server = try await ServerProcess.start(store, log: directory.path("server.log"))
            self.home = (home ?? directory.path("home")).path
            #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": self.home]).status == 0)
            if buy {
                let bought = try await KioskCommand.run(["buy", DownloadCommandTests.atlas, "--no-download"], environment: ["KIOSK_HOME": self.home])
                #expect(bought.status == 0, "\(bought.stderr)")
            }
            archiveSize = try await Self.catalogSize(home: self.home)
        }

        static func catalogSize(home: String) async throws -> Int {
            let products = try await KioskCommand.run(["products", "--json"], environment: ["KIOSK_HOME": home]).stdout
            let object = try JSONSerialization.jsonObject(with: Data(products.utf8)) as? [String: Any]
            let atlas = (object?["products"] as? [[String: Any]])?.first { $0["id"] as? String == DownloadCommandTests.atlas }
            return (atlas?["content"] as? [String: Any])?["size"] as? Int ?? 0
        }

        var partial: URL { URL(fileURLWithPath: home).appendingPathComponent("downloads/\(DownloadCommandTests.atlas).partial") }

        func partialSize() -> Int {
            (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
        }

        /// `kiosk resume` in the background, throttled so the test can cut it mid-way.
        func startSlowResume(bytesPerSecond: Int = 2_000_000) throws -> Process {
            try startSlow(["resume"], bytesPerSecond: bytesPerSecond, log: "slow-resume")
        }

        /// Any `kiosk` command in the background, throttled; its stdout goes to `<log>.out`, stderr to `<log>.err`.
        func startSlow(_ arguments: [String], bytesPerSecond: Int = 2_000_000, log: String) throws -> Process {
            let process = Process()
            process.executableURL = KioskCommand.executable
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(
                ["KIOSK_HOME": home, "KIOSK_MAX_RECEIVE_SPEED": String(bytesPerSecond)]) { $1 }
            let out = directory.path("\(log).out")
            let err = directory.path("\(log).err")
            FileManager.default.createFile(atPath: out.path, contents: nil)
            FileManager.default.createFile(atPath: err.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: out)
            process.standardError = try FileHandle(forWritingTo: err)
            try process.run()
            return process
        }

        /// What a background command printed: (stdout, stderr).
        func output(_ log: String) -> (stdout: String, stderr: String) {
            ((try? String(contentsOf: directory.path("\(log).out"), encoding: .utf8)) ?? "",
             (try? String(contentsOf: directory.path("\(log).err"), encoding: .utf8)) ?? "")
        }

        /// Waits until the partial file holds at least `bytes`.
        func waitForPartial(atLeast bytes: Int) async throws {
            for _ in 0..<300 where partialSize() < bytes {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(partialSize() >= bytes, "\(output("slow-resume"))")
        }

        func expectInstalledByteExact() async throws {
            let installed = URL(fileURLWithPath: home).appendingPathComponent("Library/\(DownloadCommandTests.atlas)/plates.bin")
            #expect(try Data(contentsOf: installed) == TestOrigin.incompressible(atlasBytes))
        }

        static func received(_ output: String) -> Int {
            output.split(separator: "\n").compactMap { line -> Int? in
                guard line.hasPrefix("received ") else { return nil }
                return Int(line.dropFirst("received ".count).prefix { $0.isNumber })
            }.reduce(0, +)
        }
    }

    @Test("a reload mid-download: resume finishes the version it began with, then installs the new one before it returns")
    func reloadMidDownload() async throws {
        let setup = try await Setup()
        let resume = try setup.startSlow(["resume"], log: "reloaded")
        try await setup.waitForPartial(atLeast: 1 << 20)
        try Data("# Atlas, second edition\n".utf8).write(to: setup.store.content.appendingPathComponent("books/atlas/index.md"))
        setup.server.signal(SIGHUP)
        // The running resume learns of the new version from a sync in another terminal.
        var report = ""
        for _ in 0..<50 where !report.contains("1 changed") {
            try await Task.sleep(for: .milliseconds(100))
            report = try await KioskCommand.run(["sync"], environment: ["KIOSK_HOME": setup.home]).stdout
        }
        #expect(report.contains("1 changed"))
        try await offCooperativePool { resume.waitUntilExit() }
        #expect(resume.terminationStatus == 0, "\(setup.output("reloaded"))")
        #expect(setup.output("reloaded").stdout.contains("queued \(Self.atlas)"), "\(setup.output("reloaded"))")
        let index = URL(fileURLWithPath: setup.home).appendingPathComponent("Library/\(Self.atlas)/index.md")
        #expect(try String(contentsOf: index, encoding: .utf8).contains("second edition"))
        _ = await setup.server.stop()
    }

    @Test("a client killed with SIGKILL mid-download resumes and ends byte-exact, with little re-sent")
    func clientKilled() async throws {
        let setup = try await Setup()
        let slow = try setup.startSlowResume()
        try await setup.waitForPartial(atLeast: 2 << 20)
        kill(slow.processIdentifier, SIGKILL)
        try await offCooperativePool { slow.waitUntilExit() }
        let kept = setup.partialSize()
        #expect(kept > 0 && kept < setup.archiveSize)

        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        try await setup.expectInstalledByteExact()
        let total = kept + Setup.received(resumed.stdout)
        #expect(total == setup.archiveSize, "the resume re-sent bytes it already had")
        _ = await setup.server.stop()
    }

    @Test("a server killed mid-download and restarted: the download waits, then resumes byte-exact")
    func serverRestarted() async throws {
        // Larger than the loopback socket buffers, which would otherwise deliver the rest after the kill.
        var setup = try await Setup(megabytes: 32)
        let slow = try setup.startSlowResume(bytesPerSecond: 4_000_000)
        try await setup.waitForPartial(atLeast: 2 << 20)
        setup.server.signal(SIGKILL)
        try await offCooperativePool { slow.waitUntilExit() }
        #expect(slow.terminationStatus == 3)
        let kept = setup.partialSize()
        let waiting = try await KioskCommand.run(["downloads", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(waiting.contains("\"state\":\"waiting\""))

        setup.server = try await ServerProcess.start(setup.store, log: setup.directory.path("server2.log"))
        let resumed = try await KioskCommand.run(["resume", "--wait", "--max-wait", "30", "--server", setup.server.url], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try await setup.expectInstalledByteExact()
        #expect(kept + Setup.received(resumed.stdout) == setup.archiveSize)
        let transactions = try await KioskCommand.run(["transactions", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(transactions.contains("\"state\":\"finished\""))
        _ = await setup.server.stop()
    }

    @Test("pause keeps the bytes, resume continues from them; cancel deletes them")
    func pauseAndCancel() async throws {
        let setup = try await Setup()
        let pause = try await KioskCommand.run(["pause", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(pause.status == 0)
        #expect(try await KioskCommand.run(["downloads"], environment: ["KIOSK_HOME": setup.home]).stdout.contains("paused"))
        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        let library = try await KioskCommand.run(["library", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(library.contains(Self.atlas))
        let cancel = try await KioskCommand.run(["cancel", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(cancel.status == 1)
        #expect(cancel.stderr == "kiosk: the download of \(Self.atlas) is installed and cannot become cancelled\n")
        _ = await setup.server.stop()
    }

    @Test("curl -C -, wget -c and aria2c -c with the receipt finish an interrupted download byte-exact", arguments: ["curl", "wget", "aria2c"])
    func realClientsResume(tool: String) async throws {
        let setup = try await Setup()
        let database = try DatabaseQueue(path: setup.home + "/kiosk.sqlite")
        let receipt = try await database.read { try String.fetchOne($0, sql: "SELECT receipt FROM payment WHERE productId = ?", arguments: [Self.atlas]) } ?? ""
        let url = "\(setup.server.url)/v1/content/\(Self.atlas)"
        let header = "Authorization: Receipt \(receipt)"
        let whole = setup.directory.path("whole.zip")
        #expect(try await Self.run("curl", ["-sf", "-H", header, "-o", whole.path, url]) == 0)
        let output = setup.directory.path("atlas.zip")
        try Data(contentsOf: whole).prefix(3_000_001).write(to: output)

        let status: Int32
        switch tool {
        case "curl": status = try await Self.run("curl", ["-sf", "-C", "-", "-H", header, "-o", output.path, url])
        case "wget": status = try await Self.run("wget", ["-q", "-c", "--header", header, "-O", output.path, url])
        default: status = try await Self.run("aria2c", ["-q", "-c", "--allow-overwrite=false", "--header", header, "-d", setup.directory.url.path, "-o", "atlas.zip", url])
        }
        #expect(status == 0)
        #expect(try Data(contentsOf: output) == Data(contentsOf: whole))
        #expect(try FileDigest.sha256(of: output).count == 64)
        _ = await setup.server.stop()
    }

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
        try slow.run()
        let partial = output.appendingPathExtension("partial")
        for _ in 0..<300 where ((try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0) < 2 << 20 {
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(slow.processIdentifier, SIGKILL)
        try await offCooperativePool { slow.waitUntilExit() }
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

    static func run(_ tool: String, _ arguments: [String]) async throws -> Int32 {
        try await offCooperativePool { try runBlocking(tool, arguments) }
    }

    static func runBlocking(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
