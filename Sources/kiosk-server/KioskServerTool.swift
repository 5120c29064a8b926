import ArgumentParser
import Foundation
import KioskCommandLine
import Logging

/// `kiosk-server`: the store's own commands. `kiosk serve`, `kiosk publish` and `kiosk keys` run
/// this program in place of `kiosk`, so either spelling works.
@main
struct KioskServerTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kiosk-server",
        abstract: "The store's server, its publisher and its signing keys (run as kiosk serve, kiosk publish, kiosk keys).",
        discussion: """
            Exit status: 0 done, 1 failed, 2 usage error.

            Example: kiosk serve --catalog Catalog --content Content --port 0
            """,
        version: VersionInfo.text,
        subcommands: [Serve.self, Publish.self, Keys.self, Admin.self]
    )

    static func main() async {
        await CommandMain.run(Self.self, logLevel: ProcessInfo.processInfo.environment["KIOSK_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)))
    }
}
