import Crypto
import Foundation

/// Checks a `Stripe-Signature` header as Stripe documents it, before a byte of the body is read
/// as an event.
///
/// The header is `t=TIMESTAMP,v1=HEX[,v1=HEX…]` (other schemes, such as Stripe's test-mode
/// `v0`, are ignored). The signed text is the timestamp, a dot and the body's exact bytes; a
/// signature is HMAC-SHA256 of it with the endpoint's secret, in lower-case hex. The body is
/// genuine when any `v1` matches under any configured secret (two secrets while one is rotated),
/// each compared in constant time, and the timestamp is within `tolerance` of now (an old event
/// replayed later is refused; Stripe's own libraries allow 300 s).
public struct StripeSignature: Sendable {
    /// Why a header is refused, said in the 400 that answers it.
    public struct Refusal: Error, Equatable, CustomStringConvertible, Sendable {
        public let reason: String
        public var description: String { reason }
    }

    public let secrets: [String]
    public let tolerance: TimeInterval

    public init(secrets: [String], tolerance: TimeInterval = 300) {
        self.secrets = secrets.filter { !$0.isEmpty }
        self.tolerance = tolerance
    }

    /// - Parameter now: the time to compare the signature's with (the wall clock: Stripe's scheme
    ///   is one, and a clock far off refuses every event, which the refusal then says).
    /// - Returns: the header's timestamp.
    /// - Throws: ``Refusal`` naming what is wrong.
    @discardableResult
    public func verify(body: Data, header: String?, now: Date) throws -> Date {
        guard let header, !header.isEmpty else {
            throw Refusal(reason: "no Stripe-Signature header; only Stripe's signed events are taken here")
        }
        var timestamp: Int64?
        var signatures: [Data] = []
        for item in header.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = parts[0].trimmingCharacters(in: .whitespaces)
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            if key == "t" { timestamp = Int64(value) }
            if key == "v1", let bytes = Self.hexBytes(value) { signatures.append(bytes) }
        }
        guard let timestamp else { throw Refusal(reason: "the Stripe-Signature header has no timestamp (t=…)") }
        guard !signatures.isEmpty else { throw Refusal(reason: "the Stripe-Signature header has no v1 signature") }
        var signed = Data("\(timestamp).".utf8)
        signed.append(body)
        let matches = secrets.contains { secret in
            let key = SymmetricKey(data: Data(secret.utf8))
            return signatures.contains { HMAC<SHA256>.isValidAuthenticationCode($0, authenticating: signed, using: key) }
        }
        guard matches else {
            throw Refusal(reason: "no signature in the Stripe-Signature header matches this body under the configured webhook secret(s)")
        }
        let sent = Date(timeIntervalSince1970: TimeInterval(timestamp))
        let age = now.timeIntervalSince(sent)
        guard abs(age) <= tolerance else {
            // Said in whole seconds, clamped: a timestamp far out of range must not trap the conversion.
            let seconds = Int64(max(-1e12, min(1e12, age)).rounded(age < 0 ? .down : .up))
            throw Refusal(reason: "the event was signed \(seconds < 0 ? "\(-seconds) s ahead of" : "\(seconds) s before") now, outside the tolerance of \(Int(tolerance)) s: a replay, or a clock that is off")
        }
        return sent
    }

    static func hexBytes(_ text: String) -> Data? {
        guard text.utf8.count == 64 else { return nil }
        var bytes = Data(capacity: 32)
        var high: UInt8?
        for character in text.utf8 {
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}

/// The few fields of a Stripe event Kiosk reads. Everything else in the event is kept only as
/// the event's type and id in the store's record of it.
public struct StripeEvent: Decodable, Sendable {
    public var id: String
    public var type: String
    public var created: Int64?
    /// False for an event of Stripe's test mode (test cards, no money): a production store grants
    /// nothing for one. Nil when the sender left it out.
    public var livemode: Bool?
    public var data: DataField

    public struct DataField: Decodable, Sendable {
        public var object: StripeObject
    }

    /// A Checkout Session, a Charge or a Dispute: the fields of each that Kiosk reads.
    public struct StripeObject: Decodable, Sendable {
        public var id: String?
        public var object: String?
        // A Checkout Session's.
        public var paymentStatus: String?
        public var clientReferenceId: String?
        public var amountTotal: Int?
        public var currency: String?
        public var metadata: [String: String]?
        /// The payment intent a session, a charge or a dispute belongs to.
        public var paymentIntent: String?
        // A Charge's.
        public var refunded: Bool?
        public var amount: Int?
        public var amountRefunded: Int?
        /// A Dispute's: `won`, `lost`, `needs_response`, …; a Subscription's: `active`, `past_due`, `canceled`, …
        public var status: String?
        // A Checkout Session's in subscription mode: `mode` `subscription`, the Stripe subscription
        // it made and that subscription's first invoice.
        public var mode: String?
        /// A session's subscription; an invoice's, in API versions before 2025-03-31.
        public var subscription: String?
        public var invoice: String?
        // An Invoice's.
        /// `subscription_create` (the first), `subscription_cycle` (a renewal), `subscription_update`, …
        public var billingReason: String?
        public var amountPaid: Int?
        /// When Stripe tries a failed invoice again (Unix seconds); nil when it has given up.
        public var nextPaymentAttempt: Int64?
        public var lines: List<Line>?
        /// The invoice's subscription and that subscription's metadata (API 2025-03-31 and later).
        public var parent: Parent?
        /// The same, in API versions before 2025-03-31.
        public var subscriptionDetails: SubscriptionDetails?
        /// The invoice's payments (API 2025-03-31 and later; before, `payment_intent`).
        public var payments: List<InvoicePayment>?
        // A Subscription's.
        public var cancelAtPeriodEnd: Bool?
        public var cancellationDetails: CancellationDetails?
        // The tax Stripe charged (`automatic_tax`): a session's `total_details.amount_tax` and the
        // reader's country from `customer_details.address`; an invoice's `total_taxes`.
        public var totalDetails: TotalDetails?
        public var customerDetails: CustomerDetails?
        public var totalTaxes: [TaxAmount]?

        enum CodingKeys: String, CodingKey {
            case id, object, currency, metadata, refunded, amount, status, mode, subscription, invoice, lines, parent, payments
            case totalDetails = "total_details"
            case customerDetails = "customer_details"
            case totalTaxes = "total_taxes"
            case paymentStatus = "payment_status"
            case clientReferenceId = "client_reference_id"
            case amountTotal = "amount_total"
            case paymentIntent = "payment_intent"
            case amountRefunded = "amount_refunded"
            case billingReason = "billing_reason"
            case amountPaid = "amount_paid"
            case nextPaymentAttempt = "next_payment_attempt"
            case subscriptionDetails = "subscription_details"
            case cancelAtPeriodEnd = "cancel_at_period_end"
            case cancellationDetails = "cancellation_details"
        }

        /// A Stripe list: its `data`.
        public struct List<Element: Decodable & Sendable>: Decodable, Sendable {
            public var data: [Element]?
        }

        /// An invoice line: the period it pays for (Unix seconds).
        public struct Line: Decodable, Sendable {
            public var period: Period?
            public struct Period: Decodable, Sendable {
                public var start: Int64?
                public var end: Int64?
            }
        }

        public struct Parent: Decodable, Sendable {
            public var subscriptionDetails: SubscriptionDetails?
            enum CodingKeys: String, CodingKey { case subscriptionDetails = "subscription_details" }
        }

        public struct SubscriptionDetails: Decodable, Sendable {
            public var subscription: String?
            public var metadata: [String: String]?
        }

        public struct InvoicePayment: Decodable, Sendable {
            public var payment: Payment?
            public struct Payment: Decodable, Sendable {
                public var paymentIntent: String?
                enum CodingKeys: String, CodingKey { case paymentIntent = "payment_intent" }
            }
        }

        public struct TotalDetails: Decodable, Sendable {
            public var amountTax: Int?
            enum CodingKeys: String, CodingKey { case amountTax = "amount_tax" }
            /// A tax Kiosk cannot read (not a whole number) is read as none: the payment it rides
            /// on is still granted, never refused for the tax's sake.
            public init(from decoder: any Decoder) throws {
                amountTax = try? decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Int.self, forKey: .amountTax)
            }
        }

        public struct CustomerDetails: Decodable, Sendable {
            public var address: Address?
            public struct Address: Decodable, Sendable { public var country: String? }
        }

        public struct TaxAmount: Decodable, Sendable {
            public var amount: Int?
            enum CodingKeys: String, CodingKey { case amount }
            public init(from decoder: any Decoder) throws {
                amount = try? decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Int.self, forKey: .amount)
            }
        }

        /// The tax Stripe charged in this session or invoice, in its smallest unit; nil when it says none.
        /// Each amount is bounded as an amount Kiosk keeps, and so is their sum: a forged or broken
        /// event cannot overflow it (nil then, as for none).
        public var taxCharged: Int? {
            let bound = 1 << 40
            if let tax = totalDetails?.amountTax { return (0...bound).contains(tax) ? tax : nil }
            let amounts = (totalTaxes ?? []).compactMap(\.amount)
            guard !amounts.isEmpty, amounts.allSatisfy({ (0...bound).contains($0) }) else { return nil }
            let sum = amounts.reduce(0, +)
            return sum <= bound ? sum : nil
        }

        public struct CancellationDetails: Decodable, Sendable {
            /// `cancellation_requested`, `payment_failed`, `payment_disputed`.
            public var reason: String?
        }

        /// An invoice's subscription, in either API version's place.
        public var invoiceSubscription: String? {
            parent?.subscriptionDetails?.subscription ?? subscriptionDetails?.subscription ?? subscription
        }

        /// The metadata of an invoice's subscription as it was when the invoice was made.
        public var invoiceSubscriptionMetadata: [String: String]? {
            parent?.subscriptionDetails?.metadata ?? subscriptionDetails?.metadata
        }

        /// The payment intent that paid an invoice, in either API version's place.
        public var invoicePaymentIntent: String? {
            paymentIntent ?? payments?.data?.lazy.compactMap { $0.payment?.paymentIntent }.first
        }

        /// The period an invoice pays for: its lines' earliest start to their latest end; nil when
        /// it is none Stripe makes (before 2000 or after 2200, or longer than Stripe's longest
        /// interval, three years), which a signed event could otherwise carry into every date
        /// Kiosk computes from it.
        public var invoicePeriod: (start: Date, end: Date)? {
            let periods = (lines?.data ?? []).compactMap { line -> (Int64, Int64)? in
                guard let start = line.period?.start, let end = line.period?.end, end > start else { return nil }
                return (start, end)
            }
            guard let start = periods.map(\.0).min(), let end = periods.map(\.1).max(),
                  start >= Self.earliest, end <= Self.latest, end - start <= Self.longestPeriod else { return nil }
            return (Date(timeIntervalSince1970: TimeInterval(start)), Date(timeIntervalSince1970: TimeInterval(end)))
        }

        /// 2000-01-01 and 2200-01-01 (UTC), and three years and a day: the dates a period may take.
        public static let earliest: Int64 = 946_684_800
        public static let latest: Int64 = 7_258_118_400
        public static let longestPeriod: Int64 = (3 * 366 + 1) * 86_400
    }
}
