import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient

extension Kiosk {
    struct Fetch: AsyncParsableCommand {
        /// The longest --max-time taken: 30 days (a Duration cannot hold any number of seconds).
        static let longestMaxTime: Double = 30 * 86_400

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

        @Flag(help: "Create the folders of -o FILE that do not exist (as curl --create-dirs).")
        var createDirs = false

        @Option(name: .customShort("C"), help: ArgumentHelp("Only `-`: continue from FILE.partial, which kiosk fetch always does (curl -C -).", valueName: "-"))
        var continueAt: String?

        @Flag(name: [.customShort("c"), .customLong("continue")], help: "Continue from FILE.partial (the default; as wget -c).")
        var continueFlag = false

        @Flag(name: [.customShort("O"), .customLong("remote-name")], help: "Name the file after the URL (the default without -o; as curl -O).")
        var remoteName = false

        @Option(help: ArgumentHelp("Retry a transient failure up to N times (default 4).", valueName: "N"))
        var retry: Int?

        @Option(help: ArgumentHelp("Give up after this many seconds; the partial file is kept (exit status 3).", valueName: "seconds"))
        var maxTime: Double?

        @Flag(name: [.customShort("s"), .customShort("q"), .customLong("silent"), .customLong("quiet")],
              help: "No progress and no summary line; errors still go to stderr (as curl -sS, wget -q).")
        var silent = false

        @Flag(help: "Print the result as JSON: {url, path, size, sha256, bytesReceived, attempts}.")
        var json = false

        func validate() throws {
            let scheme = url.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
            guard url.contains("://"), scheme == "http" || scheme == "https" else {
                throw ValidationError(url.contains("://")
                    ? "\(scheme):// is not supported; kiosk fetch downloads http:// and https:// URLs"
                    : "\(url) is not a URL; give an http:// or https:// URL")
            }
            if let continueAt, continueAt != "-" {
                throw ValidationError("-C takes only - (kiosk fetch always continues from FILE.partial at its own length), not \"\(continueAt)\"")
            }
            if let retry, !(0...100).contains(retry) { throw ValidationError("--retry must be between 0 and 100") }
            if let maxTime, !(maxTime > 0 && maxTime <= Self.longestMaxTime) {
                throw ValidationError("--max-time must be a number of seconds above 0 and at most \(Int(Self.longestMaxTime)) (30 days)")
            }
            if remoteName, output != nil { throw ValidationError("-O and -o name the file both; give one of them") }
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
                    try Self.checkFolder(of: target, create: createDirs)
                    try Self.checkWritable(target, force: force)
                    try Self.checkWritable(target.appendingPathExtension("partial"), force: true)
                }
                var fetch = URLFetch(url: url, output: target, expectedSHA256: sha256, headers: parsed)
                let configuration = KioskClient.Configuration(environment: ProcessInfo.processInfo.environment)
                fetch.stallSeconds = configuration.stallSeconds
                fetch.maxReceiveSpeed = configuration.maxReceiveSpeed
                if let retry { fetch.attempts = retry + 1 }
                let configured = fetch
                let display = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1)
                let quiet = silent || json
                let result: URLFetch.Result
                do {
                    result = try await Self.within(maxTime) { try await configured.run { if !quiet { display.show($0) } } }
                } catch is TimeLimitReached {
                    display.finish()
                    standardError("\(url): gave up after \(Self.seconds(maxTime ?? 0)) (--max-time); the partial file is kept, run the same command again to continue")
                    throw ExitCode.partlyDone
                }
                display.finish()
                let summary = "\(result.size) bytes, SHA-256 \(result.sha256), \(result.bytesReceived) bytes received"
                if scratch != nil {
                    try Self.copy(target, to: FileHandle.standardOutput)
                    if !quiet { standardError("fetched \(url): \(summary)") }
                } else if json {
                    try JSONOutput.print(JSONOutput.Fetch(url: url, path: target.path, size: result.size, sha256: result.sha256,
                                                          bytesReceived: result.bytesReceived, attempts: result.attempts))
                } else if !silent {
                    print("saved \(target.path): \(summary)")
                }
            }
        }

        /// The folder a file goes in must exist, unless asked to create it: a typo in `-o` must
        /// not leave a tree of new folders behind.
        static func checkFolder(of file: URL, create: Bool) throws {
            let folder = file.deletingLastPathComponent()
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder) {
                guard isFolder.boolValue else { throw ValidationError("\(folder.path) is not a folder; check -o") }
                return
            }
            guard create else {
                throw ValidationError("the folder \(folder.path) does not exist; create it, or pass --create-dirs")
            }
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }

        /// Runs `body`, cancelling it after `limit` seconds (no limit when nil).
        static func within<T: Sendable>(_ limit: Double?, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
            guard let limit else { return try await body() }
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(for: .seconds(limit))
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let value = first else { throw TimeLimitReached() }
                return value
            }
        }

        struct TimeLimitReached: Error {}

        static func seconds(_ value: Double) -> String {
            value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
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
