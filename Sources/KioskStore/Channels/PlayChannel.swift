import Crypto
import Foundation
import KioskCore
import SQLKit

/// Android's channel: Google Play purchases presented by the account they are for, and Play's
/// Real-time developer notifications (voided purchases).
///
/// A purchase is its `purchaseToken`. The first account that presents a token owns it
/// (``channelRecords.bindPurchase(_:describing:)``); another account presenting it is refused, never
/// granted twice. `purchaseState` 0 grants, 2 (pending: a cash payment, a parent's approval) is
/// kept until the same token comes back purchased, 1 is refused. The grant is an ordinary Kiosk
/// purchase keyed by the token, so it reaches the account's devices as every purchase does; its
/// answer, once saved on the device, is what the app acknowledges to Play.
///
/// A voided purchase (refunded or charged back) may be notified before the purchase is presented.
/// As with Stripe, each side writes first and then looks for the other: the claim records its
/// transaction and then looks for a void; the void keeps its event and then looks for the
/// transaction. Whichever commits second sees the first.
public struct PlayChannel: StoreOwner {
    let base: StoreBase

    static let channel = PaidBy.play.rawValue

    /// Grants a verified Play purchase to `accountId`.
    /// - Throws: `play_not_configured`; `play_signature`, `play_format`, `play_package` for a proof
    ///   that does not hold; `play_cancelled`; `unknown_product`; `purchase_owned` (another
    ///   account's); `payment_withdrawn` (voided).
    public func claim(_ proof: PlayPurchaseProof, accountId: String) async throws -> ChannelPurchaseAnswer {
        guard let verifier = base.channels.play else {
            throw StoreError.channelNotConfigured(Self.channel, flags: "--play-package-name and --play-public-key")
        }
        guard proof.purchase.utf8.count <= 16_384, proof.signature.utf8.count <= 4_096 else {
            throw StoreError.invalidRequest("the Play purchase or its signature is too long to be one")
        }
        // Nothing of the purchase is read before its signature holds.
        let purchase: PlayPurchase
        do {
            purchase = try verifier.verify(json: Data(proof.purchase.utf8), signature: proof.signature)
        } catch let refusal as PlayPurchaseVerifier.Refusal {
            throw StoreError.proofRefused("play_\(refusal.code)", refusal.reason)
        }
        let token = purchase.purchaseToken
        guard Self.isToken(token) else { throw StoreError.proofRefused("play_format", "the purchase's purchaseToken is not one Play issues") }
        if let named = purchase.obfuscatedAccountId, !named.isEmpty, named != accountId {
            // The app said which account paid (setObfuscatedAccountId): only that one may present it.
            throw StoreError.channelPurchaseOwned("Play purchase \(purchase.orderId ?? "(no order id)")")
        }
        switch purchase.purchaseState {
        case 0, 2: break
        case 1: throw StoreError(.notPaid, code: "play_cancelled", message: "the Play purchase was cancelled (purchaseState 1); it grants nothing")
        default: throw StoreError.proofRefused("play_format", "the Play purchase's purchaseState \(purchase.purchaseState) is none Play sends")
        }
        let published = try await catalog.storeProducts()
        guard let productId = published.productsByPlayID[purchase.productId], let product = published.products[productId] else {
            throw StoreError(.unknownProduct, code: "unknown_product",
                             message: "no catalog product has playProductId \"\(purchase.productId.prefix(100))\"; add it to the catalog, or refund the purchase on Play")
        }
        let what = "Play purchase \(purchase.orderId.map { String($0.prefix(100)) } ?? "(no order id)")"
        var bound = try await channelRecords.bindPurchase(ChannelPurchaseRecord(
            channel: Self.channel, purchaseId: token, accountId: accountId, productId: productId, state: ChannelPurchaseState.pending,
            orderId: purchase.orderId.map { String($0.prefix(100)) }, transactionId: nil, createdAt: clock.wallNow()), describing: what)
        guard purchase.purchaseState == 0 else {
            return ChannelPurchaseAnswer(state: ChannelPurchaseState.pending, productId: productId,
                                         message: "\(what) is pending at Play; present it again once Play says it is purchased")
        }
        if bound.state == ChannelPurchaseState.pending, let void = try await voided(token) {
            // Voided before it was presented: refused, and the void leaves the operator's list.
            try await channelRecords.settleEvent(channel: Self.channel, eventId: void, outcome: ChannelEventOutcome.refused, transaction: nil, account: accountId,
                                         detail: "voided by Google Play before it was presented; the purchase was refused when it came")
            throw StoreError.paymentWithdrawn(what)
        }
        // Checked before it is priced: a signed quantity of 2^62 must be a refusal, not an overflow.
        let quantity = try Payments.channelQuantity(purchase.quantity ?? 1, of: product)
        // A subscription's first period is the one Play says is paid (its notifications carry no
        // dates), and the store's subscription row is handed to Play, whose notifications move it.
        let playState = product.kind == .subscription ? try await paidSubscription(token, what: what) : nil
        let received = clock.wallNow()
        let record = try await payments.grantPaid(
            productId: productId, quantity: quantity, accountId: accountId, reference: Self.reference(token), method: Self.channel,
            amountCents: try Store.cents(product.price) * quantity, currency: product.price.currency, period: playState?.period,
            alongside: { record, db in
                if playState != nil, !record.isFreeRebuy {
                    try await SubscriptionRows(db).link(record.originalTransactionId, channel: Self.channel, subscriptionId: Self.reference(token), at: received)
                }
                return true
            }).record
        if let playState, !record.isFreeRebuy {
            _ = try await follow(playState.purchase, token: token, type: nil, at: received)
        }
        let owned = record.isFreeRebuy
        if bound.transactionId != record.id {
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: token, state: owned ? ChannelPurchaseState.owned : ChannelPurchaseState.granted, transactionId: record.id)
            bound.transactionId = record.id
        }
        // Written first, looked for second: a void that came meanwhile is applied now.
        if let void = try await voided(token) {
            try await channelRecords.revokeGrant(record.id, reason: "voided by Google Play")
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: token, state: ChannelPurchaseState.revoked, transactionId: record.id)
            try await channelRecords.settleEvent(channel: Self.channel, eventId: void, outcome: ChannelEventOutcome.revoked, transaction: record.id, account: accountId,
                                         detail: "voided by Google Play: \(record.id) revoked when the purchase was presented")
            throw StoreError.paymentWithdrawn(what)
        }
        guard record.status == .purchased else { throw StoreError.paymentWithdrawn(what) }
        let answered = try await receipts.withCurrentReceipts([record])[0]
        return ChannelPurchaseAnswer(state: ChannelPurchaseState.granted, productId: productId, transaction: answered.wire, owned: owned ? true : nil,
                                     message: owned ? "the account already had \(productId): refund the Play purchase" : nil)
    }

    /// Applies one Real-time developer notification, once by its Pub/Sub message id.
    public func receive(_ push: PlayPushMessage) async throws -> AdminChannelEventRow {
        guard let verifier = base.channels.play else {
            throw StoreError.channelNotConfigured(Self.channel, flags: "--play-package-name and --play-public-key")
        }
        guard Self.isToken(push.message.messageId), push.message.messageId.utf8.count <= 255 else {
            throw StoreError.invalidRequest("the push message's messageId is not one Pub/Sub sends")
        }
        let notification: PlayDeveloperNotification
        do {
            notification = try push.notification()
        } catch let refusal as PlayNotificationVerifier.Refusal {
            throw StoreError.invalidRequest(refusal.reason)
        }
        let eventId = push.message.messageId
        if let kept = try await channelRecords.keptEvent(channel: Self.channel, eventId: eventId), kept.outcome != ChannelEventOutcome.unmatched {
            return kept
        }
        func keep(_ outcome: String, payment: String? = nil, detail: String) async throws -> AdminChannelEventRow {
            try await channelRecords.keepEvent(AdminChannelEventRow(
                channel: Self.channel, eventId: eventId, type: notification.kind, payment: payment, outcome: outcome,
                detail: detail, accountId: nil, transactionId: nil, receivedAt: clock.wallNow()))
        }
        guard notification.packageName == verifier.packageName else {
            return try await keep(ChannelEventOutcome.ignored, detail: "a notification for the app \(notification.packageName.prefix(100)), not \(verifier.packageName)")
        }
        if let fields = notification.subscriptionNotification {
            return try await subscriptionNotified(fields, eventId: eventId, keep: keep)
        }
        guard let voided = notification.voidedPurchaseNotification else {
            return try await keep(ChannelEventOutcome.ignored, detail: "a \(notification.kind), which Kiosk records and does not act on")
        }
        guard Self.isToken(voided.purchaseToken) else {
            return try await keep(ChannelEventOutcome.unmatched, detail: "a voided purchase whose purchaseToken is not one Play issues")
        }
        let token = voided.purchaseToken
        guard voided.refundType != 2 else {
            return try await keep(ChannelEventOutcome.partialRefund, payment: token,
                                  detail: "a part of the purchase's quantity was voided; nothing was revoked (revoke it by hand if it meant to)")
        }
        // Written first: a claim of this token committing meanwhile finds it and revokes itself.
        var row = try await keep(ChannelEventOutcome.unmatched, payment: token,
                                 detail: "voided by Google Play; the purchase was not presented yet: if it is, it is refused")
        guard let bound = try await channelRecords.purchase(channel: Self.channel, purchaseId: token), let transactionId = bound.transactionId else {
            return row
        }
        row.transactionId = transactionId
        row.accountId = bound.accountId
        if let problem = try await channelRecords.revokeGrant(transactionId, reason: "voided by Google Play") {
            // Nothing was taken back (a credit pack spent meanwhile): said so, and listed for the operator.
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: token, state: ChannelPurchaseState.kept, transactionId: transactionId)
            row.outcome = ChannelEventOutcome.unsettled
            row.detail = "voided by Google Play, but \(transactionId) was not taken back: \(problem); revoke it by hand (kiosk admin revoke) or leave it"
        } else {
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: token, state: ChannelPurchaseState.revoked, transactionId: transactionId)
            row.outcome = ChannelEventOutcome.revoked
            row.detail = "voided by Google Play: \(transactionId) revoked, its content removed from the account's devices"
        }
        try await channelRecords.settleEvent(channel: Self.channel, eventId: eventId, outcome: row.outcome, transaction: transactionId,
                                     account: bound.accountId, detail: row.detail)
        return row
    }

    /// The voided-purchase event kept for `token`, if any.
    private func voided(_ token: String) async throws -> String? {
        try await database.read { db in
            try await db.select().column("eventId").from("channelEvent")
                .where("channel", .equal, Self.channel).where("payment", .equal, token)
                .where("type", .equal, "voidedPurchaseNotification").where("outcome", .notEqual, ChannelEventOutcome.partialRefund)
                .first()?.decode(column: "eventId", as: String.self)
        }
    }

    /// The grant's idempotency key: the token's digest, since a token may be longer than a key.
    static func reference(_ token: String) -> String {
        "play:" + SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// A Play token or Pub/Sub id as the store keeps it: letters, digits, `.`, `_`, `-`, `:`, at most 2,048 bytes.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 2_048 && text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x5F || byte == 0x2D || byte == 0x2E || byte == 0x3A
        }
    }
}
