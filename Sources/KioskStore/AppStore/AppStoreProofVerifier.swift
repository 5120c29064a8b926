import Foundation
import KioskCore

/// `Authorization: AppStore <signed transaction>`: a StoreKit 2 transaction checked by
/// ``AppStoreSignedDataVerifier`` and mapped onto Kiosk's terms (its product through the catalog's
/// `appStoreProductId`), so that the content route and `/verifyReceipt` treat it as any proof.
struct AppStoreProofVerifier: PurchaseProofVerifier, Sendable {
    let signedData: AppStoreSignedDataVerifier
    let catalog: any StoreCatalog

    var kind: PurchaseProofKind { .appStore }

    /// - Parameter accountId: unused: an App Store purchase belongs to an Apple account, not to a
    ///   Kiosk one, and the transaction itself is the proof.
    func verify(_ proof: String, presentedBy accountId: String?) async throws -> VerifiedPurchase {
        let transaction: AppStoreTransaction
        do {
            transaction = try await signedData.verifyTransaction(proof)
        } catch {
            throw ReceiptRefusal.appStore(error)
        }
        return try await purchase(of: transaction)
    }

    /// The purchase a verified transaction proves, in Kiosk's terms.
    func purchase(of transaction: AppStoreTransaction) async throws -> VerifiedPurchase {
        let published = try await catalog.storeProducts()
        let product = published.productsByAppStoreID[transaction.productId].flatMap { published.products[$0] }
            ?? published.products[transaction.productId]
        let signed = Date(timeIntervalSince1970: Double(transaction.signedDate) / 1000)
        let claims = ReceiptClaims(
            transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
            // A product the catalog does not map keeps the App Store's ID, which owns nothing here.
            productId: product?.id ?? transaction.productId, kind: product?.kind ?? transaction.kind,
            quantity: transaction.quantity ?? 1, accountId: Self.accountId(originalTransactionId: transaction.originalTransactionId),
            purchaseDate: transaction.purchased ?? signed, expiresDate: transaction.expires,
            environment: signedData.configuration.environment.storeEnvironment, issuer: "appstore:\(transaction.bundleId)",
            offerType: transaction.kioskOfferType, offerPeriod: transaction.offerPeriod.flatMap { $0.utf8.count <= 16 && $0.hasPrefix("P") ? $0 : nil })
        return VerifiedPurchase(
            kind: .appStore, claims: claims,
            revoked: transaction.revocationDate.map { Date(timeIntervalSince1970: Double($0) / 1000) })
    }

    /// The account an App Store purchase is known under: its original transaction (the same across
    /// a subscription's renewals and a restore on another device).
    static func accountId(originalTransactionId: String) -> String {
        "appstore:\(originalTransactionId)"
    }
}
