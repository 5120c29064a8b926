import ArgumentParser
import Foundation
import KioskClient

extension Kiosk {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the local catalog up to date with the server.",
            discussion: """
                Prints how many products were added, changed and removed, or `catalog unchanged`.
                A server that cannot be reached leaves the local catalog as it was.

                Example: kiosk sync --server http://127.0.0.1:8080
                """
        )

        @OptionGroup var options: ClientOptions

        func run() async throws {
            try await reportingErrors {
                let (client, server) = try await options.connect()
                let report = try await client.syncCatalog(server: server)
                if report.notModified {
                    print("catalog unchanged")
                } else {
                    print("catalog synced: \(report.added.count) added, \(report.changed.count) changed, \(report.removed.count) removed")
                    for id in report.added { print("  + \(id)") }
                    for id in report.changed { print("  ~ \(id)") }
                    for id in report.removed { print("  - \(id)") }
                }
                for id in try await client.queueNewContent(server: server, includingUpdates: false) {
                    print("queued \(id) (your subscription covers it; kiosk resume downloads it)")
                }
            }
        }
    }
}
