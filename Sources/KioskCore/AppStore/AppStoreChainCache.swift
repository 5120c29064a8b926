import Crypto
import Foundation
import Synchronization

/// Chains ``AppStoreSignedDataVerifier`` has already validated, keyed by the certificates' DER
/// bytes as the proof carries them (its protected header, base64url of `{"alg", "x5c"}`, whose
/// `alg` was checked too), so a busy store does not redo the chain, nor decode the header, per request.
///
/// An entry never outlives the earliest `notAfter` of its certificates nor the configured
/// lifetime, and the cache holds a bounded number of chains (Apple signs with few at a time).
final class AppStoreChainCache: Sendable {
    /// What a validated chain gives a payload: the leaf's key, and the span in which every
    /// certificate of the chain is valid (the payload's `signedDate` must fall inside it).
    struct Entry: Sendable {
        var leafKey: P256.Signing.PublicKey
        var validFrom: Date
        var validUntil: Date
        /// When the entry is dropped: the earliest of `validUntil` and the configured lifetime.
        var cachedUntil: Date
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let capacity: Int

    init(capacity: Int = 64) {
        self.capacity = capacity
    }

    /// The entry for `chain`, or nil when none is cached or it has lapsed at `now`.
    func entry(for chain: String, now: Date) -> Entry? {
        entries.withLock { entries in
            guard let entry = entries[chain] else { return nil }
            guard now < entry.cachedUntil else {
                entries[chain] = nil
                return nil
            }
            return entry
        }
    }

    func store(_ entry: Entry, for chain: String, now: Date) {
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { now < $0.value.cachedUntil }
                if entries.count >= capacity { entries.removeAll() }
            }
            entries[chain] = entry
        }
    }

    /// How many cached chains are still usable at `now`.
    func count(at now: Date) -> Int {
        entries.withLock { $0.values.count { now < $0.cachedUntil } }
    }
}
