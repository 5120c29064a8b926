import Foundation
import KioskCore
import SQLKit

/// An App Store transaction the store has seen: presented for content, or named by a notification.
/// Its row is what REFUND and REVOKE withdraw and what DID_RENEW extends.
struct AppStoreTransactionRecord: Codable, Sendable {
    var transactionId: String
    var originalTransactionId: String
    /// Kiosk's product (the App Store's ID when the catalog maps none).
    var productId: String
    var kind: ProductKind
    var purchaseDate: Date?
    var expiresDate: Date?
    var environment: String
    var revokedAt: Date?
    var revocationReason: String?
    var seenAt: Date
    /// The offer it was bought with, in Kiosk's names (``AppStoreTransaction/kioskOfferType``), and its period.
    var offerType: String? = nil
    var offerPeriod: String? = nil
}

/// An App Store Server Notification, recorded once by its UUID.
struct AppStoreNotificationRecord: Codable, Sendable {
    var notificationUUID: String
    var notificationType: String
    var subtype: String?
    var transactionId: String?
    var originalTransactionId: String?
    var productId: String?
    var environment: String
    var signedDate: Date
    var receivedAt: Date
    var outcome: String

    var row: AdminAppStoreNotificationRow {
        AdminAppStoreNotificationRow(
            notificationUUID: notificationUUID, notificationType: notificationType, subtype: subtype, transactionId: transactionId,
            originalTransactionId: originalTransactionId, productId: productId, environment: environment, signedDate: signedDate,
            receivedAt: receivedAt, outcome: outcome)
    }
}

/// What a notification did to the store (the answer to Apple, and the admin's record).
public struct AppStoreNotificationOutcome: Codable, Sendable, Equatable {
    public var notificationUUID: String
    public var notificationType: String
    /// False when this UUID was recorded before: Apple resent it, nothing was done again.
    public var recorded: Bool
    public var outcome: String
}

/// The App Store bridge: App Store transactions presented for content and the App Store's server
/// notifications, recorded and applied in Kiosk's terms.
public struct AppStoreBridge: StoreOwner {
    let base: StoreBase

    /// Whether a verified App Store transaction entitles `product`: the transaction stands (not
    /// withdrawn by a notification, not revoked in itself), and it is that product, or a
    /// subscription one of whose periods (its own, or a renewal a notification recorded) covers
    /// the issue's publication. The transaction is recorded the first time it is seen.
    func appStoreEntitlement(_ verified: VerifiedPurchase, for product: Product) async throws -> Receipts.Entitlement {
        let claims = verified.claims
        if let revoked = verified.revoked {
            return .withdrawn("App Store transaction \(claims.transactionId) was revoked on \(Store.day(revoked)); it no longer entitles any content")
        }
        let seen = AppStoreTransactionRecord(
            transactionId: claims.transactionId, originalTransactionId: claims.originalTransactionId, productId: claims.productId,
            kind: claims.kind, purchaseDate: claims.purchased, expiresDate: claims.expires, environment: claims.environment.rawValue,
            revokedAt: nil, revocationReason: nil, seenAt: clock.wallNow(), offerType: claims.offerType, offerPeriod: claims.offerPeriod)
        var periods = try await database.read { try await AppStoreBridge.transactions(original: claims.originalTransactionId, in: $0) }
        if !periods.contains(where: { $0.transactionId == claims.transactionId }) {
            try await database.write { try await Self.recordTransaction(seen, in: $0) }
            periods.append(seen)
        }
        if let own = periods.first(where: { $0.transactionId == claims.transactionId }), let revokedAt = own.revokedAt {
            return .withdrawn("App Store transaction \(claims.transactionId) was withdrawn on \(Store.day(revokedAt)) (\(own.revocationReason ?? "revoked")); it no longer entitles any content")
        }
        if claims.productId == product.id, claims.kind != .subscription {
            return .granted
        }
        let products = try await catalog.storeProducts().products
        guard claims.kind == .subscription, let series = product.series, let published = product.publicationDate,
              products[claims.productId]?.series == series
        else {
            return .notOwned
        }
        let issueDates = products.values.filter { $0.series == series && $0.kind == .nonConsumable }.compactMap(\.publicationDate)
        for period in periods where period.revokedAt == nil {
            guard let bought = period.purchaseDate, let expires = period.expiresDate else { continue }
            if SubscriptionCoverage(purchased: bought, expires: expires).covers(published, seriesIssueDates: issueDates) {
                return .granted
            }
        }
        return .notOwned
    }

    /// `POST /v1/appstore/notifications`: verifies an App Store Server Notification V2 and applies
    /// it once (by `notificationUUID`): REFUND and REVOKE withdraw the transaction's entitlement
    /// (and revoke a Kiosk purchase granted for it), REFUND_REVERSED restores it, DID_RENEW adds the renewed period to a subscription the store has seen; other types are
    /// recorded only.
    /// - Throws: ``ReceiptRefusal/appStore(_:)`` for a notification (or its transaction) that is refused;
    ///   ``StoreError`` when the store takes no App Store proofs.
    public func receiveAppStoreNotification(signedPayload: String) async throws -> AppStoreNotificationOutcome {
        guard let appStore else { throw StoreError.appStoreNotConfigured }
        let notification: AppStoreNotification
        do {
            notification = try await appStore.signedData.verifyNotification(signedPayload)
        } catch {
            throw ReceiptRefusal.appStore(error)
        }
        var verified: VerifiedPurchase?
        if let signed = notification.data?.signedTransactionInfo {
            verified = try await appStore.verify(signed, presentedBy: nil)
        }
        let purchase = verified
        let received = clock.wallNow()
        let type = notification.notificationType
        let environment = notification.data?.environment ?? ""
        let outcome = try await database.write { db in
            let record = AppStoreNotificationRecord(
                notificationUUID: notification.notificationUUID, notificationType: type, subtype: notification.subtype,
                transactionId: purchase?.claims.transactionId, originalTransactionId: purchase?.claims.originalTransactionId,
                productId: purchase?.claims.productId, environment: environment,
                signedDate: Date(timeIntervalSince1970: Double(notification.signedDate) / 1000), receivedAt: received, outcome: "")
            if let earlier = try await Self.notification(notification.notificationUUID, in: db) {
                return AppStoreNotificationOutcome(notificationUUID: earlier.notificationUUID, notificationType: earlier.notificationType, recorded: false, outcome: earlier.outcome)
            }
            let outcome = try await Self.apply(type, purchase: purchase, at: received, in: db)
            var recorded = record
            recorded.outcome = outcome
            // Two instances receiving Apple's retry at once: the second insert does nothing, and
            // its transaction's effects (the same rows, written the same way) change nothing either.
            try await Self.recordNotification(recorded, in: db)
            return AppStoreNotificationOutcome(notificationUUID: record.notificationUUID, notificationType: type, recorded: true, outcome: outcome)
        }
        // A Kiosk purchase granted for the transaction (an account-bound one) follows it. Taken on
        // every delivery, since each step is idempotent: a process stopped after the record
        // committed finishes the step when Apple sends the notification again.
        if let transactionId = purchase?.claims.transactionId {
            switch type {
            case "REFUND", "REVOKE":
                try await withdrawBoundGrant(transactionId, reason: type == "REFUND" ? "refunded by the App Store" : "revoked by the App Store (Family Sharing)",
                                             notificationUUID: notification.notificationUUID, type: type)
            case "REFUND_REVERSED":
                _ = try await reinstateBoundGrant(transactionId, notificationUUID: notification.notificationUUID)
            default:
                break
            }
        }
        return outcome
    }

    /// What a notification of `type` does, inside the transaction that records it.
    private static func apply(_ type: String, purchase: VerifiedPurchase?, at now: Date, in db: any SQLDatabase) async throws -> String {
        guard let claims = purchase?.claims else { return "recorded; it names no transaction" }
        switch type {
        case "REFUND", "REVOKE":
            let reason = type == "REFUND" ? "refunded by the App Store" : "revoked by the App Store (Family Sharing)"
            let existing = try await AppStoreBridge.transactions(original: claims.originalTransactionId, in: db).first { $0.transactionId == claims.transactionId }
            if existing == nil {
                try await Self.recordTransaction(AppStoreTransactionRecord(
                    transactionId: claims.transactionId, originalTransactionId: claims.originalTransactionId, productId: claims.productId,
                    kind: claims.kind, purchaseDate: claims.purchased, expiresDate: claims.expires, environment: claims.environment.rawValue,
                    revokedAt: nil, revocationReason: nil, seenAt: now, offerType: claims.offerType, offerPeriod: claims.offerPeriod), in: db)
            }
            try await db.raw(#"""
                UPDATE "appStoreTransaction" SET "revokedAt" = \#(bind: purchase?.revoked ?? now), "revocationReason" = \#(bind: reason)
                WHERE "transactionId" = \#(bind: claims.transactionId) AND "revokedAt" IS NULL
                """#).run()
            return "withdrew transaction \(claims.transactionId) (\(claims.productId)): \(reason)"
        case "REFUND_REVERSED":
            try await db.raw(#"""
                UPDATE "appStoreTransaction" SET "revokedAt" = NULL, "revocationReason" = NULL
                WHERE "transactionId" = \#(bind: claims.transactionId) AND "revokedAt" IS NOT NULL
                """#).run()
            return "restored transaction \(claims.transactionId) (\(claims.productId)): its refund was reversed"
        case "DID_RENEW":
            let periods = try await AppStoreBridge.transactions(original: claims.originalTransactionId, in: db)
            guard !periods.isEmpty else {
                return "ignored: subscription \(claims.originalTransactionId) was never presented to this store"
            }
            if !periods.contains(where: { $0.transactionId == claims.transactionId }) {
                try await Self.recordTransaction(AppStoreTransactionRecord(
                    transactionId: claims.transactionId, originalTransactionId: claims.originalTransactionId, productId: claims.productId,
                    kind: claims.kind, purchaseDate: claims.purchased, expiresDate: claims.expires, environment: claims.environment.rawValue,
                    revokedAt: nil, revocationReason: nil, seenAt: now, offerType: claims.offerType, offerPeriod: claims.offerPeriod), in: db)
            }
            return "extended subscription \(claims.originalTransactionId) (\(claims.productId)) until \(claims.expires.map { $0.formatted(.iso8601) } ?? "no expiry")"
        default:
            return "recorded"
        }
    }

    /// The App Store notifications received, newest first (`kiosk admin appstore`).
    public func appStoreNotifications(limit: Int = 500) async throws -> [AdminAppStoreNotificationRow] {
        try await database.read { db in
            try await db.select().column("*").from("appStoreNotification").orderBy("receivedAt", .descending).limit(limit)
                .all(decoding: AppStoreNotificationRecord.self).map(\.row)
        }
    }
}

extension AppStoreBridge {
    /// The App Store transactions recorded of one subscription (or one purchase).
    static func transactions(original: String, in db: any SQLDatabase) async throws -> [AppStoreTransactionRecord] {
        try await db.select().column("*").from("appStoreTransaction").where("originalTransactionId", .equal, original)
            .all(decoding: AppStoreTransactionRecord.self)
    }

    /// Records a transaction unless it is recorded already (by another request or instance).
    fileprivate static func recordTransaction(_ record: AppStoreTransactionRecord, in db: any SQLDatabase) async throws {
        try await db.raw(#"""
            INSERT INTO "appStoreTransaction" ("transactionId", "originalTransactionId", "productId", "kind", "purchaseDate",
                "expiresDate", "environment", "revokedAt", "revocationReason", "seenAt", "offerType", "offerPeriod")
            VALUES (\#(bind: record.transactionId), \#(bind: record.originalTransactionId), \#(bind: record.productId),
                \#(bind: record.kind.rawValue), \#(bind: record.purchaseDate), \#(bind: record.expiresDate), \#(bind: record.environment),
                \#(bind: record.revokedAt), \#(bind: record.revocationReason), \#(bind: record.seenAt), \#(bind: record.offerType), \#(bind: record.offerPeriod))
            ON CONFLICT ("transactionId") DO NOTHING
            """#).run()
    }

    fileprivate static func notification(_ uuid: String, in db: any SQLDatabase) async throws -> AppStoreNotificationRecord? {
        try await db.select().column("*").from("appStoreNotification").where("notificationUUID", .equal, uuid)
            .first(decoding: AppStoreNotificationRecord.self)
    }

    fileprivate static func recordNotification(_ record: AppStoreNotificationRecord, in db: any SQLDatabase) async throws {
        try await db.raw(#"""
            INSERT INTO "appStoreNotification" ("notificationUUID", "notificationType", "subtype", "transactionId",
                "originalTransactionId", "productId", "environment", "signedDate", "receivedAt", "outcome")
            VALUES (\#(bind: record.notificationUUID), \#(bind: record.notificationType), \#(bind: record.subtype),
                \#(bind: record.transactionId), \#(bind: record.originalTransactionId), \#(bind: record.productId),
                \#(bind: record.environment), \#(bind: record.signedDate), \#(bind: record.receivedAt), \#(bind: record.outcome))
            ON CONFLICT ("notificationUUID") DO NOTHING
            """#).run()
    }
}
