import Foundation

/// A subscription's introductory offer, StoreKit's three kinds: what a reader's first
/// subscription in a group (``Product/subscriptionGroup``) costs at its start. An account that has
/// had any subscription in the group, on any channel, pays the normal price.
///
/// In the catalog:
/// ```json
/// "introductoryOffer": {"type": "freeTrial", "days": 14}
/// "introductoryOffer": {"type": "freeTrial", "periods": 1}
/// "introductoryOffer": {"type": "payAsYouGo", "price": "0.99", "periods": 3}
/// "introductoryOffer": {"type": "payUpFront", "price": "4.99", "periods": 6}
/// ```
public struct IntroductoryOffer: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// Nothing to pay for `days` days, or for `periods` periods.
        case freeTrial
        /// `price` each period for the first `periods` periods, renewed as usual.
        case payAsYouGo
        /// `price` once for the first `periods` periods together.
        case payUpFront
    }

    public var type: Kind
    /// A free trial's length in days (Stripe's `trial_period_days`); else nil.
    public var days: Int?
    /// How many of the subscription's periods the offer lasts (a free trial's, when not in days).
    public var periods: Int?
    /// The offer's price as a decimal in the product's currency: each period's (pay as you go) or
    /// all of them together (pay up front); nil for a free trial.
    public var price: String?

    public init(type: Kind, days: Int? = nil, periods: Int? = nil, price: String? = nil) {
        self.type = type
        self.days = days
        self.periods = periods
        self.price = price
    }

    /// The most periods an offer may last, and the longest trial in days.
    public static let maxPeriods = 24
    public static let maxDays = 365

    /// What the first period bought with the offer costs, in hundredths of the currency.
    public var firstChargeCents: Int { price.flatMap(Price.cents) ?? 0 }

    /// The first charge in a storefront whose normal price is `local` where the catalog's is
    /// `normal` (both in cents): the same share of the price, to the nearest unit.
    public func firstChargeCents(local: Int, normal: Int) -> Int {
        guard normal > 0, local != normal else { return firstChargeCents }
        return (firstChargeCents * local + normal / 2) / normal
    }

    /// How long the first period bought with the offer lasts, as the months or days it adds.
    public func firstPeriod(periodMonths: Int) -> DateComponents {
        switch type {
        case .freeTrial: days.map { DateComponents(day: $0) } ?? DateComponents(month: (periods ?? 1) * periodMonths)
        case .payUpFront: DateComponents(month: (periods ?? 1) * periodMonths)
        case .payAsYouGo: DateComponents(month: periodMonths)
        }
    }

    /// Renewals after the first period still at the offer's price (pay as you go's later periods).
    public var discountedRenewals: Int { type == .payAsYouGo ? max((periods ?? 1) - 1, 0) : 0 }

    /// The offer's period as an ISO 8601 duration, as StoreKit's `offerPeriod` states it: the
    /// whole offer (`P14D`, `P6M`), or, paying as you go, each discounted period's (`P1M`).
    public func isoPeriod(periodMonths: Int) -> String {
        let span = firstPeriod(periodMonths: periodMonths)
        if let days = span.day { return "P\(days)D" }
        return "P\(span.month ?? periodMonths)M"
    }

    /// The offer as a reader reads it beside the normal price: "14 days free, then 2.49 USD a
    /// month", "0.99 USD a month for 3 months, then 2.49 USD a month".
    public func described(normal: Price, periodMonths: Int) -> String {
        let then = "then \(Price.shown(cents: Price.cents(normal.amount) ?? 0, normal.currency)) \(Self.every(periodMonths))"
        let offered = Price.shown(cents: firstChargeCents, normal.currency)
        switch type {
        case .freeTrial:
            if let days { return "\(days) \(days == 1 ? "day" : "days") free, \(then)" }
            return "\(Self.months((periods ?? 1) * periodMonths)) free, \(then)"
        case .payAsYouGo:
            return "\(offered) \(Self.every(periodMonths)) for \(Self.months((periods ?? 1) * periodMonths)), \(then)"
        case .payUpFront:
            return "\(offered) for the first \(Self.months((periods ?? 1) * periodMonths)), \(then)"
        }
    }

    static func months(_ count: Int) -> String {
        count % 12 == 0 ? (count == 12 ? "1 year" : "\(count / 12) years") : (count == 1 ? "1 month" : "\(count) months")
    }

    static func every(_ periodMonths: Int) -> String {
        periodMonths == 1 ? "a month" : periodMonths == 12 ? "a year" : "every \(periodMonths) months"
    }
}
