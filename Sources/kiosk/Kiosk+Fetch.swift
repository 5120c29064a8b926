import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient

extension Kiosk {
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download any URL with Kiosk's resumable downloader.",
            discussion: """
                Resumes from FILE.partial with Range and If-Range, retries transient failures with backoff, \
                and checks the SHA-256 at the end when --sha256 is given. Interrupted, it keeps the partial \
                file: run the same command again to continue.

                Example: kiosk fetch https://cdn.example.com/atlas.zip -o atlas.zip --sha256 2daf76…
                """
        )

        @Argument(help: "The URL to download.")
        var url: String

        @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Where to save it; - for stdout (default: the last segment of the URL's path, as curl -O names it).", valueName: "file"))
        var output: String?

        @Option(help: ArgumentHelp("The expected SHA-256, in hex.", valueName: "hex"))
        var sha256: String?

        @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value'; repeatable.", valueName: "header"))
        var headers: [String] = []

        @Flag(help: "Replace a finished file that is already there.")
        var force = false

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
            if output == nil { _ = try Self.fileName(from: url) }
        }

        /// The file name `curl -O` would choose: the last segment of the URL's path exactly as
        /// written, never percent-decoded, so `%2e%2e%2f` stays a harmless name and not `../`.
        static func fileName(from url: String) throws -> String {
            let path = URLComponents(string: url)?.percentEncodedPath ?? ""
            let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
            guard !name.isEmpty, name != ".", name != ".." else {
                throw ValidationError("\(url) names no file; give one with -o FILE (or -o - for stdout)")
            }
            return name
        }

        func run() async throws {
            LogSetup.bootstrap()
            try await reportingErrors {
                let toStdout = output == "-"
                let parsed = headers.map { header -> (name: String, value: String) in
                    let colon = header.firstIndex(of: ":") ?? header.endIndex
                    return (String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                let scratch = toStdout ? try TemporaryFolder() : nil
                let target: URL
                if let scratch {
                    target = scratch.url.appendingPathComponent("download")
                } else {
                    target = URL(fileURLWithPath: try output ?? Self.fileName(from: url))
                    try Self.checkWritable(target, force: force)
                    try Self.checkWritable(target.appendingPathExtension("partial"), force: true)
                }
                var fetch = URLFetch(url: url, output: target, expectedSHA256: sha256, headers: parsed)
                let configuration = ClientOptions.configuration(ProcessInfo.processInfo.environment)
                fetch.stallSeconds = configuration.stallSeconds
                fetch.maxReceiveSpeed = configuration.maxReceiveSpeed
                let display = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1)
                let result = try await fetch.run { display.show($0) }
                display.finish()
                let summary = "\(result.size) bytes, SHA-256 \(result.sha256), \(result.bytesReceived) bytes received"
                if scratch != nil {
                    try Self.copy(target, to: FileHandle.standardOutput)
                    standardError("fetched \(url): \(summary)")
                } else {
                    print("saved \(target.path): \(summary)")
                }
            }
        }

        /// Kiosk writes only regular files: never through a link, a device or a folder, and never
        /// over a finished file unless asked to.
        static func checkWritable(_ file: URL, force: Bool) throws {
            var info = stat()
            guard lstat(file.path, &info) == 0 else { return }
            guard info.st_mode & S_IFMT == S_IFREG else {
                throw ValidationError("\(file.path) exists and is not a regular file; kiosk fetch writes only regular files (use -o - for stdout)")
            }
            guard force else {
                throw ValidationError("\(file.path) already exists; pass --force to replace it")
            }
        }

        static func copy(_ file: URL, to output: FileHandle) throws {
            let input = try FileHandle(forReadingFrom: file)
            defer { try? input.close() }
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                try output.write(contentsOf: chunk)
            }
        }
    }
}

/// A private folder under the system's temporary directory, removed when done.
final class TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kiosk-fetch-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
