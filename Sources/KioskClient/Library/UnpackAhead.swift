import Foundation
import KioskArchive
import Synchronization

/// A tar archive being unpacked into its staging folder while it downloads, on a thread of its own.
///
/// It reads the partial file only once the transfer has its answer (``beginReading()``: from then
/// on the file's bytes are final and only grow), and hashes every byte it reads: what it unpacked
/// is installed only when that digest is the catalog's (``LibraryInstaller/unpacked(_:orElse:expecting:for:)``). Nothing reaches the library until that check passes and
/// ``LibraryInstaller`` moves the staging folder into place; a download that ends any other way
/// ``abandon()``s it and the staging folder goes (the next attempt unpacks again from the partial
/// file's first byte).
final class UnpackAhead: Sendable {
    let staging: URL
    private let file: GrowingFile
    private let done = DispatchSemaphore(value: 0)
    /// What was unpacked once the staging folder holds all of it, with the digest of the bytes it
    /// was unpacked from; written once by the unpacking thread.
    private let result = Mutex<ArchiveExtractor.Summary?>(nil)

    init(file: GrowingFile, staging: URL, extractor: ArchiveExtractor) {
        self.file = file
        self.staging = staging
        let thread = Thread { [self] in
            let summary = try? extractor.extract(file, into: staging)
            result.withLock { $0 = summary }
            done.signal()
        }
        thread.name = "kiosk.unpack-ahead"
        thread.start()
    }

    /// The transfer is writing its answer: the bytes in the partial file are final from here on.
    func beginReading() { file.beginReading() }

    /// Every byte is there and verified: waits for the unpacking to end.
    /// - Returns: what was unpacked, when the staging folder holds the whole archive.
    func finish() -> ArchiveExtractor.Summary? {
        file.finish()
        waitForThread()
        return result.withLock { $0 }
    }

    /// Ends it: stops the unpacking if it still runs and removes the staging folder (this claim's
    /// own) unless the installer already moved it into the library. Called once per download
    /// round, for every download, whatever its outcome.
    func abandon() {
        file.abandon()
        waitForThread()
        try? FileManager.default.removeItem(at: staging)
    }

    /// Waits for the unpacking thread to end; leaves the semaphore signalled for any later wait.
    private func waitForThread() {
        done.wait()
        done.signal()
    }
}
