import Foundation

/// When to try again after a transient failure (see ``RetryRule``): exponential backoff with
/// jitter and a cap, and never sooner than the server's Retry-After. One schedule for downloads,
/// unfinished purchases and `kiosk fetch`.
public struct Backoff: Sendable {
    public var base: TimeInterval = 2
    public var cap: TimeInterval = 3600

    public init(base: TimeInterval = 2, cap: TimeInterval = 3600) {
        self.base = base
        self.cap = cap
    }

    /// The delay before attempt number `attempts + 1`, `attempts` (≥ 1) having failed.
    public func delay(afterAttempts attempts: Int, retryAfter: TimeInterval?) -> TimeInterval {
        let exponential = min(cap, base * pow(2, Double(max(0, attempts - 1))))
        // "Equal jitter": half fixed, half random, so clients that failed together spread out.
        let jittered = exponential / 2 + Double.random(in: 0...(exponential / 2))
        return max(jittered, min(retryAfter ?? 0, cap))
    }
}
