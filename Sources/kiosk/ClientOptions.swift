import ArgumentParser
import Foundation
import KioskClient

/// Where the client keeps its state and which server it talks to; shared by every client command.
struct ClientOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The client's state folder (default: $KIOSK_HOME, else $XDG_DATA_HOME/kiosk).", valueName: "dir"))
    var home: String?

    @Option(name: .long, help: ArgumentHelp("The server's base URL (default: $KIOSK_SERVER, else the last one used).", valueName: "url"))
    var server: String?

    /// Opens the client's state.
    func client() throws -> KioskClient {
        LogSetup.bootstrap()
        return try KioskClient(home: KioskHome.resolve(flag: home))
    }

    /// The server given by flag or environment, or the remembered one.
    func serverURL(for client: KioskClient) async throws -> String {
        try await client.server(explicit: server ?? ProcessInfo.processInfo.environment["KIOSK_SERVER"])
    }

    /// The client and its server, after replaying whatever an earlier run left unfinished.
    func connect() async throws -> (client: KioskClient, server: String) {
        let client = try client()
        let server = try await serverURL(for: client)
        let report = try await client.replay(server: server)
        if report.sent + report.finished + report.deferredResolved > 0 {
            FileHandle.standardError.write(Data("kiosk: completed unfinished work: \(report.sent) sent, \(report.finished) finished, \(report.deferredResolved) Ask to Buy answered\n".utf8))
        }
        return (client, server)
    }
}
