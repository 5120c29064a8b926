import Foundation
import GRDB
import KioskCore

/// What a publisher sees of the store: accounts, sales, pending requests, downloads.
extension Store {
    func accounts() async throws -> [AdminAccountRow] {
        try await database.pool.read { db in
            try AdminAccountRow.fetchAll(db, sql: """
                SELECT a.id AS accountId, a.credits AS credits, a.createdAt AS createdAt,
                       (SELECT COUNT(*) FROM storeTransaction t WHERE t.accountId = a.id) AS transactions,
                       COALESCE((SELECT SUM(l.amountCents) FROM ledgerEntry l WHERE l.accountId = a.id), 0) AS paidCents
                FROM account a ORDER BY a.createdAt, a.id
                """)
        }
    }

    /// One account as its operator sees it: balance, holdings, every transaction and the ledger.
    func adminAccount(_ id: String) async throws -> AdminAccountView {
        let summary = try await summary(of: id)
        let ledger = try await charges(accountId: id).map {
            AdminAccountView.Charge(transactionId: $0.transactionId, kind: $0.kind.rawValue, amountCents: $0.amountCents, currency: $0.currency, reason: $0.reason)
        }
        let transactions = try await database.pool.read { db in
            try TransactionRecord.filter(TransactionRecord.Columns.accountId == id).order(TransactionRecord.Columns.sequence).fetchAll(db)
        }
        return AdminAccountView(summary: summary, charges: ledger, transactions: transactions.map(AdminTransactionRow.init))
    }

    /// Ask to Buy requests waiting for an answer, oldest first.
    func pendingRequests() async throws -> [AdminTransactionRow] {
        try await database.pool.read { db in
            try TransactionRecord.filter(TransactionRecord.Columns.status == TransactionStatus.deferred.rawValue)
                .order(TransactionRecord.Columns.sequence).fetchAll(db).map(AdminTransactionRow.init)
        }
    }

    /// Sales by day (UTC) and product: charges, refunds and what they came to.
    func sales() async throws -> [AdminSalesRow] {
        try await database.pool.read { db in
            try AdminSalesRow.fetchAll(db, sql: """
                SELECT substr(l.createdAt, 1, 10) AS day, t.productId AS productId, l.currency AS currency,
                       SUM(CASE WHEN l.kind = 'charge' THEN 1 ELSE 0 END) AS sales,
                       SUM(CASE WHEN l.kind = 'refund' THEN 1 ELSE 0 END) AS refunds,
                       SUM(l.amountCents) AS netCents
                FROM ledgerEntry l JOIN storeTransaction t ON t.id = l.transactionId
                GROUP BY day, t.productId, l.currency ORDER BY day, t.productId
                """)
        }
    }

    /// Content requests answered, by product and day.
    func downloadStats() async throws -> [DownloadStat] {
        try await database.pool.read { try DownloadStat.order(Column("day"), Column("productId")).fetchAll($0) }
    }

    /// Counts one answered content request (200 or 206) and the bytes it was to send.
    func recordDownload(productId: String, bytes: Int64, at date: Date = Date()) async {
        let day = Self.day(date)
        do {
            try await database.pool.write { db in
                try db.execute(sql: """
                    INSERT INTO downloadStat (productId, day, requests, bytes) VALUES (?, ?, 1, ?)
                    ON CONFLICT(productId, day) DO UPDATE SET requests = requests + 1, bytes = bytes + excluded.bytes
                    """, arguments: [productId, day, bytes])
            }
        } catch {
            logger.warning("could not count a download", metadata: ["product": "\(productId)", "error": "\(error)"])
        }
    }
}

/// `GET /v1/admin/accounts`: one row per account.
public struct AdminAccountRow: Codable, FetchableRecord, Sendable {
    public var accountId: String
    public var credits: Int
    public var createdAt: Date
    public var transactions: Int
    /// Charges less refunds, in cents.
    public var paidCents: Int
}

/// A transaction as the operator sees it.
public struct AdminTransactionRow: Codable, Sendable {
    public var transactionId: String
    public var accountId: String
    public var productId: String
    public var kind: ProductKind
    public var quantity: Int
    public var status: TransactionStatus
    public var paymentMethod: String
    public var amountCents: Int
    public var currency: String
    public var createdAt: Date
    public var finished: Bool
    public var revokedAt: Date?
    public var revocationReason: String?

    init(_ record: TransactionRecord) {
        transactionId = record.id
        accountId = record.accountId
        productId = record.productId
        kind = record.kind
        quantity = record.quantity
        status = record.status
        paymentMethod = record.paymentMethod
        amountCents = record.amountCents
        currency = record.currency
        createdAt = record.createdAt
        finished = record.finishedAt != nil
        revokedAt = record.revokedAt
        revocationReason = record.revocationReason
    }
}

/// `GET /v1/admin/sales`: one row per day, product and currency.
public struct AdminSalesRow: Codable, FetchableRecord, Sendable {
    public var day: String
    public var productId: String
    public var currency: String
    public var sales: Int
    public var refunds: Int
    public var netCents: Int
}
