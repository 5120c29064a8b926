import Foundation
import KioskCore

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
    /// Sign-in attempts (`POST /v1/sessions`) per email, known or not, from wherever they come:
    /// a few guesses, then one each 90 s, so no password is guessed online. Device code approvals
    /// per account count here too.
    public var signInsPerEmail: RateLimit? = RateLimit(burst: 10, perSecond: 10.0 / 900)
    /// The second step of the backoff: at most 100 attempts a day per email, NIST SP 800-63B's
    /// ceiling on failed attempts, however patiently they are spaced under ``signInsPerEmail``.
    public var signInsPerEmailPerDay: RateLimit? = RateLimit(burst: 100, perSecond: 100.0 / 86_400)
    /// Sign-in attempts and new device codes per client address, whichever emails they name.
    public var signInsPerAddress: RateLimit? = RateLimit(burst: 60, perSecond: 60.0 / 3600)
    /// Peers whose `X-Forwarded-For` is believed (the nginx in front, say), as exact IP addresses.
    /// From any other peer the header is ignored: a client could write any address in it.
    public var trustedProxies: [String] = [] {
        didSet { trustedAddresses = Set(trustedProxies.compactMap { Self.canonical($0) }) }
    }
    /// `trustedProxies` in canonical form, made once: it was made per request, for every
    /// request's log line (with the canonical forms below, 4 % of a catalog 304).
    private var trustedAddresses: Set<String> = []

    public init() {}

    /// No limit at all.
    public static var off: RateLimits {
        var limits = RateLimits()
        limits.accountsPerAddress = nil
        limits.purchasesPerAddress = nil
        limits.purchasesPerAccount = nil
        limits.signInsPerEmail = nil
        limits.signInsPerEmailPerDay = nil
        limits.signInsPerAddress = nil
        return limits
    }

    /// Whether `peer` is one of ``trustedProxies``, whose forwarded headers are believed.
    public func isTrustedProxy(_ peer: String?) -> Bool {
        guard let peer, !trustedAddresses.isEmpty else { return false }
        return trustedAddresses.contains(Self.canonical(peer) ?? peer)
    }

    /// The address a request comes from: the peer's, or, when the peer is a trusted proxy, the
    /// nearest address in `X-Forwarded-For` that is not itself a trusted proxy (proxies append the
    /// address they saw, so the rightmost untrusted entry is the one no client could forge).
    ///
    /// The answer is a bucket's name, not an address: IPv4 as written canonically, IPv6 by its /64
    /// (what one subscriber is handed, so walking through it buys nothing), an IPv4-mapped IPv6
    /// address as its IPv4; a port is dropped, and an entry that is no IP address is skipped.
    public func clientAddress(peer: String?, forwardedFor: String?) -> String? {
        guard let peer = peer.flatMap(Self.bucket) else { return nil }
        let trusted = trustedAddresses
        guard let forwardedFor, !trusted.isEmpty, trusted.contains(Self.canonical(peer) ?? peer) else { return peer }
        let hops = forwardedFor.split(separator: ",").compactMap { Self.canonical(String($0)) }
        return hops.last { !trusted.contains($0) }.flatMap(Self.bucket) ?? peer
    }

    /// The rate-limit bucket of an address (see ``clientAddress(peer:forwardedFor:)``), or nil.
    static func bucket(_ text: String) -> String? {
        guard let address = canonical(text) else { return nil }
        guard address.utf8.contains(UInt8(ascii: ":")), var bytes = ipv6Bytes(address) else { return address }
        for index in 8..<16 { bytes[index] = 0 }
        return format(ipv6: bytes).map { $0 + "/64" }
    }

    /// One spelling per address: IPv4 dotted, IPv6 as inet_ntop writes it, an IPv4-mapped IPv6
    /// address as IPv4; `[v6]:port` and `v4:port` lose the port. Nil when it is no IP address.
    public static func canonical(_ text: String) -> String? {
        var candidate = String(text.trimmingOptionalWhitespace())
        if candidate.hasPrefix("["), let close = candidate.firstIndex(of: "]") {
            candidate = String(candidate[candidate.index(after: candidate.startIndex)..<close])
        } else if candidate.utf8.count(where: { $0 == UInt8(ascii: ":") }) == 1, let colon = candidate.firstIndex(of: ":") {
            candidate = String(candidate[..<colon])
        }
        var v4 = in_addr()
        if inet_pton(AF_INET, candidate, &v4) == 1 { return format(ipv4: v4) }
        guard let bytes = ipv6Bytes(candidate) else { return nil }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
        }
        return format(ipv6: bytes)
    }

    private static func ipv6Bytes(_ text: String) -> [UInt8]? {
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        return withUnsafeBytes(of: &v6) { Array($0) }
    }

    private static func format(ipv4 address: in_addr) -> String? {
        var address = address
        var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(cString: buffer)
    }

    private static func format(ipv6 bytes: [UInt8]) -> String? {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(cString: buffer)
    }
}
