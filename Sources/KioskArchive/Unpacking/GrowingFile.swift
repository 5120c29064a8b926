import Crypto
import Foundation
import KioskCore

/// A file another thread is still writing, read from the start up to its announced size: the
/// source that lets a tar archive be unpacked while it downloads.
///
/// The writer side says three things: ``beginReading()`` once the bytes in the file are final
/// (the transfer has its answer and only appends from now on), ``finish(size:)`` once every byte
/// is there and checked, and ``abandon()`` when the download ends any other way. Until the file
/// is finished, a read that catches up with the writer waits for more bytes; an abandoned file
/// fails every read, so the extraction stops and its staging is thrown away.
public final class GrowingFile: @unchecked Sendable {
    public let url: URL
    /// The size the catalog announced: a read never goes past it.
    public let expectedSize: Int64

    private enum Phase { case waiting, reading, finished, abandoned }
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var phase = Phase.waiting

    // Used only by the one thread that reads (the extraction's).
    private var descriptor: Int32 = -1
    private var offset: Int64 = 0
    private let buffer: UnsafeMutableRawPointer
    private let bufferSize = 1 << 20
    /// Every byte handed to the extraction, hashed as it is handed: what was unpacked is what
    /// ``sha256()`` names, whatever happened to the file's name meanwhile.
    private var hasher = SHA256()
    /// How long a read that caught up with the writer sleeps before looking again.
    private let pollInterval: TimeInterval = 0.005

    public init(_ url: URL, expectedSize: Int64) {
        self.url = url
        self.expectedSize = expectedSize
        buffer = .allocate(byteCount: bufferSize, alignment: 64)
    }

    deinit {
        buffer.deallocate()
        if descriptor >= 0 { close(descriptor) }
    }

    /// The bytes in the file are final from here on; reading may start.
    public func beginReading() { move(to: .reading) }

    /// Every byte is in the file and verified.
    public func finish() { move(to: .finished) }

    /// The download ended without a verified file: reads fail from now on.
    public func abandon() { move(to: .abandoned) }

    private func move(to next: Phase) {
        condition.lock()
        // Finished and abandoned are final; reading only follows waiting.
        if phase == .waiting || (phase == .reading && next != .reading) {
            phase = next
        }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until reading may start, and gives the phase it found then (never `waiting`).
    private func awaitReadable() -> Phase {
        condition.lock()
        defer { condition.unlock() }
        while phase == .waiting { condition.wait() }
        return phase
    }

    private var currentPhase: Phase {
        condition.lock()
        defer { condition.unlock() }
        return phase
    }

    /// The next block: a pointer into an internal buffer valid until the next call and its
    /// length; 0 at the announced end, nil when the download was abandoned or the file shrank.
    func nextBlock() -> (UnsafeRawPointer, Int)? {
        guard offset < expectedSize else { return (UnsafeRawPointer(buffer), 0) }
        while true {
            switch awaitReadable() {
            case .abandoned, .waiting: return nil
            case .reading, .finished: break
            }
            if descriptor < 0 {
                descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { return nil }
            }
            let wanted = Int(min(Int64(bufferSize), expectedSize - offset))
            let count = pread(descriptor, buffer, wanted, off_t(offset))
            if count > 0 {
                offset += Int64(count)
                hasher.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: count))
                return (UnsafeRawPointer(buffer), count)
            }
            guard count == 0 else { return nil }
            // Caught up with the writer. A finished file has every byte, so a short one is wrong.
            if currentPhase == .finished { return nil }
            var info = stat()
            if fstat(descriptor, &info) == 0, Int64(info.st_size) < offset { return nil }
            Thread.sleep(forTimeInterval: pollInterval)
        }
    }

    /// Reads what the extraction left unread (a tar's end padding) and gives the SHA-256 of every
    /// byte read, through the one descriptor the extraction read: nil when the file ended short
    /// or the download was abandoned. Called by the reading thread once the extraction is done.
    func sha256() -> String? {
        while offset < expectedSize {
            guard let (_, count) = nextBlock(), count > 0 else { return nil }
        }
        return FileDigest.hex(hasher.finalize())
    }
}
