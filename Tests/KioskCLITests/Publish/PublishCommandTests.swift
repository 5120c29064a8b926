import Foundation
import KioskTestSupport
import Testing

/// `kiosk publish` and `kiosk keys` as an operator runs them, on both database engines.
@Suite("kiosk publish and kiosk keys")
struct StoreOperationsCommandTests {
    @Test("keys: list shows the signing key, rotate adds one that signs, retire refuses the last key and withdraws an old one", arguments: TestEngine.all)
    func keys(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var flags = ["--data", store.data.path]
        if case .postgres(let url)? = try await engine.freshDatabase() { flags += ["--database", url] }
        // The store exists once it has served: keys are an existing store's.
        _ = await (try await ServerProcess.start(store, extraArguments: Array(flags.dropFirst(2)), log: directory.path("server.log"))).stop()

        let initial = try await KioskCommand.run(["keys", "list"] + flags)
        #expect(initial.status == 0, "\(initial.stderr)")
        let first = try #require(initial.stdout.split(separator: "\t").first.map(String.init))
        let lastKey = try await KioskCommand.run(["keys", "retire", first] + flags)
        #expect(lastKey.status == 1)
        #expect(lastKey.stderr == "kiosk: \(first): is the only signing key; run kiosk keys rotate first, then retire it\n")

        #expect(try await KioskCommand.run(["keys", "rotate"] + flags).status == 0)
        #expect(try await KioskCommand.run(["keys", "retire", first] + flags).status == 0)
        let listed = try await KioskCommand.run(["keys", "list"] + flags)
        let states = listed.stdout.split(separator: "\n").map { $0.split(separator: "\t").prefix(2).joined(separator: " ") }
        #expect(states.count == 2)
        #expect(states.first == "\(first) retired")
        #expect(states.last?.hasSuffix(" signing") == true)
    }

    @Test("keys in a folder that holds no store (a mistyped --data) say so in one line and create nothing")
    func keysNeedAStore() async throws {
        let directory = try TemporaryDirectory()
        let typo = directory.path("no-such-store")
        for arguments in [["keys", "list"], ["keys", "rotate"]] {
            let result = try await KioskCommand.run(arguments + ["--data", typo.path])
            #expect(result.status != 0)
            #expect(result.stderr == "kiosk: no store at \(typo.path)/kiosk-server.sqlite; pass the --data folder of a store that has run (or its --database)\n", "\(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: typo.path))
    }

    @Test("publish writes content-addressed archives and the catalog; a bad catalog publishes nothing and says why in one line")
    func publish() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let out = directory.path("published")
        let published = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out.path])
        #expect(published.status == 0, "\(published.stderr)")
        #expect(published.stdout.hasPrefix("published 10 products (7 archives) to \(out.path)"))
        let files = try FileManager.default.contentsOfDirectory(atPath: out.appendingPathComponent("archives").path)
        // Each archive has its manifest beside it (<sha256>.manifest.json, for updates by entries).
        let archives = files.filter { !$0.hasSuffix(".manifest.json") }
        #expect(archives.count == 7 && files.count == 14, "\(files)")
        #expect(archives.allSatisfy { archive in files.contains(String(archive.prefix(64)) + ".manifest.json") }, "\(files)")
        #expect(archives.allSatisfy { $0.prefix(64).allSatisfy(\.isHexDigit) })
        let catalog = try Data(contentsOf: out.appendingPathComponent("catalog.json"))

        try store.editCatalog("books.json") { products in products[0]["price"] = "free" }
        let refused = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(refused.stderr.contains("field \"price\""))
        #expect(try Data(contentsOf: out.appendingPathComponent("catalog.json")) == catalog, "a refused publish changed the catalog")
    }

    @Test("publish refuses an --out that is, lies inside or contains the catalog or content folder, however it is spelled (.., a symlink): one line naming both, nothing written")
    func publishRefusesOverlap() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try FileManager.default.createSymbolicLink(at: directory.path("link-to-content"), withDestinationURL: store.content)
        let catalog = store.catalog.resolvingSymlinksInPath().path
        let content = store.content.resolvingSymlinksInPath().path
        let cases: [(out: String, names: String)] = [
            (store.catalog.path, catalog),
            (store.content.path + "/books/published", content),
            (directory.path("link-to-content").path + "/out", content),
            (store.content.path + "/../Catalog/./", catalog),
            (directory.url.path, catalog),
        ]
        let before = try FolderSnapshot.files(in: directory.url)
        for (out, names) in cases {
            let refused = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", out])
            #expect(refused.status == 1, "--out \(out): \(refused.stdout)")
            let lines = refused.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains(names) && refused.stderr.contains("folder"), "\(refused.stderr)")
        }
        #expect(try FolderSnapshot.files(in: directory.url) == before, "a refused publish wrote a file")
        for folder in [store.catalog, store.content, store.content.appendingPathComponent("books"), directory.url] {
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("archives").path), "a refused publish made \(folder.path)/archives")
        }
        // Beside them, it publishes.
        let beside = try await KioskCommand.run(["publish", "--catalog", store.catalog.path, "--content", store.content.path, "--out", directory.path("published").path])
        #expect(beside.status == 0, "\(beside.stderr)")
    }
}
