import Foundation
import KioskTestSupport
import Testing

/// `kiosk keys` as an operator runs it, on both database engines.
@Suite("kiosk keys")
struct KeysCommandTests {
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
}
