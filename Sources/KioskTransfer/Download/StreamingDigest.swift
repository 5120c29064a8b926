import Crypto
import Dispatch
import Foundation
import KioskCore

/// SHA-256 of a stream, computed on a thread of its own so it overlaps the network and disk work.
///
/// At most `maxPending` chunks wait for the hasher; past that `update` blocks the receiver, so
/// memory stays flat when hashing is the slower side.
final class StreamingDigest: @unchecked Sendable {
    // `hasher` is touched only on `queue`, which is serial: that is what makes this Sendable.
    private var hasher = SHA256()
    private let queue = DispatchQueue(label: "kiosk.transfer.sha256")
    private let pending: DispatchSemaphore

    init(maxPending: Int = 8) {
        pending = DispatchSemaphore(value: maxPending)
    }

    /// Hashes a copy of `bytes` in the background.
    func update(_ bytes: UnsafeRawBufferPointer) {
        let chunk = Data(bytes)
        pending.wait()
        queue.async {
            self.hasher.update(data: chunk)
            self.pending.signal()
        }
    }

    /// Hashes bytes on the calling thread, before any background update (the resumed prefix).
    func updateNow(_ bytes: UnsafeRawBufferPointer) {
        queue.sync { hasher.update(bufferPointer: bytes) }
    }

    func reset() {
        queue.sync { hasher = SHA256() }
    }

    /// Waits for the pending chunks and returns the lowercase hex digest.
    func finalize() -> String {
        queue.sync { FileDigest.hex(hasher.finalize()) }
    }
}
