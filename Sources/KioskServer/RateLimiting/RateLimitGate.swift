import Foundation
import KioskCore
import KioskStore
import HTTPTypes
import Hummingbird
import Synchronization

/// Where the store's routes ask whether a request is within its limits (``RateLimits``): account
/// creation per client address, purchases per client address and per account.
struct RateLimitGate: Sendable {
    let limits: RateLimits
    let limiter: RateLimiter
    /// Addresses whose refused keys went over their limit, until when (``refuseWhileKeysLimited(_:context:)``).
    let limitedKeyAddresses = LimitedAddresses()

    /// Refuses (`rate_limited`) when the client's address created too many accounts lately.
    func admitAccountCreation(_ request: Request, context: KioskRequestContext) async throws {
        guard let limit = limits.accountsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) else { return }
        try await take("accounts:address:\(address)", limit, what: "too many accounts were created from \(address)")
    }

    /// Refuses (`rate_limited`) when the client's address or the account made too many purchases lately.
    func admitPurchase(_ request: Request, context: KioskRequestContext, accountId: String) async throws {
        if let limit = limits.purchasesPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            try await take("purchases:address:\(address)", limit, what: "too many purchases came from \(address)")
        }
        if let limit = limits.purchasesPerAccount {
            try await take("purchases:account:\(accountId)", limit, what: "account \(accountId) made too many purchases")
        }
    }

    /// Refuses (`rate_limited`) when the account or the client's address tried too many offer
    /// codes lately: a custom code is a word, so codes are tried no faster than sign-ins.
    func admitCodeAttempt(_ request: Request, context: KioskRequestContext, accountId: String) async throws {
        if let limit = limits.signInsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            try await take("codes:address:\(address)", limit, what: "too many codes were tried from \(address)")
        }
        if let limit = limits.signInsPerEmail {
            try await take("codes:account:\(accountId)", limit, what: "too many codes were tried by this account")
        }
    }

    /// A refused key that cannot be guessed (a sync password's, 79 random bits): limited by the
    /// client's address alone. Counted against the email too, a removed key a reading app kept
    /// sending locked its owner out of signing in.
    func admitKeyAttempt(_ request: Request, context: KioskRequestContext) async throws {
        if let limit = limits.signInsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            do {
                try await take("signins:address:\(address)", limit, what: "too many sign-in attempts came from \(address)")
            } catch let refusal as StoreError where refusal.retryAfter != nil {
                limitedKeyAddresses.limit(address, for: .seconds(refusal.retryAfter ?? 1))
                throw refusal
            }
        }
    }

    /// Refuses (`rate_limited`) every key from an address whose refused keys went over the limit,
    /// the right key too, until the limit lets it try again: were the right one let through, a
    /// guesser would go on at full speed and learn from the one 200 when it had found it.
    func refuseWhileKeysLimited(_ request: Request, context: KioskRequestContext) throws {
        guard let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers),
              let left = limitedKeyAddresses.remaining(address) else { return }
        throw StoreError.rateLimited("too many sign-in attempts came from \(address)", retryAfter: max(1, Int(left.components.seconds)))
    }

    /// Refuses (`rate_limited`) when the email or the client's address tried to sign in too often
    /// lately. Asked before the password is checked, whether the email is known or not. The email's
    /// bucket is named by its hash: the buckets' table holds no one's address.
    func admitSignIn(_ request: Request, context: KioskRequestContext, email: String) async throws {
        if let limit = limits.signInsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            try await take("signins:address:\(address)", limit, what: "too many sign-in attempts came from \(address)")
        }
        // Every spelling the store takes for one address (case, spaces, composed or not) is one bucket.
        let key = FileDigest.sha256(of: Data(EmailAddress.bucketName(email).utf8)).prefix(32)
        // A backoff in two steps: ten at once, then one each 90 s; and at most 100 a day.
        if let limit = limits.signInsPerEmail {
            try await take("signins:email:\(key)", limit, what: "too many sign-in attempts named this email")
        }
        if let limit = limits.signInsPerEmailPerDay {
            try await take("signins:email-day:\(key)", limit, what: "too many sign-in attempts named this email today")
        }
    }

    /// Refuses (`rate_limited`) when an account's password was checked too often lately by a
    /// signed-in device (deleting the account asks for it again). A bucket of its own: the
    /// sign-in routes, which anyone can call with any text as the email, never reach it.
    func admitAccountPassword(_ request: Request, context: KioskRequestContext, accountId: String) async throws {
        guard let limit = limits.signInsPerEmail else { return }
        try await take("password:account:\(accountId)", limit, what: "the password of account \(accountId) was tried too often")
    }

    /// Refuses (`rate_limited`) a device code asked for or approved too often: per address for new
    /// codes, per account for approvals (each a guess at a code).
    func admitDeviceCode(_ request: Request, context: KioskRequestContext, approvingAccount: String?) async throws {
        if let accountId = approvingAccount {
            if let limit = limits.signInsPerEmail {
                try await take("codes:account:\(accountId)", limit, what: "account \(accountId) tried too many device codes")
            }
        } else if let limit = limits.signInsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            try await take("signins:address:\(address)", limit, what: "too many device codes were asked for from \(address)")
        }
    }

    private func take(_ key: String, _ limit: RateLimit, what: String) async throws {
        guard case .limited(let seconds) = try await limiter.take(key, limit) else { return }
        throw StoreError.rateLimited(what, retryAfter: seconds)
    }
}

/// Client addresses limited until an instant on the monotonic clock (a clock stepped back or
/// forward changes nothing), in this process: the refusal each instance sees first.
final class LimitedAddresses: Sendable {
    private let until = Mutex<[String: ContinuousClock.Instant]>([:])

    func limit(_ address: String, for duration: Duration) {
        until.withLock { until in
            // Bounded: past it the oldest limits are simply forgotten, and the shared bucket still counts.
            if until.count >= 10_000 { until.removeAll(keepingCapacity: true) }
            until[address] = .now + duration
        }
    }

    /// How long `address` stays limited; nil when it is not.
    func remaining(_ address: String) -> Duration? {
        until.withLock { until in
            guard let end = until[address] else { return nil }
            let left = end - .now
            guard left > .zero else {
                until[address] = nil
                return nil
            }
            return left
        }
    }
}
