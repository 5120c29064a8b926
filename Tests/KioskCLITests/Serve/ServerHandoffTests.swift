import Foundation
import KioskTestSupport
import Testing

@Suite("kiosk hands serve, publish and keys to kiosk-server")
struct ServerHandoffTests {
    @Test("kiosk serve becomes kiosk-server in the same process: its PID runs kiosk-server, answers, and stops on SIGTERM with status 0")
    func serveRunsInPlace() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        // The PID the test started as `kiosk` is now kiosk-server's (execv, not a child).
        let running = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server.process.processIdentifier)/exe")
        #expect(URL(fileURLWithPath: running).lastPathComponent == "kiosk-server")
        let sync = try await KioskCommand.run(["sync", "--home", directory.path("home").path, "--server", server.url])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(await server.stop() == 0)
    }

    @Test("help for a server command is kiosk-server's, with its options; a usage error is its exit status 2")
    func helpAndUsage() async throws {
        for arguments in [["serve", "--help"], ["help", "serve"]] {
            let help = try await KioskCommand.run(arguments)
            #expect(help.status == 0)
            #expect(help.stdout.contains("--content-delivery"), "\(arguments)")
        }
        let keys = try await KioskCommand.run(["keys", "--help"])
        #expect(keys.stdout.contains("rotate"))
        let wrong = try await KioskCommand.run(["serve", "--port", "99999"])
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("--port must be between 0 and 65535"))
        // The reader's own commands stay kiosk's.
        #expect(try await KioskCommand.run(["--help"]).stdout.contains("sync"))
    }

    @Test("a kiosk with no kiosk-server beside it or on PATH says so in one line, exit 1; a client command still works")
    func serverMissing() async throws {
        let directory = try TemporaryDirectory()
        let alone = directory.path("bin/kiosk")
        try FileManager.default.createDirectory(at: alone.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: KioskCommand.executable, to: alone)
        let environment = ["PATH": "/usr/bin:/bin", "KIOSK_HOME": directory.path("home").path]
        for command in ["serve", "publish", "keys"] {
            let result = try await KioskCommand.run([command], environment: environment, program: alone)
            #expect(result.status == 1)
            #expect(result.stderr == "kiosk: \(command) is run by kiosk-server, which is neither beside this kiosk nor on PATH; install it with kiosk\n")
        }
        let products = try await KioskCommand.run(["products"], environment: environment, program: alone)
        #expect(products.status != 2, "\(products.stderr)")
        #expect(!products.stderr.contains("kiosk-server"))
    }
}
