import Foundation
import KioskCore
import KioskTransfer
import Logging

// Restore: bringing back everything the account owns.
extension Flows {
    func restore(mode: DeliveryMode) async throws -> RestoreResult {
        let all = try await purchases.storeTransactions(creatingAccount: true) ?? []
        _ = try await applyRevocations(all)
        let taken = try await takeIn(all)
        var result = RestoreResult(restored: taken.delivered, refused: taken.refused, withdrawn: taken.withdrawn)
        try await requeueOwnedContent()
        _ = try library.checkLibrary()
        if mode == .now {
            let report = try await runDownloads()
            result.downloads = report
            result.restored = try result.restored.map { try $0.id.flatMap(purchases.record) ?? $0 }
        }
        result.outcome = !result.refused.isEmpty ? .failed : (result.downloads?.outcome ?? .complete)
        return result
    }

    /// Restore also brings back what this device already knows it owns but does not have: a
    /// book or issue whose download the reader cancelled, or which failed for good, bought or
    /// covered by a subscription.
    func requeueOwnedContent() async throws {
        _ = try await subscriptions.queueCoveredIssues(requeueStopped: true)
        let products = Set(try purchases.all().filter { $0.kind == .nonConsumable && PaymentState.owning.contains($0.state) }.map(\.productId))
        for id in products.sorted() {
            let download = try library.download(id)
            guard download == nil || download?.state == .cancelled || download?.state == .failed,
                  let owning = try purchases.owning(id), let receipt = owning.receipt,
                  let content = try await deliverableProduct(id)?.content,
                  // A row of this device's database is no proof by itself (a copied row may carry
                  // another account's receipt): one that does not verify now is refused, not queued.
                  try await purchases.refuseUnverifiedReceipt(of: owning) == nil else { continue }
            try library.enqueue(id, content: content, receipt: receipt, transactionId: owning.transactionId)
        }
    }
}
