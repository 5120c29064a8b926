import ArgumentParser
import Foundation
import KioskCommandLine
import KioskArchive

extension Kiosk {
    struct Unpack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unpack a zip or tar archive safely, as the library does.",
            discussion: """
                Refuses absolute paths, `..`, links outside the folder, devices and FIFOs, naming the entry; \
                stops at 100,000 entries, 1 GiB per entry or max(1 GiB, 50 × the archive) in all.

                Example: kiosk unpack issue.tar.gz -C issue/
                """
        )

        @Argument(help: "The archive.")
        var archive: String

        @Option(name: .customShort("C"), help: ArgumentHelp("The folder to unpack into; created if missing, must be empty.", valueName: "dir"))
        var directory = "."

        func run() async throws {
            try await reportingErrors {
                let destination = URL(fileURLWithPath: directory)
                try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
                let summary = try ArchiveExtractor().extract(URL(fileURLWithPath: archive), into: destination)
                print("unpacked \(summary.entries) entries, \(summary.bytes) bytes into \(destination.path)")
            }
        }
    }
}
