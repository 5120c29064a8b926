import Crypto
import Foundation
import KioskCore

/// SHA-256 of a partial file as it grows, computed on a thread of its own that reads back what the
/// transfer has written (from the page cache) into one reused buffer.
///
/// The receiving thread only publishes how far the file is written: it neither copies nor
/// allocates per chunk, and never waits for the hasher. Bytes already in the file when a resume
/// starts are hashed the same way, while the rest arrives.
final class StreamingDigest: @unchecked Sendable {
    /// How much is read back and hashed at a time, and how far the file must be ahead before the
    /// hasher wakes for it. The buffer was 1 MiB; 256 KiB keeps 768 KiB out of a fetch's peak
    /// memory (issue 44: at most 24 MiB). The hasher woke for every 16 KiB libcurl hands over:
    /// 59,747 reads and 73,695 futex calls for 1 GiB; waiting for a whole block, 4,096 reads.
    static let blockSize = 256 << 10

    // Everything below is guarded by `condition`; `hasher` is only replaced under it.
    private let condition = NSCondition()
    private var hasher = SHA256()
    private var written: Int64 = 0
    private var hashed: Int64 = 0
    /// Bumped by `reset`, so a block read before it is not hashed into the new digest.
    private var generation = 0
    private var readFailed = false
    private var closed = false
    /// Set by `finalize`: hash what is left, however short.
    private var draining = false
    private let descriptor: Int32

    /// - Parameter descriptor: the partial file, open for reading; it is duplicated, not taken.
    init(reading descriptor: Int32) {
        self.descriptor = dup(descriptor)
        let thread = Thread { [self] in hashUntilClosed() }
        thread.name = "kiosk.transfer.sha256"
        thread.start()
    }

    /// The file now holds `offset` bytes.
    func advance(to offset: Int64) {
        condition.lock()
        written = offset
        if written - hashed >= Int64(Self.blockSize) {
            condition.signal()
        }
        condition.unlock()
    }

    /// The file was truncated to zero: start over.
    func reset() {
        condition.lock()
        generation += 1
        hasher = SHA256()
        written = 0
        hashed = 0
        readFailed = false
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every written byte is hashed and returns the lowercase hex digest; empty when
    /// the file could not be read back (the caller's checksum comparison then fails).
    func finalize() -> String {
        condition.lock()
        defer { condition.unlock() }
        draining = true
        condition.broadcast()
        while hashed < written, !readFailed {
            condition.wait()
        }
        return readFailed ? "" : FileDigest.hex(hasher.finalize())
    }

    /// Stops the hashing thread; call once the transfer is over.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    private func hashUntilClosed() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.blockSize, alignment: 64)
        defer {
            buffer.deallocate()
            Foundation.close(descriptor)
        }
        while true {
            condition.lock()
            while !closed, readFailed || written - hashed < (draining ? 1 : Int64(buffer.count)) {
                condition.wait()
            }
            if closed {
                condition.unlock()
                return
            }
            let (start, end, round) = (hashed, min(written, hashed + Int64(buffer.count)), generation)
            var local = hasher
            condition.unlock()

            // Reading and hashing happen outside the lock, so `advance` never waits for them.
            let count = pread(descriptor, buffer.baseAddress, Int(end - start), off_t(start))
            if count > 0 {
                local.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            }

            condition.lock()
            if round == generation {
                if count > 0 {
                    hasher = local
                    hashed = start + Int64(count)
                } else {
                    readFailed = true
                }
                condition.broadcast()
            }
            condition.unlock()
        }
    }
}
