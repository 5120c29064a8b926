import Foundation
import KioskArchive
import Logging

/// A tar archive being unpacked into its staging folder while it downloads, on a thread of its own.
///
/// It reads the partial file only once the transfer has its answer (``beginReading()``: from then
/// on the file's bytes are final and only grow), so what it unpacks is exactly the bytes the
/// SHA-256 check later covers. Nothing reaches the library until that check passes and
/// ``LibraryInstaller`` moves the staging folder into place; a download that ends any other way
/// ``abandon()``s it and the staging folder goes (the next attempt unpacks again from the partial
/// file's first byte).
final class UnpackAhead: Sendable {
    let staging: URL
    private let file: GrowingFile
    private let done = DispatchSemaphore(value: 0)
    private let outcome = OutcomeBox()

    init(file: GrowingFile, staging: URL, extractor: ArchiveExtractor) {
        self.file = file
        self.staging = staging
        let thread = Thread { [file, staging, outcome, done] in
            do {
                _ = try extractor.extract(file, into: staging)
                outcome.set(true)
            } catch {
                outcome.set(false)
            }
            done.signal()
        }
        thread.name = "kiosk.unpack-ahead"
        thread.start()
    }

    /// The transfer is writing its answer: the bytes in the partial file are final from here on.
    func beginReading() { file.beginReading() }

    /// Every byte is there and verified: waits for the unpacking to end.
    /// - Returns: true when the staging folder holds the whole archive, unpacked.
    func finish() -> Bool {
        file.finish()
        done.wait()
        done.signal()
        return outcome.value
    }

    /// Ends it: stops the unpacking if it still runs and removes the staging folder unless the
    /// installer already moved it into the library. Called once per download round, for every
    /// download, whatever its outcome.
    func abandon() {
        file.abandon()
        done.wait()
        done.signal()
        try? FileManager.default.removeItem(at: staging)
    }
}

/// Whether the unpacking succeeded, written once by its thread.
private final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var succeeded = false
    func set(_ value: Bool) { lock.withLock { succeeded = value } }
    var value: Bool { lock.withLock { succeeded } }
}
