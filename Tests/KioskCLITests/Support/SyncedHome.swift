import Foundation
import KioskTestSupport
import Testing

/// A running server and a synced KIOSK_HOME.
struct SyncedHome {
    let directory: TemporaryDirectory
    let store: SampleStore
    let server: ServerProcess
    let home: String

    init() async throws {
        directory = try TemporaryDirectory()
        store = try SampleStore(in: directory)
        server = try await ServerProcess.start(store, log: directory.path("server.log"))
        home = directory.path("home").path
        let sync = try await KioskCommand.run(["sync", "--server", server.url], environment: ["KIOSK_HOME": home])
        #expect(sync.status == 0, "\(sync.stderr)")
    }

    func kiosk(_ arguments: String..., environment: [String: String] = [:]) async throws -> KioskCommand.Result {
        try await KioskCommand.run(arguments, environment: environment.merging(["KIOSK_HOME": home]) { $1 })
    }

    func transactions() async throws -> [[String: Any]] {
        let result = try await kiosk("transactions", "--json")
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
    }

    func charges() async throws -> [Int] {
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let account = try await kiosk("account").stdout
        let id = account.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) } ?? ""
        return try await StoreHTTP(baseURL: server.url).charges(accountId: id, adminToken: adminToken)
    }
}
