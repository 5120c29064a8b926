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
        /// A Dispute's: `won`, `lost`, `needs_response`, …
        public var status: String?

        enum CodingKeys: String, CodingKey {
            case id, object, currency, metadata, refunded, amount, status
            case paymentStatus = "payment_status"
            case clientReferenceId = "client_reference_id"
            case amountTotal = "amount_total"
            case paymentIntent = "payment_intent"
            case amountRefunded = "amount_refunded"
        }
    }
}
