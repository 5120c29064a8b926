import Foundation

/// A token bucket's size and refill: up to `burst` requests at once, then `perSecond` on average.
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    /// How many requests a full bucket lets through at once.
    public var burst: Int
    /// How fast spent tokens come back.
    public var perSecond: Double

    public init(burst: Int, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }

    /// `N/second`, `N/minute`, `N/hour` or `N/day`: a bucket of N that refills in that time.
    /// - Returns: nil for anything else (`off` is the caller's to map onto no limit).
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        let seconds: [String: Double] = ["s": 1, "second": 1, "m": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86_400, "day": 86_400]
        guard parts.count == 2, let count = Int(parts[0]), count > 0, let period = seconds[parts[1].lowercased()] else { return nil }
        self.init(burst: count, perSecond: Double(count) / period)
    }

    public var description: String { "\(burst) at once, \(perSecond)/s after" }
}

/// The limits on what one client address or one account may ask of the store, so that one
/// address cannot create tens of thousands of accounts, nor one account hammer the payments.
///
/// The defaults sit far above what a reader does (a device creates one account, a reader buys a
/// few things a day) and above what the test suite asks of one server; a load test raises them
/// (`scripts/bench.py` turns them off with `--rate-limit-… off`).
public struct RateLimits: Sendable, Equatable {
    /// `POST /v1/accounts` per client address; nil for no limit.
    public var accountsPerAddress: RateLimit? = RateLimit(burst: 30, perSecond: 30.0 / 3600)
    /// `POST /v1/payments` and `/v1/redemptions` per client address (every account behind it).
    public var purchasesPerAddress: RateLimit? = RateLimit(burst: 600, perSecond: 10)
    /// `POST /v1/payments` and `/v1/redemptions` per account, from wherever it asks.
    public var purchasesPerAccount: RateLimit? = RateLimit(burst: 120, perSecond: 2)
    /// Peers whose `X-Forwarded-For` is believed (the nginx in front, say), as exact IP addresses.
    /// From any other peer the header is ignored: a client could write any address in it.
    public var trustedProxies: [String] = []

    public init() {}

    /// No limit at all.
    public static var off: RateLimits {
        var limits = RateLimits()
        limits.accountsPerAddress = nil
        limits.purchasesPerAddress = nil
        limits.purchasesPerAccount = nil
        return limits
    }

    /// The address a request comes from: the peer's, or, when the peer is a trusted proxy, the
    /// nearest address in `X-Forwarded-For` that is not itself a trusted proxy (proxies append the
    /// address they saw, so the rightmost untrusted entry is the one no client could forge).
    func clientAddress(peer: String?, forwardedFor: String?) -> String? {
        guard let peer, trustedProxies.contains(peer), let forwardedFor else { return peer }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return hops.last { !trustedProxies.contains($0) } ?? peer
    }
}
