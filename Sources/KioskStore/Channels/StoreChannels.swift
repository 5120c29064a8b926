import Foundation
import KioskCore
import PostgresNIO
import SQLKit

/// The payment channels a store takes besides its own sandbox and the App Store (whose verifier
/// ``Store`` is given on its own): what the operator configured on `kiosk serve`.
public struct StoreChannels: Sendable {
    /// Google Play: the app's licensing key and package (`--play-package-name`, `--play-public-key`).
    public var play: PlayPurchaseVerifier?
    /// Google Play's Real-time developer notifications, pushed by Pub/Sub with a signed token.
    public var playNotifications: PlayNotificationVerifier?
    /// Google's Android Publisher API, read as a service account (`--play-service-account`): the
    /// state of each Play subscription, which its notifications do not carry.
    public var playAPI: PlayDeveloperAPI?
    /// The web shop's checkout page that `kiosk buy` sends a reader to (`--checkout-url`).
    public var checkout: CheckoutURLTemplate?
    /// Stripe's API, when Kiosk creates the Checkout Sessions itself (`--stripe-secret-key`).
    public var stripeAPI: StripeAPI?
    /// `--stripe-automatic-tax`: Checkout Sessions ask Stripe to compute the tax
    /// (`automatic_tax[enabled]`, prices holding it), and each sale records the tax Stripe charged
    /// and the reader's country from its event, instead of the operator's table.
    public var stripeAutomaticTax = false

    /// None: a sandbox's own payments and the App Store only. `kiosk serve` sets the ones its flags name.
    public init() {}
}

/// The publisher's checkout URL with Kiosk's values in its place-holders: `{product}`, `{account}`,
/// `{intent}` (the one-time purchase intent) and `{quantity}`, each percent-encoded. The web shop
/// creates its Checkout Session from them, with `client_reference_id` the account and the product
/// and intent in its metadata (`kiosk_product_id`, `kiosk_intent`).
public struct CheckoutURLTemplate: Sendable, Equatable {
    public let template: String

    /// - Throws: ``StoreError`` `invalid_request` for a template that is no http(s) URL or lacks `{intent}`.
    public init(_ template: String) throws {
        // Printed to readers as it is: no spaces or control characters that could forge a line.
        guard !template.unicodeScalars.contains(where: { $0.value < 0x21 || ($0.value >= 0x7F && $0.value < 0xA0) }) else {
            throw StoreError.invalidRequest("the checkout URL may not contain spaces or control characters")
        }
        guard let url = URL(string: template.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "")),
              ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw StoreError.invalidRequest("the checkout URL \(template.prefix(200)) is not an http(s) URL")
        }
        guard template.contains("{intent}") else {
            throw StoreError.invalidRequest("the checkout URL must carry {intent}, the purchase intent the web shop passes back in its metadata (kiosk_intent)")
        }
        self.template = template
    }

    /// Where the reader is sent to pay (`https://shop.example:8443`): the one address besides the
    /// store's own that the shop's buy form may lead to (its Content-Security-Policy's `form-action`).
    public var origin: String {
        guard let url = URL(string: template.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "")),
              let scheme = url.scheme?.lowercased(), let host = url.host else { return "'none'" }
        return "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
    }

    func url(product: String, account: String, intent: String, quantity: Int) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        func encoded(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
        return template
            .replacingOccurrences(of: "{product}", with: encoded(product))
            .replacingOccurrences(of: "{account}", with: encoded(account))
            .replacingOccurrences(of: "{intent}", with: encoded(intent))
            .replacingOccurrences(of: "{quantity}", with: String(quantity))
    }
}

/// A channel's purchase bound to the account that presented it first: a Google Play purchase
/// token, or an App Store transaction. The row's primary key is what two accounts presenting the
/// same purchase at once race on: one insert wins, the other reads the winner and is refused.
struct ChannelPurchaseRecord: Codable, Sendable {
    var channel: String
    var purchaseId: String
    var accountId: String
    var productId: String
    /// One of ``ChannelPurchaseState``'s.
    var state: String
    var orderId: String?
    var transactionId: String?
    var createdAt: Date
}

/// What became of a channel's purchase bound to an account (``ChannelPurchaseRecord/state``).
enum ChannelPurchaseState {
    /// Play's pending purchase, or bound and not granted yet.
    static let pending = "pending"
    static let granted = "granted"
    /// Paid for what the account had: a free re-buy.
    static let owned = "owned"
    /// Withdrawn by the channel (a refund, a revocation, a void): the grant revoked.
    static let revoked = "revoked"
    /// Withdrawn by the channel, but nothing could be taken back (a credit pack spent meanwhile):
    /// the grant stands, and a reversal of the withdrawal gives nothing more.
    static let kept = "kept"
}

/// The one writer of what the payment channels tell the store (`channelPurchase`: a channel's
/// purchase bound to the account that presented it; `channelEvent`: each event a channel sent and
/// what came of it). Stripe, Play and the App Store's bridge keep their records through it.
struct ChannelRecords: StoreOwner {
    let base: StoreBase

    /// Binds a channel's purchase to `accountId` unless another account holds it already.
    /// - Throws: `purchase_owned` when another account presented it first.
    func bindPurchase(_ record: ChannelPurchaseRecord, describing what: String) async throws -> ChannelPurchaseRecord {
        let bound = try await database.write { db in
            try await db.insert(into: "channelPurchase").model(record).ignoringConflicts().run()
            return try await db.select().column("*").from("channelPurchase")
                .where("channel", .equal, record.channel).where("purchaseId", .equal, record.purchaseId)
                .first(decoding: ChannelPurchaseRecord.self)
        }
        guard let bound else { throw StoreError.invalidRequest("\(what) could not be recorded; send it again") }
        guard bound.accountId == record.accountId else {
            logger.notice("a channel purchase presented by a second account was refused",
                          metadata: ["channel": "\(record.channel)", "account": "\(record.accountId)"])
            throw StoreError.channelPurchaseOwned(what)
        }
        return bound
    }

    /// Records what came of a bound purchase (only the state and its transaction).
    func settlePurchase(channel: String, purchaseId: String, state: String, transactionId: String?) async throws {
        try await database.write { db in
            try await db.update("channelPurchase").set("state", to: state).set("transactionId", to: transactionId)
                .where("channel", .equal, channel).where("purchaseId", .equal, purchaseId).run()
        }
    }

    func purchase(channel: String, purchaseId: String) async throws -> ChannelPurchaseRecord? {
        try await database.read { db in
            try await db.select().column("*").from("channelPurchase")
                .where("channel", .equal, channel).where("purchaseId", .equal, purchaseId)
                .first(decoding: ChannelPurchaseRecord.self)
        }
    }
}

// MARK: The events channels send

/// What came of a channel's event (``AdminChannelEventRow/outcome``): the words the operator's
/// list and the channels agree on.
enum ChannelEventOutcome {
    static let granted = "granted"
    static let revoked = "revoked"
    static let refunded = "refunded"
    static let ignored = "ignored"
    /// Paid, and not granted: the account or the product is unknown, or the payment names no intent.
    static let unmatched = "unmatched"
    /// Paid for what the account already had: the operator refunds it on the channel.
    static let owned = "owned"
    /// A refund or a void the store could not carry out by itself (a credit pack spent meanwhile):
    /// the operator revokes by hand or leaves it.
    static let unsettled = "unsettled"
    /// A refund the channel reversed, or a dispute the publisher won: what it took was given back.
    static let reversed = "reversed"
    /// A checkout not paid yet: its `async_payment_succeeded` grants it.
    static let pending = "pending"
    /// A part of the payment refunded or voided: nothing revoked.
    static let partialRefund = "partial_refund"
    /// A void that came before its purchase: the purchase was refused when it came.
    static let refused = "refused"
    /// A step of a subscription the channel renews (a failed charge, auto-renew turned, its end).
    static let applied = "applied"
    /// The outcomes the operator must act on, as the partial index `channelEvent_to_act_on` spells them.
    static let toActOn = [unmatched, owned, unsettled]
    static let toActOnSQL = "('unmatched', 'owned', 'unsettled')"
}

extension ChannelRecords {
    func keptEvent(channel: String, eventId: String) async throws -> AdminChannelEventRow? {
        try await database.read { db in
            try await db.select().column("*").from("channelEvent").where("channel", .equal, channel).where("eventId", .equal, eventId)
                .first(decoding: AdminChannelEventRow.self)
        }
    }

    /// Keeps a channel's event with what came of it, once: an event already kept (the same one
    /// handled at once by two instances) is answered as it was kept.
    func keepEvent(_ row: AdminChannelEventRow) async throws -> AdminChannelEventRow {
        let inserted = try await database.write { try await InsertChannelEvent.insert(row, in: $0) }
        return inserted ? row : try await keptEvent(channel: row.channel, eventId: row.eventId) ?? row
    }

    /// Settles every event of a channel's payment kept with outcome `from` (only these columns).
    func settleEvents(channel: String, payment: String, from: String, to outcome: String, detail: String) async throws {
        try await database.write { db in
            try await db.update("channelEvent").set("outcome", to: outcome).set("detail", to: detail)
                .where("channel", .equal, channel).where("payment", .equal, payment).where("outcome", .equal, from).run()
        }
    }

    /// Records what a kept event finally came to (only these columns).
    func settleEvent(channel: String, eventId: String, outcome: String, transaction: String?, account: String?, detail: String? = nil) async throws {
        try await database.write { db in
            var update = db.update("channelEvent").set("outcome", to: outcome).set("transactionId", to: transaction).set("accountId", to: account)
            if let detail { update = update.set("detail", to: detail) }
            try await update.where("channel", .equal, channel).where("eventId", .equal, eventId).run()
        }
    }

    /// Revokes a channel's grant as an operator's refund does (the money went back on the
    /// channel); one revoked already (a refund and a dispute of one payment, or the two sides of
    /// a race) is left as it is.
    /// - Returns: nil once it is revoked; why not, when the store cannot take it back by itself
    ///   (`credits_spent`: a credit pack whose credits were spent meanwhile), for the operator.
    @discardableResult
    func revokeGrant(_ transactionId: String, reason: String) async throws -> String? {
        do {
            _ = try await payments.revoke(transactionId: transactionId, reason: reason, refund: true)
        } catch let error as StoreError where error.code == "already_revoked" || error.code == "already_refunded" {
            return nil
        } catch let error as StoreError where error.code == "credits_spent" {
            logger.warning("a channel's refund could not be taken back in credits", metadata: ["transaction": "\(transactionId)"])
            return error.message
        }
        return nil
    }
}

/// A channel's event, kept once by its id.
struct InsertChannelEvent: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        INSERT INTO "channelEvent" ("channel", "eventId", "type", "payment", "outcome", "detail", "accountId", "transactionId", "receivedAt")
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        ON CONFLICT ("channel", "eventId") DO NOTHING RETURNING "eventId"
        """#
    static let parameterTypes: [PostgresDataType] = [.text, .text, .text, .text, .text, .text, .text, .text, .timestamptz]

    let row: AdminChannelEventRow

    /// Inserts a channel's event unless it is kept already; true when this inserted it. A prepared
    /// statement: it runs with every grant of a channel's payment.
    static func insert(_ row: AdminChannelEventRow, in db: any SQLDatabase) async throws -> Bool {
        try await !db.rows(InsertChannelEvent(row: row)).isEmpty
    }

    var parameters: [StatementParameter] {
        [.text(row.channel), .text(row.eventId), .text(row.type), .text(row.payment), .text(row.outcome), .text(row.detail),
         .text(row.accountId), .text(row.transactionId), .date(row.receivedAt)]
    }
}

/// The refunds and disputes a channel sent about one payment (those a grant of it must undo: not a
/// partial refund, nor a dispute the publisher won), and,
/// as a row of type `account.closed`, whether the account granted is deleted or disabled (a grant
/// no one can use): one statement, read with the grant.
struct ChannelWithdrawals: StoreStatement {
    typealias Row = any SQLRow
    static let sql = #"""
        SELECT "eventId", "type" FROM "channelEvent"
        WHERE "channel" = $1 AND "payment" = $2 AND "type" IN ('charge.refunded', 'charge.dispute.created') AND "outcome" NOT IN ('partial_refund', 'reversed')
        UNION ALL
        SELECT '' AS "eventId", 'account.closed' AS "type" FROM "account"
        WHERE "id" = $3 AND ("deletedAt" IS NOT NULL OR "disabledAt" IS NOT NULL)
        """#
    static let parameterTypes: [PostgresDataType] = [.text, .text, .text]

    let channel: String
    let payment: String
    let accountId: String

    var parameters: [StatementParameter] { [.text(channel), .text(payment), .text(accountId)] }
}
