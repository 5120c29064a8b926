import Foundation
import KioskCore
import KioskTransfer
import Logging

// Buying: `kiosk buy` and `kiosk redeem`, from the product to the library.
extension Flows {
    /// Buys a product and delivers it as `mode` says. A book already owned on this device is not
    /// sent at all: nothing is charged, and its content is reinstalled if missing. Otherwise the
    /// purchase is committed on this device first, then sent, and what the store granted is
    /// delivered.
    func buy(_ productId: String, quantity: Int, method: String, mode: DeliveryMode, offerCode: String? = nil) async throws -> PurchaseResult {
        let byCredits = method == "credits"
        // Spending credits charges no payment method; any other purchase needs payments enabled.
        if !byCredits { guard try purchases.paymentsEnabled() else { throw ClientError.paymentsDisabled } }
        let product = try await catalogProduct(productId)
        var quantity = quantity
        if byCredits {
            guard product.creditPrice != nil else {
                throw ClientError.invalidRequest("\(productId) cannot be bought with credits; buy it with `kiosk buy \(productId)`")
            }
            if let owned = try await verifiedOwning(productId) {
                return try await alreadyOwned(owned, mode: mode)
            }
            quantity = 1
        } else {
            // Replay (which runs before any command) already asked the store about it: still waiting.
            if method == PaymentMethod.defer.rawValue, let pending = try purchases.pendingRequest(productId) {
                return PurchaseResult(record: pending, alreadyPending: true)
            }
            if product.kind == .nonConsumable, let owned = try await verifiedOwning(productId) {
                return try await alreadyOwned(owned, mode: mode)
            }
        }
        guard product.forSale != false else { throw ClientError.offSale(productId) }

        let record = try purchases.begin(product, quantity: quantity, method: method, offerCode: offerCode)
        let sent = try await purchases.send(record, whileTheReaderWaits: true)
        var result = PurchaseResult(record: sent.record, credits: sent.credits, savedOffline: sent.savedOffline, storeFailed: sent.storeFailed,
                                    alreadyOwned: sent.alreadyOwned, alreadyPending: sent.alreadyPending)
        if sent.record.state == .purchased {
            (result.record, result.downloads) = try await deliver(sent.record, mode, receiptVerified: true)
        }
        return try settle(result)
    }

    /// The purchase that makes this device own `productId`, when its receipt verifies now: a row of
    /// this device's database is no proof by itself (a copied row may carry another account's
    /// receipt), and one that does not verify is refused (the purchase goes ahead, charged once).
    private func verifiedOwning(_ productId: String) async throws -> PaymentRecord? {
        guard let owned = try purchases.owning(productId) else { return nil }
        return try await purchases.refuseUnverifiedReceipt(of: owned) == nil ? owned : nil
    }

    /// Nothing to charge: make sure the content is (or will be) in the library.
    func alreadyOwned(_ owned: PaymentRecord, mode: DeliveryMode) async throws -> PurchaseResult {
        _ = try library.checkLibrary(only: [owned.productId])
        // Its files were removed from this device: asked for again, it comes back.
        if try library.download(owned.productId)?.state == .removed { _ = try library.reinstate(owned.productId) }
        if let receipt = owned.receipt, let content = try await deliverableProduct(owned.productId)?.content {
            try library.enqueue(owned.productId, content: content, receipt: receipt, transactionId: owned.transactionId)
        }
        var result = PurchaseResult(record: owned, alreadyOwned: true)
        if mode == .now {
            result.downloads = try await runDownloads(only: [owned.productId])
        }
        return try settle(result)
    }

    /// Decides what a purchase came to, so no caller has to re-derive it from the states.
    func settle(_ result: PurchaseResult) throws -> PurchaseResult {
        var result = result
        let record = result.record
        let contentState = record.kind == .nonConsumable ? try library.download(record.productId)?.state : nil
        if result.savedOffline || result.storeFailed != nil {
            result.outcome = .pending
        } else if record.state == .failed {
            result.outcome = .failed
        } else if let downloads = result.downloads {
            result.outcome = downloads.outcome
            if result.outcome == .complete, record.kind == .nonConsumable, contentState != .installed { result.outcome = .pending }
        } else {
            result.outcome = .complete
        }
        let owning = [PaymentState.purchased, .delivering, .finished, .restored].contains(record.state)
        result.contentQueued = owning && result.downloads == nil && record.kind == .nonConsumable && record.state == .finished && contentState != .installed
        return result
    }
}
