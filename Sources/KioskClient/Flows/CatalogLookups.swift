import Foundation
import KioskCore
import KioskTransfer
import Logging

// The catalog, as the flows need it: synced, and a product looked up by syncing.
extension Flows {
    /// Syncs the catalog cache; downloads not yet started or stopped half-way switch to the
    /// version the catalog now names, rather than finish one the store has replaced.
    func refreshCatalog() async throws -> SyncReport {
        let report = try await catalog.sync()
        try library.retarget(report.changed)
        // The store's keys are its identity: a purchase saved while it is down names them, so it
        // is sent to this store wherever it moves, and to no other (``Purchases/begin``).
        await purchases.learnStoreKeys()
        return report
    }

    /// Queues `productId` with an App Store signed transaction as its proof (``PurchaseProofKind/appStore``):
    /// the store checks it as it checks a receipt, and the download resumes and retries as any other.
    /// - Returns: false when that version is installed, queued or running already.
    func queueAppStoreDownload(_ productId: String, signedTransaction: String) async throws -> Bool {
        guard let content = try await deliverableProduct(productId)?.content else { throw ClientError.unknownProduct(productId) }
        return try library.enqueue(productId, content: content, receipt: signedTransaction, transactionId: nil, proofKind: .appStore)
    }

    /// A product to buy: from the cached catalog, syncing once when the cache does not have it.
    func catalogProduct(_ id: String) async throws -> Product {
        guard let product = try await deliverableProduct(id) else { throw ClientError.unknownProduct(id) }
        return product
    }

    /// The product from the cache, or from a fresh sync when the cache lacks it (restore or replay
    /// may run before the first sync); nil when the store has none.
    func deliverableProduct(_ id: String) async throws -> Product? {
        if let product = try catalog.cachedProduct(id) { return product }
        _ = try await refreshCatalog()
        return try catalog.cachedProduct(id)
    }
}
