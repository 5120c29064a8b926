import Foundation
import KioskCore
import SQLKit

/// App Store transactions bound to Kiosk accounts: the iOS app passes the account's
/// `appAccountToken` to StoreKit's purchase, and presents the signed transaction with the
/// account's token (`POST /v1/appstore/transactions`). The transaction becomes a Kiosk purchase,
/// delivered to the account's other devices and restored like any other.
///
/// The presenting account must be the one the transaction names: one carrying another account's
/// `appAccountToken` is refused, and one carrying none belongs to the first account that presents
/// it (as a Play token does). A refund or a revocation withdraws the grant; REFUND_REVERSED grants
/// it again.
extension AppStoreBridge {
    static let channel = PaidBy.appstore.rawValue

    /// Grants a verified App Store transaction to `accountId`.
    /// - Throws: `appstore_not_configured`; ``ReceiptRefusal/appStore(_:)`` for a transaction that
    ///   does not verify; `purchase_owned` for another account's; `payment_withdrawn` for a
    ///   refunded or revoked one; `unknown_product`; `invalid_request` for a subscription (which
    ///   stays a proof: `Authorization: AppStore`).
    public func claim(_ proof: AppStoreTransactionProof, accountId: String) async throws -> ChannelPurchaseAnswer {
        guard let appStore else { throw StoreError.appStoreNotConfigured }
        guard proof.signedTransaction.utf8.count <= 65_536 else { throw StoreError.invalidRequest("the signed transaction is too long to be one") }
        let transaction: AppStoreTransaction
        do {
            transaction = try await appStore.signedData.verifyTransaction(proof.signedTransaction)
        } catch {
            throw ReceiptRefusal.appStore(error)
        }
        let what = "App Store transaction \(transaction.transactionId.prefix(64))"
        if let token = transaction.appAccountToken {
            // The app said which account pays: that one only.
            guard let owner = try await accounts.account(forAppAccountToken: token), owner == accountId else {
                logger.notice("an App Store transaction carrying another account's appAccountToken was refused", metadata: ["account": "\(accountId)"])
                throw StoreError(.wrongState, code: "purchase_owned",
                                 message: "\(what) was bought with another account's appAccountToken; it is granted to that account only")
            }
        }
        if transaction.revocationDate != nil { throw StoreError.paymentWithdrawn(what) }
        let published = try await catalog.storeProducts()
        guard let productId = published.productsByAppStoreID[transaction.productId], let product = published.products[productId] else {
            throw StoreError(.unknownProduct, code: "unknown_product",
                             message: "no catalog product has appStoreProductId \"\(transaction.productId.prefix(100))\"; add it to the catalog")
        }
        guard product.kind != .subscription else {
            throw StoreError.invalidRequest("\(productId) is a subscription: the App Store renews it, so its transaction is presented as proof (Authorization: AppStore) rather than granted as a Kiosk purchase")
        }
        _ = try await channelRecords.bindPurchase(ChannelPurchaseRecord(
            channel: Self.channel, purchaseId: transaction.transactionId, accountId: accountId, productId: productId, state: ChannelPurchaseState.pending,
            orderId: transaction.originalTransactionId, transactionId: nil, createdAt: clock.wallNow()), describing: what)
        let quantity = try Payments.channelQuantity(transaction.quantity ?? 1, of: product)
        let record = try await payments.grantPaid(
            productId: productId, quantity: quantity, accountId: accountId, reference: "appstore:\(transaction.transactionId)",
            method: Self.channel, amountCents: try Store.cents(product.price) * quantity, currency: product.price.currency).record
        let owned = record.isFreeRebuy
        try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transaction.transactionId, state: owned ? ChannelPurchaseState.owned : ChannelPurchaseState.granted, transactionId: record.id)
        // Written first, looked for second: a refund notified meanwhile withdraws the grant now.
        if let withdrawn = try await withdrawal(of: transaction.transactionId) {
            try await channelRecords.revokeGrant(record.id, reason: withdrawn)
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transaction.transactionId, state: ChannelPurchaseState.revoked, transactionId: record.id)
            throw StoreError.paymentWithdrawn(what)
        }
        guard record.status == .purchased else { throw StoreError.paymentWithdrawn(what) }
        let answered = try await receipts.withCurrentReceipts([record])[0]
        return ChannelPurchaseAnswer(state: ChannelPurchaseState.granted, productId: productId, transaction: answered.wire, owned: owned ? true : nil,
                                     message: owned ? "the account already had \(productId): refund the App Store purchase" : nil)
    }

    /// Why a notification withdrew the transaction, if one did.
    private func withdrawal(of transactionId: String) async throws -> String? {
        let row = try await database.read { db in
            try await db.select().column("revocationReason").from("appStoreTransaction")
                .where("transactionId", .equal, transactionId).where(SQLColumn("revokedAt"), .isNot, SQLLiteral.null).first()
        }
        guard let row else { return nil }
        return try row.decode(column: "revocationReason", as: String?.self) ?? "withdrawn by the App Store"
    }

    /// After a notification withdrew `transactionId` (REFUND, REVOKE): the Kiosk grant bound to it
    /// is revoked too, its content removed from the account's devices. A grant the store cannot take
    /// back (a credit pack whose credits were spent meanwhile) is kept, its purchase marked `kept` so
    /// that a reversal of the refund gives nothing twice, and listed for the operator.
    func withdrawBoundGrant(_ transactionId: String, reason: String, notificationUUID: String, type: String) async throws {
        guard let bound = try await channelRecords.purchase(channel: Self.channel, purchaseId: transactionId), let granted = bound.transactionId,
              bound.state != ChannelPurchaseState.revoked, bound.state != ChannelPurchaseState.kept else { return }
        if let problem = try await channelRecords.revokeGrant(granted, reason: reason) {
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transactionId, state: ChannelPurchaseState.kept, transactionId: granted)
            _ = try await channelRecords.keepEvent(AdminChannelEventRow(
                channel: Self.channel, eventId: notificationUUID, type: type, payment: transactionId, outcome: ChannelEventOutcome.unsettled,
                detail: "\(reason), but \(granted) was not taken back: \(problem); revoke it by hand (kiosk admin revoke) or leave it",
                accountId: bound.accountId, transactionId: granted, receivedAt: clock.wallNow()))
            return
        }
        try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transactionId, state: ChannelPurchaseState.revoked, transactionId: granted)
    }

    /// After REFUND_REVERSED: what the refund took is given back, exactly. A grant it revoked is
    /// granted again as a new purchase of the same quantity and amount (keyed by the notification,
    /// so Apple's retries grant once), even of a product taken off sale meanwhile (owned is
    /// forever). A grant the refund could not take back (``withdrawBoundGrant``) gets nothing more,
    /// and the refund leaves the operator's list.
    func reinstateBoundGrant(_ transactionId: String, notificationUUID: String) async throws -> String? {
        guard let bound = try await channelRecords.purchase(channel: Self.channel, purchaseId: transactionId), let revokedId = bound.transactionId else { return nil }
        switch bound.state {
        case ChannelPurchaseState.kept:
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transactionId, state: ChannelPurchaseState.granted, transactionId: revokedId)
            try await channelRecords.settleEvents(channel: Self.channel, payment: transactionId, from: ChannelEventOutcome.unsettled, to: ChannelEventOutcome.reversed,
                                          detail: "the refund was reversed: \(revokedId), never taken back, stands as it was")
            return revokedId
        case ChannelPurchaseState.revoked:
            let revoked = try await transaction(revokedId)
            let record = try await payments.grantPaid(
                productId: revoked.productId, quantity: revoked.quantity, accountId: bound.accountId, reference: "appstore:reversed:\(notificationUUID)",
                method: Self.channel, amountCents: revoked.amountCents, currency: revoked.currency, restoring: true, reinstating: revoked).record
            try await channelRecords.settlePurchase(channel: Self.channel, purchaseId: transactionId, state: ChannelPurchaseState.granted, transactionId: record.id)
            return record.id
        default:
            return nil
        }
    }
}
