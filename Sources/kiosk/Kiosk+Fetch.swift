import ArgumentParser
import Foundation
import KioskClient

extension Kiosk {
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download any URL with Kiosk's resumable downloader.",
            discussion: """
                Resumes from FILE.partial with Range and If-Range, retries transient failures with backoff,
                and checks the SHA-256 at the end when --sha256 is given. Interrupted, it keeps the partial
                file: run the same command again to continue.

                Example: kiosk fetch https://cdn.example.com/atlas.zip -o atlas.zip --sha256 2daf76…
                """
        )

        @Argument(help: "The URL to download.")
        var url: String

        @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Where to save it (default: the URL's last path component).", valueName: "file"))
        var output: String?

        @Option(help: ArgumentHelp("The expected SHA-256, in hex.", valueName: "hex"))
        var sha256: String?

        @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value'; repeatable.", valueName: "header"))
        var headers: [String] = []

        func validate() throws {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw ValidationError("\(url) is not an http or https URL")
            }
            for header in headers where !header.contains(":") {
                throw ValidationError("--header \"\(header)\" must look like 'Name: value'")
            }
            if let sha256, sha256.count != 64 || !sha256.allSatisfy(\.isHexDigit) {
                throw ValidationError("--sha256 must be 64 hex digits")
            }
        }

        func run() async throws {
            LogSetup.bootstrap()
            try await reportingErrors {
                let name = output ?? URL(string: url)?.lastPathComponent ?? "download"
                let parsed = headers.map { header -> (name: String, value: String) in
                    let colon = header.firstIndex(of: ":") ?? header.endIndex
                    return (String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                var fetch = URLFetch(url: url, output: URL(fileURLWithPath: name.isEmpty ? "download" : name), expectedSHA256: sha256, headers: parsed)
                let configuration = ClientOptions.configuration(ProcessInfo.processInfo.environment)
                fetch.stallSeconds = configuration.stallSeconds
                fetch.maxReceiveSpeed = configuration.maxReceiveSpeed
                let display = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1)
                let result = try await fetch.run { display.show($0) }
                display.finish()
                print("saved \(name): \(result.size) bytes, SHA-256 \(result.sha256), \(result.bytesReceived) bytes received")
            }
        }
    }
}
