import Foundation
import KioskTestSupport
import Testing

@Suite("Ctrl-C as a command starts")
struct EarlyInterruptTests {
    @Test("a SIGINT at any moment of a command's first 60 ms stops it: killed by it, or stopped and saying so; never ignored")
    func earlySignalIsNeverLost() async throws {
        try await HostileServer.run { server, url in
            // A body that never ends, 1 KiB every 50 ms: only the signal can stop the command.
            server.content = HostileServer.Answer(headers: [.contentType: "application/octet-stream"], pause: .milliseconds(50)) {
                let chunk = Data(repeating: 0x41, count: 1 << 10)
                return AnyIterator { chunk }
            }
            let work = try TemporaryDirectory()
            var ignored: [Int] = []
            // Until the command's signal sources exist there was a window (about 5 ms, some 10 ms
            // after start in the release build) where SIGINT was ignored; sweep past it.
            for delay in stride(from: 0, through: 60_000, by: 1_500) {
                let process = Process()
                process.executableURL = KioskCommand.executable
                process.arguments = ["fetch", "-s", url + "/v1/content/drip", "-o", work.path("drip-\(delay).bin").path]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.runAlone()
                usleep(useconds_t(delay))
                kill(process.processIdentifier, SIGINT)
                let stopped = try await offCooperativePool { () -> Bool in
                    for _ in 0..<100 where process.isRunning { usleep(50_000) }
                    return !process.isRunning
                }
                if !stopped {
                    ignored.append(delay)
                    kill(process.processIdentifier, SIGKILL)
                    process.waitForExit()
                    continue
                }
                process.waitForExit()
                let killedBySignal = process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGINT
                #expect(killedBySignal || process.terminationStatus == 1, "SIGINT after \(delay) µs: status \(process.terminationStatus), \(process.terminationReason)")
            }
            #expect(ignored.isEmpty, "SIGINT sent these many µs after start was ignored: \(ignored)")
        }
    }
}
