import Synchronization

/// What to do when a file handed to `sendfile` (``FileRegionSender``) has been sent or cut.
///
/// A sendfile response's body is empty: the route returns at once and the bytes go later, from the
/// channel. The request log and the latency histogram must wait for the end of the bytes, not of
/// the body, so ``RequestLogMiddleware`` leaves its line here under a number it puts in the
/// response head (`Kiosk-Sendfile-End`), and ``FileRegionSender`` takes the line out when the
/// region's write completes. A line is run once; one the channel never reaches (a head that was
/// never written) is dropped with the server.
final class SendfileEnds: Sendable {
    /// The field's name on the NIO side; it never reaches the wire.
    static let field = "Kiosk-Sendfile-End"

    private let state = Mutex<(next: UInt64, waiting: [UInt64: @Sendable (_ cut: Bool) -> Void])>((0, [:]))

    /// Keeps `end` until ``finish(_:cut:)`` names the number returned.
    func register(_ end: @escaping @Sendable (_ cut: Bool) -> Void) -> UInt64 {
        state.withLock { state in
            state.next += 1
            state.waiting[state.next] = end
            return state.next
        }
    }

    /// Runs and forgets the end registered as `number` (a number not registered does nothing).
    func finish(_ number: String?, cut: Bool) {
        guard let number, let key = UInt64(number) else { return }
        let end = state.withLock { $0.waiting.removeValue(forKey: key) }
        end?(cut)
    }
}
