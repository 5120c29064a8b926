import Foundation
internal import GRDB
import KioskCore

/// Where a purchase stands on this device.
///
/// `purchasing → purchased | deferred | failed | cancelled`, `deferred → purchased | failed | cancelled`,
/// `purchased | restored → delivering → finished` (content-less purchases finish directly), and
/// `purchased | restored | delivering | finished → revoked` when the store refunds or revokes it.
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
    /// Refunded or revoked by the store: it entitles nothing any more and its content was removed.
    case revoked

    /// States whose receipt entitles the content.
    static let owning: [PaymentState] = [.purchased, .restored, .delivering, .finished]
}

/// One purchase, redemption or restored transaction on this device.
public struct PaymentRecord: Codable, Sendable, Equatable, StoredRow {
    static let databaseTableName = "payment"
    public var id: Int64?
    /// Sent with every attempt, so the server never charges twice; nil for restored transactions.
    public var idempotencyKey: String?
    public var productId: String
    public var kind: ProductKind
    public var quantity: Int
    /// `approve`, `decline`, `cancel`, `defer`, `credits` (a redemption), `restore`, or
    /// ``notCharged`` (a re-buy of what the account owned: the store charged nothing).
    public var paymentMethod: String
    /// The payment method of a purchase the store answered as already owned.
    public static let notCharged = "owned"
    public var state: PaymentState
    public var transactionId: String?
    public var originalTransactionId: String?
    /// The signed transaction (JWS), stored before anything else happens.
    public var receipt: String?
    /// Why the last attempt to move it on failed, or why it was refused.
    public var lastError: String?
    public var createdAt: Date
    public var updatedAt: Date
    /// Failed attempts to move it on (send, deliver, finish); reset by progress.
    public var attempts: Int = 0
    /// Replay leaves it alone until then.
    public var nextAttemptAt: Date?
    public var revokedAt: Date?
    public var revocationReason: String?
    /// The store this purchase was made for (a purchase made here; nil for restored rows and rows
    /// older than this column): it is sent to no other.
    public var storeURL: String?
    /// The `kid`s of that store's keys as this home knew them at the purchase, comma-separated: the
    /// store's identity, which follows it to a new address.
    public var storeKeys: String?
    /// When the purchase was first handed to the network; nil means the store never saw it.
    public var sentAt: Date?
    /// The account the purchase was made for: it is sent under no other, since the store keeps
    /// idempotency keys per account and another account would be charged again. Nil for one saved
    /// before the home had an account (it is bound to the account it is first sent under) and for
    /// rows older than this column that were no longer waiting to be sent.
    public var accountId: String?
    /// An offer code sent with the purchase (a percentage or an amount off, or a subscription's
    /// introductory offer): sent again with every attempt, spent once by the store.
    public var offerCode: String?

    enum Columns {
        static let id = Column("id")
        static let state = Column("state")
        static let transactionId = Column("transactionId")
        static let productId = Column("productId")
        static let kind = Column("kind")
        static let lastError = Column("lastError")
        static let attempts = Column("attempts")
        static let nextAttemptAt = Column("nextAttemptAt")
        static let updatedAt = Column("updatedAt")
    }

    mutating func didInsert(rowID: Int64) {
        id = rowID
    }

    var subject: String { "transaction \(transactionId ?? "#\(id ?? 0)") (\(productId))" }

    /// Whether this purchase may be sent under `account` (the one the home acts for, nil for
    /// none yet): it was made for it, or it names no account and was never sent. One sent under an
    /// account this home no longer knows may have been charged there: it goes under no other.
    func belongs(to account: String?) -> Bool {
        guard let accountId else { return sentAt == nil }
        return accountId == account
    }
}
