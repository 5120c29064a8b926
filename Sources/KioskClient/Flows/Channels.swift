import Foundation
import KioskCore
import KioskTransfer

/// What a channel's purchase came to on this device.
public struct ChannelPurchaseResult: Sendable {
    /// The store's answer: `granted` or `pending`.
    public var answer: ChannelPurchaseAnswer
    /// The purchase as this device saved it, for a book, an issue or a subscription period;
    /// nil for credits (the balance is the store's) and for a pending one.
    public var purchase: PurchaseResult?
}

// The payment channels: paying on the web shop, and proofs of Google Play and the App Store.
// Each grant is a purchase made elsewhere, taken in as restore and the change feed take one in.
extension Flows {
    /// Asks for a checkout of `productId`: the web shop's URL where the reader pays it.
    func checkout(_ productId: String, quantity: Int, offerCode: String? = nil) async throws -> Checkout {
        guard try purchases.paymentsEnabled() else { throw ClientError.paymentsDisabled }
        let product = try await catalogProduct(productId)
        if product.kind == .nonConsumable, let owned = try purchases.owning(productId) {
            throw ClientError.invalidRequest("\(productId) is already owned (transaction \(owned.transactionId ?? "saved here")); nothing to pay: kiosk restore brings its content back")
        }
        guard product.forSale != false else { throw ClientError.offSale(productId) }
        return try await purchases.authorizedAPI().startCheckout(CheckoutRequest(productId: productId, quantity: quantity, offerCode: offerCode))
    }

    /// Waits on the account's change feed until a purchase of the checkout's product that this
    /// device did not have (`known`) arrives, then delivers it as `mode` says; nil when `timeout`
    /// passes first (the agent delivers it when the payment lands).
    func waitForCheckout(_ checkout: Checkout, known: Set<String>, timeout: Duration, mode: DeliveryMode) async throws -> PurchaseResult? {
        let deadline = ContinuousClock.now + timeout
        while true {
            _ = await replay()
            if let arrived = try purchases.all().first(where: {
                $0.productId == checkout.productId && !known.contains($0.transactionId ?? "") && PaymentState.owning.contains($0.state)
            }) {
                var result = PurchaseResult(record: arrived)
                if mode == .now, arrived.kind == .nonConsumable {
                    result.downloads = try await runDownloads(only: [arrived.productId])
                    result.record = try arrived.id.flatMap(purchases.record) ?? arrived
                }
                return try settle(result)
            }
            let left = deadline - .now
            guard left > .zero else { return nil }
            let cursor = try purchases.database.settings.value(Setting.Key.replayCursor)
            // Answered at once by a change after the cursor, else held until one or the wait's end.
            _ = try await purchases.authorizedAPI().transactions(after: cursor, wait: max(1, min(25, Int(left.components.seconds))))
        }
    }

    /// The transaction IDs of `productId` this device has now (what a checkout's wait ignores).
    func knownTransactions(of productId: String) throws -> Set<String> {
        Set(try purchases.all().filter { $0.productId == productId }.compactMap(\.transactionId))
    }

    /// Presents a Google Play purchase to the store and takes in what it granted.
    /// - Parameter expected: the Kiosk product the reader means; a purchase of another is refused
    ///   here before it is sent (the catalog maps Play's IDs: `playProductId`).
    func presentPlayPurchase(_ proof: PlayPurchaseProof, expected: String?, mode: DeliveryMode) async throws -> ChannelPurchaseResult {
        if let expected {
            let named = (try? JSONDecoder().decode(PlayProductName.self, from: Data(proof.purchase.utf8)))?.productId
            let product = try await catalogProduct(expected)
            guard let named, product.playProductId == named else {
                throw ClientError.invalidRequest("the Play purchase is for \(named.map { "Play product \(ProductID.printable($0))" } ?? "no product"), which is not \(expected) (its playProductId is \(product.playProductId ?? "none"))")
            }
        }
        let answer = try await purchases.authorizedAPI().presentPlayPurchase(proof)
        return try await takeIn(answer, mode: mode)
    }

    /// Presents an App Store transaction to the store, for this account, and takes in what it granted.
    func presentAppStoreTransaction(_ proof: AppStoreTransactionProof, mode: DeliveryMode) async throws -> ChannelPurchaseResult {
        let answer = try await purchases.authorizedAPI().presentAppStoreTransaction(proof)
        return try await takeIn(answer, mode: mode)
    }

    private func takeIn(_ answer: ChannelPurchaseAnswer, mode: DeliveryMode) async throws -> ChannelPurchaseResult {
        guard answer.state == "granted", let transaction = answer.transaction else { return ChannelPurchaseResult(answer: answer) }
        _ = try await takeIn([transaction])
        guard let record = try purchases.all().first(where: { $0.transactionId == transaction.transactionId })
            ?? purchases.owning(transaction.productId) else {
            return ChannelPurchaseResult(answer: answer)
        }
        var result = PurchaseResult(record: record, alreadyOwned: answer.owned == true)
        if mode == .now, record.kind == .nonConsumable {
            result.downloads = try await runDownloads(only: [record.productId])
            result.record = try record.id.flatMap(purchases.record) ?? record
        }
        return ChannelPurchaseResult(answer: answer, purchase: try settle(result))
    }
}

/// The one field of a Play purchase the client reads before sending it (the store checks the rest).
private struct PlayProductName: Decodable {
    var productId: String
}
