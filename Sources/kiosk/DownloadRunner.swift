import Foundation
import KioskClient
import KioskTransfer

/// Runs downloads for a command and shows their progress: a bar on a terminal, plain lines otherwise.
struct DownloadRunner {
    let client: KioskClient
    let server: String
    var concurrency = 3

    /// Runs due downloads (or only `products`) and prints what was installed, waits or failed.
    func run(only products: Set<String>? = nil) async throws -> DownloadRunReport {
        let display = ProgressDisplay(interactive: isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb")
        let report = try await client.runDownloads(server: server, only: products, concurrency: concurrency) { display.show($0) }
        display.finish()
        let library = try await client.library()
        let downloads = try await client.downloads()
        for id in report.installed {
            let path = library.first { $0.item.productId == id }?.item.path ?? "the library"
            print("installed \(id) in \(path)")
        }
        if report.bytesReceived > 0 {
            print("received \(report.bytesReceived) bytes")
        }
        for id in report.waiting {
            let record = downloads.first { $0.productId == id }
            let when = record?.nextAttemptAt.map { "retrying after \(Self.time($0))" } ?? "retrying later"
            print("\(id): \(record?.lastError ?? "interrupted"); \(when) (kiosk resume)")
        }
        for id in report.failed {
            let record = downloads.first { $0.productId == id }
            FileHandle.standardError.write(Data("kiosk: \(id): \(record?.lastError ?? "the download failed")\n".utf8))
        }
        return report
    }

    static func time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: date)
    }
}

/// Progress as a person reads it: bytes, rate and time left.
final class ProgressDisplay: @unchecked Sendable {
    private let interactive: Bool
    private let lock = NSLock()
    private let started = Date()
    private var lastLine = Date.distantPast
    private var shown = false

    init(interactive: Bool) {
        self.interactive = interactive
    }

    func show(_ progress: DownloadProgress) {
        lock.withLock {
            let now = Date()
            guard now.timeIntervalSince(lastLine) >= (interactive ? 0.2 : 2) else { return }
            lastLine = now
            let elapsed = max(0.001, now.timeIntervalSince(started))
            let rate = Double(progress.bytesReceived) / elapsed
            var line = "\(progress.key): \(Self.size(progress.bytesOnDisk))"
            if let total = progress.totalBytes, total > 0 {
                let percent = Int(Double(progress.bytesOnDisk) * 100 / Double(total))
                line += " of \(Self.size(total)) (\(percent)%)"
                if rate > 0 { line += ", \(Int(Double(total - progress.bytesOnDisk) / rate)) s left" }
            }
            line += ", \(Self.size(Int64(rate)))/s"
            if interactive {
                FileHandle.standardOutput.write(Data("\r\u{1B}[K\(line)".utf8))
                shown = true
            } else {
                print(line)
            }
        }
    }

    func finish() {
        lock.withLock {
            if shown { FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8)) }
        }
    }

    /// "0 B", "512 B", "1.5 KiB", "8.0 MiB": binary units, and no "Zero KB".
    static func size(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(String(format: "%.1f", value)) \(units[unit])"
    }
}
