import Foundation
import KioskCore
import KioskTestSupport
import Testing

@Suite("App Store proofs from the command line")
struct AppStoreDownloadCommandTests {
    static let atlas = "com.kiosk.books.atlas"
    static let appStoreAtlas = "ios.reader.atlas"
    static let bundleId = "com.example.reader"

    /// The sample store with an 8 MiB book sold in the app, a server that takes App Store proofs
    /// chaining to a test root, a home synced with it, and a signed transaction in a file.
    struct Setup {
        let directory: TemporaryDirectory
        let store: SampleStore
        let chain: AppStoreTestChain
        let rootFile: URL
        let home: String
        let jws: String
        let jwsFile: URL
        let atlasBytes = 8 << 20
        var server: ServerProcess

        var environment: [String: String] { ["KIOSK_HOME": home] }
        var serverArguments: [String] { ["--app-store-bundle-id", AppStoreDownloadCommandTests.bundleId, "--app-store-root", rootFile.path] }

        init() async throws {
            directory = try TemporaryDirectory()
            store = try SampleStore(in: directory)
            let folder = store.content.appendingPathComponent("books/atlas")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try TestOrigin.incompressible(atlasBytes).write(to: folder.appendingPathComponent("plates.bin"))
            try store.editCatalog("books.json") { products in
                var atlas = products[0]
                atlas["id"] = AppStoreDownloadCommandTests.atlas
                atlas["title"] = "The Atlas of Plates"
                atlas["content"] = ["path": "books/atlas", "format": "zip"]
                atlas["appStoreProductId"] = AppStoreDownloadCommandTests.appStoreAtlas
                products.append(atlas)
            }
            chain = try AppStoreTestChain()
            rootFile = directory.path("test-root.der")
            try chain.rootDER.write(to: rootFile)
            home = directory.path("home").path
            server = try await ServerProcess.start(
                store, extraArguments: ["--app-store-bundle-id", AppStoreDownloadCommandTests.bundleId, "--app-store-root", rootFile.path],
                log: directory.path("server.log"))
            #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home]).status == 0)
            jws = try chain.transaction(id: "9000", productId: AppStoreDownloadCommandTests.appStoreAtlas)
            jwsFile = directory.path("transaction.jws")
            try Data(jws.utf8).write(to: jwsFile)
        }

        func expectInstalledByteExact() throws {
            let installed = URL(fileURLWithPath: home).appendingPathComponent("Library/\(AppStoreDownloadCommandTests.atlas)/plates.bin")
            #expect(try Data(contentsOf: installed) == TestOrigin.incompressible(atlasBytes))
        }
    }

    @Test("kiosk download --app-store-transaction resumes after a cut; after a REFUND notification the same proof is refused")
    func downloadResumeRefund() async throws {
        let setup = try await Setup()
        let (directory, store, chain, rootFile, home, server) = (setup.directory, setup.store, setup.chain, setup.rootFile, setup.home, setup.server)
        let environment = setup.environment
        let atlasBytes = setup.atlasBytes
        let (jws, jwsFile) = (setup.jws, setup.jwsFile)

        // `kiosk appstore verify` agrees with the server, offline.
        let verified = try await KioskCommand.run(["appstore", "verify", jwsFile.path, "--root", rootFile.path, "--bundle-id", Self.bundleId, "--environment", "sandbox"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("\"transactionId\" : \"9000\""))
        let otherApp = try await KioskCommand.run(["appstore", "verify", jwsFile.path, "--root", rootFile.path, "--bundle-id", "com.other", "--json"])
        #expect(otherApp.status == 1)
        #expect(otherApp.stdout.contains("\"reason\":\"bundle\""))
        let appleRoot = try await KioskCommand.run(["appstore", "verify", jwsFile.path])
        #expect(appleRoot.status == 1)
        #expect(appleRoot.stderr.contains("refused (chain)"))

        // A throttled download, cut by SIGKILL midway.
        let slow = Process()
        slow.executableURL = KioskCommand.executable
        slow.arguments = ["download", Self.atlas, "--app-store-transaction", jwsFile.path]
        slow.environment = ProcessInfo.processInfo.environment.merging(["KIOSK_HOME": home, "KIOSK_MAX_RECEIVE_SPEED": "2000000"]) { $1 }
        slow.standardOutput = FileHandle.nullDevice
        slow.standardError = FileHandle.nullDevice
        try slow.runAlone()
        let partial = URL(fileURLWithPath: home).appendingPathComponent("downloads/\(Self.atlas).partial")
        let size = { (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0 }
        for _ in 0..<300 where size() < 2 << 20 {
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(slow.processIdentifier, SIGKILL)
        try await offCooperativePool { slow.waitForExit() }
        let kept = size()
        let archiveSize = try await AtlasHome.catalogSize(home: home)
        #expect(kept >= 2 << 20 && kept < archiveSize)

        // Resumed from the bytes kept, with the same App Store proof.
        let resumed = try await KioskCommand.run(["resume"], environment: environment)
        #expect(resumed.status == 0, "\(resumed.stdout) \(resumed.stderr)")
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        // Only the bytes missing were sent again.
        #expect(kept + AtlasHome.received(resumed.stdout) == archiveSize, "\(resumed.stdout)")
        let installed = URL(fileURLWithPath: home).appendingPathComponent("Library/\(Self.atlas)/plates.bin")
        #expect(try Data(contentsOf: installed) == TestOrigin.incompressible(atlasBytes))

        // Apple refunds it: the notification withdraws the transaction, and the proof is refused.
        let http = StoreHTTP(baseURL: server.url)
        let refunded = try chain.transaction(id: "9000", productId: Self.appStoreAtlas, revoked: Date())
        let notification = try chain.notification(type: "REFUND", signedTransaction: refunded)
        #expect(try await http.send("POST", "/v1/appstore/notifications", json: #"{"signedPayload": "\#(notification)"}"#).status == 200)
        let admin = try await KioskCommand.run(["admin", "appstore", "--server", server.url, "--data", store.data.path])
        #expect(admin.stdout.contains("REFUND"), "\(admin.stderr)")

        let refused = try await KioskCommand.run(
            ["fetch", "\(server.url)/v1/content/\(Self.atlas)", "-o", directory.path("again.zip").path, "--header", "Authorization: AppStore \(jws)"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("403"), "\(refused.stderr)")

        // The reader's copy is lost; the same download, with the same proof, is refused for good, with the reason.
        try FileManager.default.removeItem(at: URL(fileURLWithPath: home).appendingPathComponent("Library/\(Self.atlas)"))
        let again = try await KioskCommand.run(["resume"], environment: environment)
        #expect(again.status == 1, "\(again.stdout) \(again.stderr)")
        let downloads = try await KioskCommand.run(["downloads", "--json"], environment: environment).stdout
        #expect(downloads.contains("\"state\":\"failed\""), "\(downloads)")
        #expect(downloads.contains("refunded by the App Store"), "\(downloads)")
        _ = await server.stop()
    }

    @Test("kiosk download --app-store-transaction with the store down waits (exit 3), and is retried when due")
    func deferredRetry() async throws {
        var setup = try await Setup()
        _ = await setup.server.stop()
        let waiting = try await KioskCommand.run(["download", Self.atlas, "--app-store-transaction", setup.jwsFile.path], environment: setup.environment)
        #expect(waiting.status == 3, "\(waiting.stdout) \(waiting.stderr)")
        let downloads = try await KioskCommand.run(["downloads", "--json"], environment: setup.environment).stdout
        #expect(downloads.contains("\"state\":\"waiting\""), "\(downloads)")

        setup.server = try await ServerProcess.start(setup.store, extraArguments: setup.serverArguments, log: setup.directory.path("server2.log"))
        let resumed = try await KioskCommand.run(["resume", "--wait", "--max-wait", "30", "--server", setup.server.url], environment: setup.environment)
        #expect(resumed.status == 0, "\(resumed.stdout) \(resumed.stderr)")
        try setup.expectInstalledByteExact()
        _ = await setup.server.stop()
    }
}
