import Crypto
import Foundation
import Synchronization

/// Email and password pairs this process has checked with bcrypt, so that a reading app, which
/// sends its Basic credentials with every request (OPDS), costs one bcrypt every few minutes and
/// not one per request (about 0.27 s of a core at cost 12).
///
/// Never the password: an entry is keyed by an HMAC-SHA256 of the email and password under a key
/// made at random when the process starts, which no one outside it knows and which dies with it.
/// An entry holds the account and the password hash its check matched. A hit still reads the
/// sign-in row and the account (one read, no bcrypt): a password changed or reset since (another
/// hash), a sign-in moved, an account disabled or deleted, each refuses at once. An entry lasts
/// ``lifetime`` on the monotonic clock, so a clock stepped back or forward changes nothing.
final class VerifiedPasswords: Sendable {
    /// A large store's reading apps in use at once; past it the memory is simply started over.
    static let capacity = 50_000
    static let lifetime: Duration = .seconds(300)

    private struct Entry {
        var accountId: String
        var passwordHash: String
        var checked: ContinuousClock.Instant
    }

    private let key = SymmetricKey(size: .bits256)
    private let known = Mutex<[Data: Entry]>([:])

    /// The entry's key for `email` (normalized) and `password`.
    func key(email: String, password: String) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data((email + "\u{0}" + password).utf8), using: key))
    }

    /// The account and password hash checked for `key` within ``lifetime``.
    func lookup(_ key: Data) -> (accountId: String, passwordHash: String)? {
        known.withLock { known in
            guard let entry = known[key] else { return nil }
            guard ContinuousClock.now - entry.checked < Self.lifetime else {
                known[key] = nil
                return nil
            }
            return (entry.accountId, entry.passwordHash)
        }
    }

    /// Pairs refused lately, with the sign-in's password hash then (nil: no such email): the
    /// same pair sent again while that hash stands is refused again without a bcrypt and without
    /// counting against the email (``Accounts/recentlyRefused(email:password:)``).
    private let refusedPairs = Mutex<[Data: Refusal]>([:])

    /// A refusal: the sign-in's password hash when it was made (nil: no sign-in had the email).
    struct Refusal {
        var passwordHash: String?
        var checked: ContinuousClock.Instant
    }

    func refused(_ key: Data) -> Refusal? {
        refusedPairs.withLock { refused in
            guard let entry = refused[key] else { return nil }
            guard ContinuousClock.now - entry.checked < Self.lifetime else {
                refused[key] = nil
                return nil
            }
            return entry
        }
    }

    func rememberRefused(_ key: Data, passwordHash: String?) {
        refusedPairs.withLock { refused in
            if refused.count >= Self.capacity { refused.removeAll(keepingCapacity: true) }
            refused[key] = Refusal(passwordHash: passwordHash, checked: .now)
        }
    }

    func remember(_ key: Data, accountId: String, passwordHash: String) {
        known.withLock { known in
            if known.count >= Self.capacity { known.removeAll(keepingCapacity: true) }
            known[key] = Entry(accountId: accountId, passwordHash: passwordHash, checked: .now)
        }
    }
}
