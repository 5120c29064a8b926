import ArgumentParser
import Foundation
import KioskCommandLine
import Logging

/// The `kiosk` command: the reader's client, and the way in to the store's server commands.
///
/// `serve`, `publish` and `keys` live in `kiosk-server` (see ``ServerHandoff``), so the client a
/// reader runs does not carry the server, PostgreSQL and a second SQLite in its memory.
@main
struct Kiosk: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kiosk",
        abstract: "A server-delivered content store for books and magazines.",
        discussion: """
            Run `kiosk serve` over a Catalog/ and Content/ folder; run the other commands as a reader.

            The store's own commands, serve, publish and keys, are run by kiosk-server (installed beside \
            kiosk); `kiosk serve --help` shows their options.

            Exit status: 0 done, 1 failed, 2 usage error, 3 partly done (saved, to be completed by a later command).

            Example: kiosk sync --server http://127.0.0.1:8080 && kiosk buy com.kiosk.books.river-of-maps
            """,
        version: VersionInfo.text(for: CommandLine.arguments),
        subcommands: [
            Sync.self, Products.self, Buy.self, Redeem.self, RedeemCode.self, Storefront.self, Transactions.self, Balance.self,
            Restore.self, Account.self, Login.self, Logout.self, Devices.self, Subscriptions.self, Play.self, Subscription.self, Config.self, Admin.self, Download.self, Downloads.self, Resume.self, Agent.self, Pause.self, Cancel.self, Library.self, Pin.self, Unpin.self, Keep.self, Open.self, Progress.self, Fetch.self, Unpack.self, AppStore.self,
        ]
    )

    /// A synchronous main that parks its thread while the command runs on Swift's task pool, and
    /// never returns: ``CommandMain/run(_:logLevel:alsoCommands:)`` ends the process. It replaces
    /// `static func main() async`, whose start (`dispatch_main`) ends the main thread with
    /// `pthread_exit`, and that unwinds the thread's stack through the program's unwind tables:
    /// 0.5 MiB of them made resident in every command (issue 44: a fetch within 24 MiB).
    /// So nothing in the client may wait on the main queue or the main actor: nothing drains them.
    static func main() {
        ServerHandoff.handOffIfServerCommand(CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
        let logLevel = ProcessInfo.processInfo.environment["KIOSK_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
        blockInterrupts()
        // Detached: `main` is the main actor's, whose queue this parked thread never drains.
        Task.detached {
            // Every command, not only those that download: Ctrl-C or SIGTERM cancels what it is
            // doing (a request under way included), and it says so and exits instead of dying mid-write.
            _ = try? await cancellingOnInterrupt {
                await CommandMain.run(Self.self, logLevel: logLevel, alsoCommands: ServerHandoff.commands.sorted())
            }
            CommandMain.end(ExitCode.success.rawValue)
        }
        while true {
            pause()
        }
    }
}
