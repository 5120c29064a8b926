import Foundation
import Synchronization
import KioskTransfer

/// What the engine tells an app as it works, in the order it happens (the shape of StoreKit's
/// `Transaction.updates` and Background Assets' status updates).
public enum ClientEvent: Sendable {
    /// A purchase changed state; the record is as committed.
    case transaction(PaymentRecord)
    /// A download changed state; the record is as committed.
    case download(DownloadRecord)
    /// Bytes arrived for a running download (about twice a second).
    case progress(DownloadProgress)
    /// A download and its library entry are gone (the purchase was revoked and no other purchase
    /// grants the product); the record is the last one committed.
    case downloadRemoved(DownloadRecord)
    /// An installed product's files were freed, by the reader or a keep rule (``KioskClient/tidy(now:)``);
    /// it stays owned, and the record (state `removed`) can be queued again (``KioskClient/reinstate(_:)``).
    case removed(DownloadRecord)
}

/// Hands every event to every current subscriber. Events of this process only: another process
/// working on the same home is seen through the database, not here.
final class EventHub: Sendable {
    private let subscribers = Mutex<[UUID: AsyncStream<ClientEvent>.Continuation]>([:])

    /// A new stream of every event published from now on; it ends when the consumer stops.
    func subscribe() -> AsyncStream<ClientEvent> {
        subscription().events
    }

    /// A new subscriber whose owner can end it, after the events already published.
    func subscription() -> EventSubscription {
        let (stream, continuation) = AsyncStream<ClientEvent>.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return EventSubscription(events: stream, continuation: continuation)
    }

    func publish(_ event: ClientEvent) {
        let continuations = subscribers.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Ends every stream (the client is going away).
    func finish() {
        let continuations = subscribers.withLock { state -> [AsyncStream<ClientEvent>.Continuation] in
            defer { state = [:] }
            return Array(state.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

/// One subscriber's stream of the engine's events, ended by whoever reads it: ``end()`` finishes
/// the stream after the events already published, which its reader still gets, so a command that
/// ends its subscription when its work is done misses none of that work's events.
public final class EventSubscription: Sendable {
    /// Every event published from the subscription on, until ``end()`` (or the client goes away).
    public let events: AsyncStream<ClientEvent>
    private let continuation: AsyncStream<ClientEvent>.Continuation

    init(events: AsyncStream<ClientEvent>, continuation: AsyncStream<ClientEvent>.Continuation) {
        self.events = events
        self.continuation = continuation
    }

    /// Ends the stream once its reader has had every event published before this call.
    public func end() {
        continuation.finish()
    }
}
