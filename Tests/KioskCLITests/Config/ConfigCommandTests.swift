import Foundation
import GRDB
import KioskTestSupport
import Testing

/// `kiosk config`: the remembered server and the device's settings, each naming the database it is
/// kept in.
@Suite("kiosk config and the remembered server")
struct ConfigCommandTests {
    typealias Setup = SyncedHome

    /// A port nothing listens on.
    static let deadServer = "http://127.0.0.1:9"

    @Test("a --server whose first request failed is not remembered; kiosk config gets, sets and unsets it, naming the database")
    func rememberedServer() async throws {
        let setup = try await Setup()
        let database = "\(setup.home)/kiosk.sqlite"
        let wrong = try await setup.kiosk("sync", "--server", Self.deadServer)
        #expect(wrong.status == 1)
        #expect(wrong.stderr == "kiosk: cannot reach \(Self.deadServer)/v1/catalog (nothing answers at that address and port (connection refused or unreachable)); check the server is running and try again\n")
        #expect(try await setup.kiosk("config", "get", "server").stdout == "server = \(setup.server.url)  (in \(database))\n")
        #expect(try await setup.kiosk("sync").status == 0)

        // A fresh home remembers nothing from a failed first request.
        let fresh = ["KIOSK_HOME": setup.directory.path("fresh").path]
        #expect(try await KioskCommand.run(["sync", "--server", Self.deadServer], environment: fresh).status == 1)
        #expect(try await KioskCommand.run(["config", "get", "server"], environment: fresh).stdout
                == "server = (unset)  (in \(setup.directory.path("fresh").path)/kiosk.sqlite)\n")
        let none = try await KioskCommand.run(["sync"], environment: fresh)
        #expect(none.stderr == "kiosk: no server is known yet; pass --server URL or set KIOSK_SERVER\n")

        let set = try await setup.kiosk("config", "set", "server", setup.server.url + "/")
        #expect(set.stdout == "server = \(setup.server.url)  (saved in \(database))\n")
        let ftp = try await setup.kiosk("config", "set", "server", "ftp://example.com")
        #expect(ftp.status == 2)
        #expect(ftp.stderr == "kiosk: ftp:// is not supported; a Kiosk store is reached over http:// or https:// (e.g. --server http://127.0.0.1:8080) (--help shows the usage)\n")
        // A query would land in the middle of every request's path (found by an attack: "?x=1/v1/catalog answered 404").
        let query = try await setup.kiosk("config", "set", "server", setup.server.url + "?x=1")
        #expect(query.status == 2 && query.stderr.contains("has a query or a fragment; give the store's base URL alone"), "\(query.stderr)")
        #expect(try await setup.kiosk("config", "payments", "off").stdout == "payments off\n")
        // Every setting, each with where it comes from; the download policy's at their defaults (the
        // storage floor's figure is the disk's own).
        let listed = try await setup.kiosk("config").stdout.split(separator: "\n").map(String.init)
        #expect(Array(listed.prefix(5)) == [
            "server = \(setup.server.url)  (in \(database))",
            "payments = off  (in \(database))",
            "download-network = any  (the default; in \(database))",
            "battery-floor = none  (the default; in \(database))",
            "charging-only = off  (the default; in \(database))",
        ], "\(listed)")
        #expect(listed.count == 7 && listed[5].hasPrefix("keep-free = ") && listed[5].contains(", 5 % of the disk, at most 1 GiB  (the default; in \(database))")
                && listed[6] == "(settings in \(database))", "\(listed)")
        #expect(try await setup.kiosk("config", "unset", "payments").stdout == "payments unset  (in \(database))\n")
        #expect(try await setup.kiosk("config", "get", "payments").stdout == "payments = on  (the default; in \(database))\n")
        #expect(try await setup.kiosk("config", "unset", "server").stdout == "server unset  (in \(database))\n")
        #expect(try await setup.kiosk("sync").status == 1)
    }
}
