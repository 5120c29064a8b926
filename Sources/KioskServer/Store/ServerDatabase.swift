import Foundation
import GRDB
import KioskCore

/// The server's SQLite database: accounts, transactions and charges. WAL, forward-only migrations.
public struct ServerDatabase: Sendable {
    public let pool: DatabasePool

    public init(url: URL) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A receipt handed out must survive a power cut: sync every commit.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        pool = try DatabasePool(path: url.path, configuration: configuration)
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-accounts-transactions-charges") { db in
            try db.create(table: AccountRecord.databaseTableName) { table in
                table.primaryKey("id", .text)
                table.column("tokenHash", .text).notNull().unique()
                table.column("credits", .integer).notNull().defaults(to: 0)
                table.column("createdAt", .datetime).notNull()
            }
            try db.create(table: TransactionRecord.databaseTableName) { table in
                table.autoIncrementedPrimaryKey("sequence")
                table.column("id", .text).notNull().unique()
                table.column("accountId", .text).notNull().references(AccountRecord.databaseTableName)
                table.column("productId", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("quantity", .integer).notNull()
                table.column("originalTransactionId", .text).notNull()
                table.column("purchaseDate", .datetime)
                table.column("expiresDate", .datetime)
                table.column("status", .text).notNull()
                table.column("paymentMethod", .text).notNull()
                table.column("idempotencyKey", .text).notNull()
                table.column("amountCents", .integer).notNull()
                table.column("currency", .text).notNull()
                table.column("creditsGranted", .integer).notNull().defaults(to: 0)
                table.column("creditsSpent", .integer).notNull().defaults(to: 0)
                table.column("signedTransaction", .text)
                table.column("message", .text)
                table.column("finishedAt", .datetime)
                table.column("createdAt", .datetime).notNull()
                table.uniqueKey(["accountId", "idempotencyKey"])
            }
            try db.create(table: "charge") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("transactionId", .text).notNull().unique()
                table.column("accountId", .text).notNull()
                table.column("amountCents", .integer).notNull()
                table.column("currency", .text).notNull()
                table.column("createdAt", .datetime).notNull()
            }
        }
        migrator.registerMigration("v2-revocations") { db in
            try db.alter(table: TransactionRecord.databaseTableName) { table in
                table.add(column: "revokedAt", .datetime)
                table.add(column: "revocationReason", .text)
            }
        }
        migrator.registerMigration("v3-revisions-ledger-constraints") { db in
            // Every payment commits only at the revision of the account it was decided on.
            try db.alter(table: AccountRecord.databaseTableName) { table in
                table.add(column: "revision", .integer).notNull().defaults(to: 0)
            }
            // Charges and refunds in one ledger: it sums to what was really paid.
            try db.create(table: LedgerEntry.databaseTableName) { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("transactionId", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("accountId", .text).notNull().indexed()
                table.column("amountCents", .integer).notNull()
                table.column("currency", .text).notNull()
                table.column("reason", .text)
                table.column("createdAt", .datetime).notNull()
                table.uniqueKey(["transactionId", "kind"])
            }
            try db.execute(sql: """
                INSERT INTO ledgerEntry (transactionId, kind, accountId, amountCents, currency, createdAt)
                SELECT transactionId, 'charge', accountId, amountCents, currency, createdAt FROM charge ORDER BY id
                """)
            try db.drop(table: "charge")
            // The forbidden states the schema can rule out on its own.
            try db.execute(sql: """
                CREATE UNIQUE INDEX storeTransaction_one_first_purchase ON storeTransaction(accountId, productId)
                    WHERE kind = 'nonConsumable' AND status = 'purchased' AND paymentMethod <> 'owned'
                """)
            try db.execute(sql: """
                CREATE UNIQUE INDEX storeTransaction_one_pending_request ON storeTransaction(accountId, productId)
                    WHERE status = 'deferred'
                """)
            try db.create(index: "storeTransaction_by_product", on: TransactionRecord.databaseTableName, columns: ["accountId", "productId", "status"])
            try db.create(table: DownloadStat.databaseTableName) { table in
                table.column("productId", .text).notNull()
                table.column("day", .text).notNull()
                table.column("requests", .integer).notNull()
                table.column("bytes", .integer).notNull()
                table.primaryKey(["productId", "day"])
            }
        }
        return migrator
    }
}

/// An account: its secret token is kept only as a SHA-256.
struct AccountRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "account"
    var id: String
    var tokenHash: String
    var credits: Int
    var createdAt: Date
    /// Bumped by every commit that changes what the account holds.
    var revision: Int64
}

/// One store transaction: a payment, a free re-download of something owned, or a redemption.
struct TransactionRecord: Codable, FetchableRecord, MutablePersistableRecord, Sendable {
    static let databaseTableName = "storeTransaction"
    var sequence: Int64?
    var id: String
    var accountId: String
    var productId: String
    var kind: ProductKind
    var quantity: Int
    var originalTransactionId: String
    var purchaseDate: Date?
    var expiresDate: Date?
    var status: TransactionStatus
    /// `approve`, `decline`, `cancel`, `defer`, `owned` (nothing charged) or `credits`.
    var paymentMethod: String
    var idempotencyKey: String
    var amountCents: Int
    var currency: String
    var creditsGranted: Int
    var creditsSpent: Int
    var signedTransaction: String?
    var message: String?
    var finishedAt: Date?
    var createdAt: Date
    var revokedAt: Date?
    var revocationReason: String?

    enum Columns {
        static let sequence = Column("sequence")
        static let id = Column("id")
        static let accountId = Column("accountId")
        static let productId = Column("productId")
        static let status = Column("status")
        static let idempotencyKey = Column("idempotencyKey")
        static let kind = Column("kind")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        sequence = inserted.rowID
    }

    var wire: StoreTransaction {
        StoreTransaction(
            transactionId: id, productId: productId, status: status,
            signedTransaction: status == .purchased || status == .revoked ? signedTransaction : nil,
            finished: finishedAt != nil, message: message, revocationDate: revokedAt, revocationReason: revocationReason)
    }
}

/// Money taken from (a charge) or paid back to (a refund, negative) an account: at most one of each
/// per transaction, so nothing is ever charged or refunded twice.
public struct LedgerEntry: Codable, FetchableRecord, PersistableRecord, Sendable {
    public static let databaseTableName = "ledgerEntry"
    public enum Kind: String, Codable, Sendable { case charge, refund }
    public var id: Int64?
    public var transactionId: String
    public var kind: Kind
    public var accountId: String
    public var amountCents: Int
    public var currency: String
    public var reason: String?
    public var createdAt: Date
}

/// Content requests answered per product and day, for the publisher.
public struct DownloadStat: Codable, FetchableRecord, PersistableRecord, Sendable {
    public static let databaseTableName = "downloadStat"
    public var productId: String
    public var day: String
    public var requests: Int
    public var bytes: Int64
}
