import Foundation

/// What moving from one plan of a subscription group to another is, by the App Store's rules:
/// an upgrade (to a higher level of service) takes effect at once and the unused part of the
/// running period is credited; a downgrade waits for the next renewal; a crossgrade (the same
/// level) takes effect at once when both plans last as long, else at the renewal.
public struct PlanChange: Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case upgrade, downgrade, crossgrade }

    public let kind: Kind
    /// Whether it takes effect at once (else at the next renewal).
    public let atOnce: Bool

    /// The change from the running plan `from` to `to` (two subscriptions of one group).
    public init(from: Product, to: Product) {
        let (old, new) = (from.planLevel ?? 1, to.planLevel ?? 1)
        if new < old {
            kind = .upgrade
            atOnce = true
        } else if new > old {
            kind = .downgrade
            atOnce = false
        } else {
            kind = .crossgrade
            atOnce = (from.periodMonths ?? 1) == (to.periodMonths ?? 1)
        }
    }

    /// The part of a period's price not yet used at `now`, in cents, rounded down (the reader is
    /// never credited more than they paid): `paidCents` × the time left ÷ the period's length.
    public static func unusedCents(paidCents: Int, periodStart: Date, periodEnd: Date, now: Date) -> Int {
        let length = periodEnd.timeIntervalSince(periodStart)
        guard paidCents > 0, length > 0, now < periodEnd else { return 0 }
        let left = min(periodEnd.timeIntervalSince(now), length)
        return min(paidCents, Int((Double(paidCents) * left / length).rounded(.down)))
    }

    /// In words, for the reader: "an upgrade: it starts now, and the unused part of this period is credited".
    public var described: String {
        switch (kind, atOnce) {
        case (.upgrade, _): "an upgrade: it starts now, and the unused part of the running period is credited"
        case (.downgrade, _): "a downgrade: it starts at the next renewal, and the running plan stays until then"
        case (.crossgrade, true): "a change to a plan of the same level and length: it starts now, and the unused part of the running period is credited"
        case (.crossgrade, false): "a change to a plan of the same level and another length: it starts at the next renewal"
        }
    }
}
