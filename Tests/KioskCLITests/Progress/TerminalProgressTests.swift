import Foundation
import KioskTestSupport
import Testing

@Suite("what a terminal shows during kiosk buy (tmux)")
struct TerminalProgressTests {
    static let atlas = "com.kiosk.books.night-sky-atlas"

    @Test("progress is one line on stderr updated in place; Ctrl-C leaves one line and a download kiosk resume finishes")
    func progressAndInterrupt() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let environment = ["KIOSK_HOME": home]
        #expect(try await KioskCommand.run(["sync", "--server", server.url], environment: environment).status == 0)

        // Stdout goes to a file, so that what the terminal shows of the download is stderr alone;
        // then the file is shown too, as the person would see it without the redirection.
        let out = directory.path("buy.out").path
        // The shell traps SIGINT (a trap, unlike an ignored signal, is not inherited) so that it
        // outlives Ctrl-C and shows what kiosk left.
        let command = "trap true INT; KIOSK_HOME='\(home)' KIOSK_MAX_RECEIVE_SPEED=100000 '\(KioskCommand.executable.path)' buy \(Self.atlas) --server '\(server.url)' > '\(out)'; "
            + "echo \"exit status $?\"; cat '\(out)'; echo '(shown)'; sleep 600"
        let terminal = try TerminalSession(command)
        let progressPrefix = "\(Self.atlas): "
        func progressLines(_ screen: [String]) -> [String] {
            screen.filter { $0.hasPrefix(progressPrefix) && $0.contains("%)") }
        }
        func percent(_ line: String) -> Int? {
            line.split(separator: "(").last?.split(separator: "%").first.flatMap { Int($0) }
        }

        // Two screens a moment apart: each has the progress as its only line, and the second's
        // percentage is further on (the line was rewritten, not a new one added).
        let first = try await terminal.waitForScreen { progressLines($0).contains { (percent($0) ?? 0) >= 10 } }
        try await Task.sleep(for: .seconds(1.5))
        let second = try await terminal.waitForScreen(timeout: .seconds(5)) { screen in
            progressLines(screen).contains { (percent($0) ?? 0) > (progressLines(first).first.flatMap(percent) ?? 100) }
        }
        for screen in [first, second] {
            #expect(screen.count == 1 && progressLines(screen).count == 1, "the screen during the download: \(screen)")
            if let line = screen.first {
                let shape = #/^com\.kiosk\.books\.night-sky-atlas: [0-9.]+ (B|KiB) of [0-9.]+ KiB \(\d+%\), \d+ s left, [0-9.]+ (B|KiB|MiB)/s$/#
                #expect(line.wholeMatch(of: shape) != nil, "progress line: \(line)")
            }
        }
        #expect((progressLines(second).first.flatMap(percent) ?? 0) > (progressLines(first).first.flatMap(percent) ?? 100), "\(first) then \(second)")

        try terminal.send("C-c")
        // Read once the shell has shown all of it: a screen taken between its echo and its cat
        // held the status line alone (one run in a busy-loop series).
        let stopped = try await terminal.waitForScreen { $0.contains("(shown)") }.filter { $0 != "(shown)" }
        let transaction = try #require(stopped.first { $0.hasPrefix("transaction ") }?.split(separator: ":").first, "\(stopped)")
        let kept = try #require(stopped.first { $0.hasPrefix("\(Self.atlas): interrupted; ") }, "\(stopped)")
        let received = try #require(stopped.first { $0.hasPrefix("received ") }, "\(stopped)")
        // The progress line is gone (and the ^C echoed on it); what is left is what stdout said.
        #expect(stopped == [
            "exit status 3",
            "\(transaction): purchased \(Self.atlas); receipt saved",
            received,
            kept,
        ], "the screen after Ctrl-C: \(stopped)")
        #expect(received.wholeMatch(of: #/received \d+ bytes/#) != nil, "\(received)")
        #expect(kept.wholeMatch(of: #/com\.kiosk\.books\.night-sky-atlas: interrupted; [0-9.]+ KiB kept, kiosk resume continues from there/#) != nil, "\(kept)")

        let downloads = try await KioskCommand.run(["downloads"], environment: environment)
        let line = try #require(downloads.stdout.split(separator: "\n").first { $0.hasPrefix(Self.atlas) }, "\(downloads.stdout)")
        let waiting = try #require(line.wholeMatch(of: #/com\.kiosk\.books\.night-sky-atlas  waiting  ([0-9.]+) KiB/([0-9.]+) KiB.*/#), "\(line)")
        #expect((Double(waiting.output.1) ?? 0) > 0 && (Double(waiting.output.1) ?? 0) < (Double(waiting.output.2) ?? 0), "\(line)")

        let resumed = try await KioskCommand.run(["resume", "--server", server.url], environment: environment)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.split(separator: "\n").contains("installed \(Self.atlas) in \(home)/Library/\(Self.atlas)"), "\(resumed.stdout)")
        _ = await server.stop()
    }

    @Test("the purchase line is on the screen while the download runs, before it ends")
    func purchaseLineBeforeDownload() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let command = "trap true INT; KIOSK_HOME='\(home)' KIOSK_MAX_RECEIVE_SPEED=100000 '\(KioskCommand.executable.path)' buy \(Self.atlas) --server '\(server.url)'; "
            + "echo \"exit status $?\"; sleep 600"
        let terminal = try TerminalSession(command)
        let during = try await terminal.waitForScreen { screen in
            screen.contains { $0.hasPrefix("\(Self.atlas): ") && $0.contains("%)") }
        }
        // "transaction …: purchased …; receipt saved" is printed when the receipt is saved, before
        // the download, not after it ends.
        #expect(during.first?.wholeMatch(of: #/transaction [0-9A-Za-z_-]+: purchased com\.kiosk\.books\.night-sky-atlas; receipt saved/#) != nil,
                "the screen while downloading: \(during)")
        try terminal.send("C-c")
        try await terminal.waitForScreen { $0.contains { $0.hasPrefix("exit status ") } }
        _ = await server.stop()
    }

    @Test("kiosk resume on a terminal: the progress line is taken off before each outcome line, so none runs into it")
    func resumeOutcomeOnItsOwnLine() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let environment = ["KIOSK_HOME": home]
        let queued = try await KioskCommand.run(["buy", Self.atlas, "--no-download", "--server", server.url], environment: environment)
        #expect(queued.status == 0, "\(queued)")
        let command = "KIOSK_HOME='\(home)' KIOSK_MAX_RECEIVE_SPEED=400000 '\(KioskCommand.executable.path)' resume; echo \"exit status $?\"; sleep 600"
        let terminal = try TerminalSession(command)
        let screen = try await terminal.waitForScreen(timeout: .seconds(60)) { $0.contains { $0.hasPrefix("exit status ") } }
        #expect(screen.contains { $0.hasPrefix("installed \(Self.atlas) in ") }, "the screen after kiosk resume: \(screen)")
        #expect(!screen.contains { $0.contains("%)") }, "a progress line was left on the screen: \(screen)")
        #expect(screen.last == "exit status 0", "\(screen)")
        _ = await server.stop()
    }
}
