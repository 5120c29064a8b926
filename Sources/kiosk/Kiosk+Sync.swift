import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bring the local catalog up to date with the server.",
            discussion: """
                Prints how many products were added, changed and removed (and which, up to 50), or \
                `catalog unchanged`. \
                A server that cannot be reached leaves the local catalog as it was.

                Example: kiosk sync --server http://127.0.0.1:8080
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print what changed as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                let report = try await client.sync()
                let queued = report.queued
                if json {
                    let output = Output(unchanged: report.notModified, added: report.added, changed: report.changed, removed: report.removed, queued: queued)
                    print(String(decoding: try JSONEncoder.kiosk.encode(output), as: UTF8.self))
                    return
                }
                if report.notModified {
                    print("catalog unchanged")
                } else {
                    print("catalog synced: \(report.added.count) added, \(report.changed.count) changed, \(report.removed.count) removed")
                    // A first sync of a large store would print a line per product: past a
                    // screenful, the counts say it and --json lists them.
                    let changes = report.added.count + report.changed.count + report.removed.count
                    if changes <= Self.listedChanges {
                        for id in report.added { print("  + \(id)") }
                        for id in report.changed { print("  ~ \(id)") }
                        for id in report.removed { print("  - \(id)") }
                    } else {
                        print("  (\(changes) changes; kiosk sync --json lists them, kiosk products shows the catalog)")
                    }
                }
                for id in queued {
                    print("queued \(id) (your subscription covers it; kiosk resume downloads it)")
                }
            }
        }

        /// The most changed products listed one per line.
        static let listedChanges = 50

        struct Output: Encodable {
            var unchanged: Bool
            var added: [String]
            var changed: [String]
            var removed: [String]
            /// Issues an active subscription covers, queued for download.
            var queued: [String]
        }
    }
}
