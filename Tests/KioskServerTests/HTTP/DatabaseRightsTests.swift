import Foundation
import KioskCore
@testable import KioskStore
import KioskTestSupport
import Logging
import Testing

/// A database that refuses the store until its operator acts is said to be so, not "send again".
@Suite("A database that refuses the store")
struct DatabaseRightsTests {
    static let pack5 = "com.kiosk.credits.pack-5"

    @Test("a right revoked from the store's PostgreSQL role: the purchase is a 503 that names the operator and asks for a later retry, nothing is charged, the log says what to mend; once granted back, the same key charges once; a token looked up then answers the same 503, logged")
    func revokedRightNamesTheOperator() async throws {
        let database = try await TestPostgres.shared.ordinaryRoleDatabase()
        let role = database.role
        let folder = try TemporaryDirectory()
        let log = folder.path("server.log")
        let server = try await ServerProcess.start(try SampleStore(in: folder), extraArguments: ["--database", database.url], log: log)
        let http = StoreHTTP(baseURL: server.url)
        let account = try await http.createAccount()
        #expect(try await http.pay(Self.pack5, token: account.token).status == 200)

        try database.psql(#"REVOKE INSERT ON "ledgerEntry" FROM \#(role)"#)
        let key = UUID().uuidString
        let refused = try await http.pay(Self.pack5, token: account.token, key: key)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == "60")
        let failure = try refused.decode(APIError.self)
        #expect(failure.code == "unavailable" && failure.message.contains("operator") && failure.message.contains("later"), "\(failure)")
        let credits = { try await http.send("GET", "/v1/account", token: account.token).decode(AccountSummary.self).credits }
        #expect(try await credits() == 5)

        try database.psql(#"GRANT INSERT ON "ledgerEntry" TO \#(role)"#)
        #expect(try await http.pay(Self.pack5, token: account.token, key: key).status == 200)
        #expect(try await http.pay(Self.pack5, token: account.token, key: key).status == 200)
        #expect(try await credits() == 10)

        // The token looked up while its table cannot be read: the same 503, logged, not an empty
        // 500 from before the request log. A call that needs no account still answers.
        let other = try await http.createAccount()
        try database.psql(#"REVOKE SELECT ON "device" FROM \#(role)"#)
        let lookedUp = try await http.send("GET", "/v1/account", token: other.token)
        #expect(lookedUp.status == 503 && lookedUp.header("Retry-After") == "60", "\(lookedUp.status) \(String(decoding: lookedUp.body, as: UTF8.self))")
        #expect(try lookedUp.decode(APIError.self).code == "unavailable")
        let verify = try await http.send("POST", "/verifyReceipt", token: "not-a-token-\(UUID().uuidString)", json: #"{"receipt-data": "AAAA"}"#)
        #expect(verify.status == 503, "\(verify.status)")
        #expect(try await http.send("GET", "/v1/catalog", token: other.token).status == 200)
        try database.psql(#"GRANT SELECT ON "device" TO \#(role)"#)
        #expect(try await http.send("GET", "/v1/account", token: other.token).status == 200)
        _ = await server.stop()

        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("permission denied for table ledgerEntry") && text.contains("will until this is mended"), "\(text.suffix(2_000))")
        #expect(text.contains("permission denied for table device") && text.contains("status=503"), "\(text.suffix(2_000))")
        try database.drop()
    }

    @Test("a SQLite store whose -shm file cannot be written (made immutable) refuses to start naming that file and how to mend it, not the database in general terms; writable again, it opens")
    func immutableSharedMemoryFile() async throws {
        let chattr = "/usr/bin/chattr"
        try #require(FileManager.default.isExecutableFile(atPath: chattr), "chattr (Debian's e2fsprogs) is needed to make a file immutable")
        let folder = try TemporaryDirectory()
        let path = folder.path("store.sqlite").path
        let first = try await ServerDatabase.open(.sqlite(path: path), logger: Logger(label: "test"))
        await first.close()
        FileManager.default.createFile(atPath: path + "-shm", contents: Data())
        let made = try ToolProcess.run(chattr, ["+i", path + "-shm"])
        try #require(made.status == 0, "chattr +i failed: \(made.output)")
        defer { _ = try? ToolProcess.run(chattr, ["-i", path + "-shm"]) }
        let refused = await #expect(throws: ServerSetupError.self) {
            let database = try await ServerDatabase.open(.sqlite(path: path), logger: Logger(label: "test"))
            await database.close()
        }
        #expect(refused?.path == path + "-shm" && refused?.description.contains("chattr -i") == true, "\(String(describing: refused))")
        _ = try ToolProcess.run(chattr, ["-i", path + "-shm"])
        let reopened = try await ServerDatabase.open(.sqlite(path: path), logger: Logger(label: "test"))
        await reopened.close()
    }
}
