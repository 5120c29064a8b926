import ArgumentParser
import Foundation
import KioskCommandLine
@_spi(Testing) import KioskClient

/// Where the client keeps its state and which server it talks to; shared by every client command.
struct ClientOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The client's state folder (default: $KIOSK_HOME, else $XDG_DATA_HOME/kiosk).", valueName: "dir"))
    var home: String?

    @Option(name: .long, help: ArgumentHelp("The server's base URL (default: $KIOSK_SERVER, else the last one used).", valueName: "url"))
    var server: String?

    func validate() throws {
        // A URL that cannot be a Kiosk store (ftp://, a bare host) is refused before anything runs.
        if let server {
            do {
                _ = try KioskClient.checkServerURL(server)
            } catch {
                throw ValidationError("--server: \(error)")
            }
        }
    }

    /// Opens the client's state (``KioskClient/open(home:server:)``), replaying nothing: a
    /// command that sends or shows purchases opens it with ``DownloadRunner/connect(_:)``.
    func client() throws -> KioskClient {
        try KioskClient.open(home: home, server: server)
    }
}

/// One line on stderr, prefixed with the tool's name.
func standardError(_ line: String) {
    BufferedLog.standardError.write("kiosk: \(line)\n")
}
