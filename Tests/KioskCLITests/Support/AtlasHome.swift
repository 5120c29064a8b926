import Foundation
import KioskTestSupport
import Testing

/// The sample store plus a book of `megabytes` MiB of bytes that do not compress.
struct AtlasHome {
    static let atlas = "com.kiosk.books.atlas"
    static let atlasMiB = 8

    let atlasBytes: Int
    let directory: TemporaryDirectory
    let store: SampleStore
    var server: ServerProcess
    let home: String
    let archiveSize: Int

    init(megabytes: Int = AtlasHome.atlasMiB, buy: Bool = true, home: URL? = nil) async throws {
        atlasBytes = megabytes << 20
        directory = try TemporaryDirectory()
        store = try SampleStore(in: directory)
        let folder = store.content.appendingPathComponent("books/atlas")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try TestOrigin.incompressible(atlasBytes).write(to: folder.appendingPathComponent("plates.bin"))
        try Data("# Atlas\n\nEight mebibytes of plates.\n".utf8).write(to: folder.appendingPathComponent("index.md"))
        try store.editCatalog("books.json") { products in
            var atlas = products[0]
            atlas["id"] = AtlasHome.atlas
            atlas["title"] = "The Atlas of Plates"
            atlas["content"] = ["path": "books/atlas", "format": "zip"]
            products.append(atlas)
        }
        server = try await ServerProcess.start(store, log: directory.path("server.log"))
        self.home = (home ?? directory.path("home")).path
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": self.home]).status == 0)
        if buy {
            let bought = try await KioskCommand.run(["buy", AtlasHome.atlas, "--no-download"], environment: ["KIOSK_HOME": self.home])
            #expect(bought.status == 0, "\(bought.stderr)")
        }
        archiveSize = try await Self.catalogSize(home: self.home)
    }

    static func catalogSize(home: String) async throws -> Int {
        let products = try await KioskCommand.run(["products", "--json"], environment: ["KIOSK_HOME": home]).stdout
        let object = try JSONSerialization.jsonObject(with: Data(products.utf8)) as? [String: Any]
        let atlas = (object?["products"] as? [[String: Any]])?.first { $0["id"] as? String == AtlasHome.atlas }
        return (atlas?["content"] as? [String: Any])?["size"] as? Int ?? 0
    }

    var partial: URL { URL(fileURLWithPath: home).appendingPathComponent("downloads/\(AtlasHome.atlas).partial") }

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
        try process.runAlone()
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
        let installed = URL(fileURLWithPath: home).appendingPathComponent("Library/\(AtlasHome.atlas)/plates.bin")
        #expect(try Data(contentsOf: installed) == TestOrigin.incompressible(atlasBytes))
    }

    static func received(_ output: String) -> Int {
        output.split(separator: "\n").compactMap { line -> Int? in
            guard line.hasPrefix("received ") else { return nil }
            return Int(line.dropFirst("received ".count).prefix { $0.isNumber })
        }.reduce(0, +)
    }
}
