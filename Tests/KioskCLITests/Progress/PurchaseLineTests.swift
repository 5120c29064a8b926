import Foundation
import GRDB
import KioskTestSupport
import Testing

/// The line that says a purchase is made and its receipt saved, which comes before the download
/// ends (on a terminal, above the progress line; off one, as a line of its own), and what a
/// Ctrl-C leaves behind.
@Suite("The purchase line before the download ends, on a terminal and off")
struct PurchaseLineTests {
    @Test("off a terminal, buy says the receipt is saved before the download ends; inside kiosk resume nothing says to run kiosk resume")
    func purchaseLineBeforeDownload() async throws {
        let setup = try await AtlasHome(buy: false)
        let buy = try setup.startSlow(["buy", AtlasHome.atlas], log: "buy")
        try await setup.waitForPartial(atLeast: 1 << 20)
        #expect(buy.isRunning)
        let early = setup.output("buy").stdout
        #expect(early.range(of: #"^transaction txn_[0-9a-f]+: purchased com\.kiosk\.books\.atlas; receipt saved\n$"#, options: .regularExpression) != nil, "\(early)")
        kill(buy.processIdentifier, SIGINT)
        try await offCooperativePool { buy.waitForExit() }
        #expect(buy.terminationStatus == 3)
        let lines = setup.output("buy").stdout.split(separator: "\n")
        #expect(lines.first.map(String.init) == early.trimmingCharacters(in: .newlines))
        #expect(lines.filter { $0.contains("receipt saved") }.count == 1)
        #expect(lines.last?.hasPrefix("\(AtlasHome.atlas): interrupted;") == true && lines.last?.hasSuffix("kiosk resume continues from there") == true)

        let resume = try setup.startSlow(["resume"], log: "resume")
        try await Task.sleep(for: .milliseconds(800))
        kill(resume.processIdentifier, SIGINT)
        try await offCooperativePool { resume.waitForExit() }
        let said = setup.output("resume")
        #expect(resume.terminationStatus == 3)
        #expect(said.stdout.contains("\(AtlasHome.atlas): interrupted;") && said.stdout.contains("the same command continues from there"), "\(said)")
        #expect(!said.stdout.contains("kiosk resume") && !said.stderr.contains("kiosk resume"), "\(said)")
        _ = await setup.server.stop()
    }

    /// A command run on a pseudo-terminal (util-linux `script`), and what that terminal shows: the
    /// bytes it wrote, with carriage returns and erase-to-end-of-line applied as a terminal does.
    struct Terminal {
        let process = Process()
        let log: URL

        init(_ command: String, log: URL) throws {
            self.log = log
            process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            process.arguments = ["-qfec", command, log.path]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.runAlone()
        }

        /// The program `script` runs (its only child).
        var child: pid_t? {
            let pid = process.processIdentifier
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").first.flatMap { pid_t(String($0)) }
        }

        /// The screen's lines, oldest first, without script's own header and footer.
        func screen() -> [String] {
            // Unicode scalars, not Characters: "\r\n" is one Character in Swift.
            let text = Array(((try? String(contentsOf: log, encoding: .utf8)) ?? "").unicodeScalars)
            var lines: [String] = []
            var line: [Unicode.Scalar] = []
            var cursor = 0
            var index = 0
            func endLine() {
                let done = String(String.UnicodeScalarView(line))
                if !done.hasPrefix("Script started on "), !done.hasPrefix("Script done on ") { lines.append(done) }
                line = []
                cursor = 0
            }
            while index < text.count {
                let scalar = text[index]
                if scalar == "\u{1B}", index + 2 < text.count, text[index + 1] == "[", text[index + 2] == "K" {
                    line.removeSubrange(min(cursor, line.count)...)
                    index += 3
                    continue
                }
                index += 1
                switch scalar {
                case "\n": endLine()
                case "\r": cursor = 0
                default:
                    if cursor < line.count { line[cursor] = scalar } else { line.append(scalar) }
                    cursor += 1
                }
            }
            if !line.isEmpty { endLine() }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
    }

    @Test("on a terminal: progress is one line updated in place, the purchase line comes before the download ends, and Ctrl-C leaves one line and a resumable download",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func terminal() async throws {
        let setup = try await AtlasHome(buy: false)
        let terminal = try Terminal(
            "exec env TERM=xterm KIOSK_HOME=\(setup.home) KIOSK_MAX_RECEIVE_SPEED=1500000 \(KioskCommand.executable.path) buy \(AtlasHome.atlas)",
            log: setup.directory.path("terminal.log"))
        try await setup.waitForPartial(atLeast: 2 << 20)
        try await Task.sleep(for: .milliseconds(600))
        let during = terminal.screen()
        #expect(during.count == 2, "\(during)")
        #expect(during.first?.range(of: #"^transaction txn_[0-9a-f]+: purchased com\.kiosk\.books\.atlas; receipt saved$"#, options: .regularExpression) != nil, "\(during)")
        #expect(during.last?.range(of: #"^com\.kiosk\.books\.atlas: [0-9.]+ MiB of [0-9.]+ MiB \([0-9]+%\)"#, options: .regularExpression) != nil, "\(during)")

        let kiosk = try #require(terminal.child)
        kill(kiosk, SIGINT)
        try await offCooperativePool { terminal.process.waitForExit() }
        #expect(terminal.process.terminationStatus == 3)
        let after = terminal.screen()
        #expect(after.count == 3 && after.first == during.first && after.dropFirst().first?.hasPrefix("received ") == true, "\(after)")
        #expect(after.last?.hasPrefix("\(AtlasHome.atlas): interrupted; ") == true, "\(after)")
        #expect(!after.contains { $0.contains("/s") }, "the progress line was left on the screen: \(after)")
        let kept = setup.partialSize()
        #expect(kept >= 2 << 20)
        let resume = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(AtlasHome.received(resume.stdout) == setup.archiveSize - kept)
        _ = await setup.server.stop()
    }
}
