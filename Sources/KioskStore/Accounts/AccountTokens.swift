import Synchronization

/// Bearer tokens this process has resolved to their accounts, so that a busy client's requests
/// skip the look-up (one statement of the few a purchase costs).
///
/// Safe to remember because the pair never changes: a token is made with its account and is never
/// rotated, reassigned or deleted, so what one instance learnt no other instance can make stale.
/// A token the store does not know is not remembered (it may be created later). If tokens ever
/// become revocable, this cache must learn of revocations or go.
final class AccountTokens: Sendable {
    /// Enough for every active account of a large store; past it the memory is simply started over.
    static let capacity = 100_000

    private let known = Mutex<[String: String]>([:])

    /// The account ID for a token's SHA-256, if this process has seen it.
    subscript(tokenHash: String) -> String? {
        get { known.withLock { $0[tokenHash] } }
        set {
            known.withLock { known in
                if known.count >= Self.capacity { known.removeAll(keepingCapacity: true) }
                known[tokenHash] = newValue
            }
        }
    }
}
