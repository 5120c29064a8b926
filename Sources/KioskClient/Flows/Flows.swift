import Foundation
import KioskCore
import KioskTransfer
import Logging

/// How far delivering a purchase goes right now.
enum DeliveryMode: Sendable {
    /// Download and install the content, then finish.
    case now
    /// Queue the content; the purchase waits in `delivering` and finishes once it is installed.
    case queue
    /// Queue the content and finish at once (the reader downloads later).
    case finishNow
}

/// The one path from a paid purchase to the library: receipt saved → content queued → downloaded,
/// verified and installed → purchase finished on the store.
///
/// The flows are straight-line functions over the two owners, ``Purchases`` and ``Library``, and
/// the catalog: the owners never call each other or a flow; a flow calls each in turn. One file
/// per flow (Buy, Deliver, Replay, Restore, Resume). `buy`, `redeem`, `restore`, replay, `resume`
/// and the background agent all deliver through ``deliver(_:_:)`` and ``runDownloads(only:progress:)``, so a rule of delivery
/// (the re-sync after the store refused an outdated version, finishing what was delivered) holds
/// on every path or on none.
struct Flows: Sendable {
    let catalog: CatalogSync
    let purchases: Purchases
    let library: Library
    let subscriptions: SubscriptionIssues
    let logger: Logger
}
