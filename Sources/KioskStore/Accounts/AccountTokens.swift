import Synchronization

/// The device a bearer token signs in: its account and its own ID.
public struct DeviceIdentity: Sendable, Equatable {
    public var accountId: String
    public var deviceId: String
    /// A device's own client (the API's), or the account page in a browser (the page's alone).
    public var kind: DeviceKind = .app
}

/// Bearer tokens this process has resolved to their devices, so that a busy client's requests
/// skip the look-up (one statement of the few a purchase costs).
///
/// A device can be removed, so what is remembered can go stale. It is forgotten three ways:
/// - removing a device here forgets its account's tokens at once, and on PostgreSQL every other
///   instance hears of it (``ChangeNotifier/devicesChanged(_:)``) and forgets them too;
/// - an instance whose LISTEN connection dropped forgets everything (it may have missed a notice);
/// - and whatever else happens, an entry is looked up again after ``lifetime`` on the monotonic
///   clock, so no missed notice keeps a removed device in for longer.
/// A token the store does not know is not remembered (it may be created later).
final class AccountTokens: Sendable {
    /// Enough for every active account of a large store; past it the memory is simply started over.
    static let capacity = 100_000
    /// How long an entry is believed without asking the database again.
    static let lifetime: Duration = .seconds(30)

    private struct Entry {
        var device: DeviceIdentity
        var learnt: ContinuousClock.Instant
    }

    private let known = Mutex<(entries: [String: Entry], forgettings: UInt64)>(([:], 0))

    /// A mark to take before reading a token's device from the database: what is read is
    /// remembered only if nothing was forgotten in between (a removal committed after the read
    /// must not be undone by the read's late answer).
    func mark() -> UInt64 {
        known.withLock { $0.forgettings }
    }

    /// The device for a token's SHA-256, if this process learnt it within ``lifetime``.
    func device(forHash tokenHash: String) -> DeviceIdentity? {
        known.withLock { known in
            guard let entry = known.entries[tokenHash] else { return nil }
            guard ContinuousClock.now - entry.learnt < Self.lifetime else {
                known.entries[tokenHash] = nil
                return nil
            }
            return entry.device
        }
    }

    /// Remembers a token's device read from the database, unless something was forgotten since
    /// `mark` (see ``mark()``).
    func remember(_ device: DeviceIdentity, forHash tokenHash: String, readAfter mark: UInt64) {
        known.withLock { known in
            guard known.forgettings == mark else { return }
            if known.entries.count >= Self.capacity { known.entries.removeAll(keepingCapacity: true) }
            known.entries[tokenHash] = Entry(device: device, learnt: .now)
        }
    }

    /// Forgets every token of `accountId` (a device of it was removed or signed out).
    func forget(account accountId: String) {
        known.withLock { known in
            known.forgettings &+= 1
            known.entries = known.entries.filter { $0.value.device.accountId != accountId }
        }
    }

    /// Forgets every token (a notice of removals may have been missed).
    func forgetAll() {
        known.withLock { known in
            known.forgettings &+= 1
            known.entries.removeAll(keepingCapacity: true)
        }
    }
}
