import Foundation
import GRDB
import KioskCore

/// Where a purchase stands on this device.
///
/// `purchasing → purchased | deferred | failed | cancelled`, `deferred → purchased | failed`,
/// `purchased → delivering → finished`, `restored → delivering → finished`.
public enum PaymentState: String, Codable, Sendable, CaseIterable {
    /// Saved, not yet answered by the server: sent again, with the same key, until it is.
    case purchasing
    /// The receipt is stored; content not yet delivered.
    case purchased
    /// Ask to Buy: waiting for someone to approve it.
    case deferred
    /// Declined or refused; `lastError` says why. Nothing was charged.
    case failed
    /// The user backed out; nothing was charged.
    case cancelled
    /// Waiting for its content to be installed.
    case delivering
    /// Delivered and reported to the server.
    case finished
    /// Brought back by `kiosk restore`; to be delivered.
    case restored
}

/// One purchase, redemption or restored transaction on this device.
public struct PaymentRecord: Codable, FetchableRecord, MutablePersistableRecord, Sendable, Equatable {
    public static let databaseTableName = "payment"
    public var id: Int64?
    /// Sent with every attempt, so the server never charges twice; nil for restored transactions.
    public var idempotencyKey: String?
    public var productId: String
    public var kind: ProductKind
    public var quantity: Int
    /// `approve`, `decline`, `cancel`, `defer`, `credits` (a redemption) or `restore`.
    public var paymentMethod: String
    public var state: PaymentState
    public var transactionId: String?
    public var originalTransactionId: String?
    /// The signed transaction (JWS), stored before anything else happens.
    public var receipt: String?
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date

    public enum Columns {
        static let id = Column("id")
        static let state = Column("state")
        static let transactionId = Column("transactionId")
        static let productId = Column("productId")
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
