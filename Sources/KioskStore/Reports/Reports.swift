import Foundation
import SQLKit
import KioskCore

/// What a publisher sees of the store: accounts, sales, pending requests, downloads.
public struct Reports: StoreOwner {
    let base: StoreBase

    /// The database engine the store runs on (`sqlite` or `postgres`), as the console names it.
    public var engineName: String { database.engine.rawValue }

    /// The time of the last transaction or ledger entry: after a restore, the backup's point.
    public func lastActivity() async throws -> Date? {
        struct Row: Decodable { var at: Date? }
        let rows = try await database.read { db in
            try await db.raw(#"""
                SELECT MAX("createdAt") AS "at" FROM "storeTransaction" UNION ALL SELECT MAX("createdAt") AS "at" FROM "ledgerEntry"
                """#).all(decoding: Row.self)
        }
        return rows.compactMap(\.at).max()
    }

    /// A transaction refunded or revoked after a point (what a restore to that point cannot know).
    public struct LaterRevocation: Decodable, Sendable {
        public var id: String
        public var productId: String
        public var accountId: String
        public var revokedAt: Date
        public var revocationReason: String?
    }

    /// Transactions refunded or revoked after `point`, oldest first: read from the database a
    /// restore set aside, they are what the restored one no longer knows was taken back.
    public func revoked(after point: Date) async throws -> [LaterRevocation] {
        try await database.read { db in
            try await db.raw(#"""
                SELECT "id", "productId", "accountId", "revokedAt", "revocationReason" FROM "storeTransaction"
                WHERE "revokedAt" IS NOT NULL AND "revokedAt" > \#(bind: point) ORDER BY "revokedAt", "id"
                """#).all(decoding: LaterRevocation.self)
        }
    }

    /// Accounts, oldest first: created since `filter.since`; with a product or a state, only the
    /// accounts holding a transaction of that product and state. One query.
    public func accounts(_ filter: ListFilter = ListFilter()) async throws -> [AdminAccountRow] {
        try await database.read { db in
            var conditions: [SQLQueryString] = []
            if let since = filter.since { conditions.append(#"a."createdAt" >= \#(bind: since)"#) }
            if filter.productId != nil || filter.state != nil {
                var held: SQLQueryString = #"EXISTS (SELECT 1 FROM "storeTransaction" h WHERE h."accountId" = a."id""#
                if let product = filter.productId { held = held + #" AND h."productId" = \#(bind: product)"# }
                if let state = filter.state { held = held + #" AND h."status" = \#(bind: state)"# }
                conditions.append(held + ")")
            }
            let query: SQLQueryString = """
                SELECT a."id" AS "accountId", a."credits" AS "credits", a."createdAt" AS "createdAt",
                       CAST((SELECT COUNT(*) FROM "storeTransaction" t WHERE t."accountId" = a."id") AS BIGINT) AS "transactions",
                       CAST(COALESCE((SELECT SUM(l."amountCents") FROM "ledgerEntry" l WHERE l."accountId" = a."id"), 0) AS BIGINT) AS "paidCents",
                       (SELECT MAX(t."createdAt") FROM "storeTransaction" t WHERE t."accountId" = a."id") AS "lastTransactionAt"
                FROM "account" a
                """
            return try await db.raw(query + Self.whereClause(conditions) + #" ORDER BY a."createdAt", a."id""#).all(decoding: AdminAccountRow.self)
        }
    }

    /// Every transaction of the store, oldest first, narrowed by `filter` in the same query.
    public func adminTransactions(_ filter: ListFilter) async throws -> [AdminTransactionRow] {
        try await database.read { db in
            try await TransactionRows(db).list { Self.narrow($0, filter) }.map(AdminTransactionRow.init)
        }
    }

    /// The account a transaction belongs to, for finding a customer by a transaction id.
    public func accountOwning(transactionId: String) async throws -> String? {
        try RequestText.check(transactionId, field: "the transaction ID")
        return try await database.read { db in
            try await TransactionRows(db).list { $0.where("id", .equal, transactionId) }.first?.accountId
        }
    }

    /// How many accounts own `productId`: bought it (not revoked), or, for an issue, held a period
    /// of a subscription to its series, or a billing grace window of one, that covers its
    /// publication date.
    public func owners(of productId: String) async throws -> Int {
        let products = (try? await catalog.storeProducts().products) ?? [:]
        let product = products[productId]
        let series = product?.series
        let subscriptions = products.values.filter { $0.kind == .subscription && series != nil && $0.series == series }.map(\.id)
        let issueDates = products.values.filter { $0.kind == .nonConsumable && series != nil && $0.series == series }.compactMap(\.publicationDate)
        let purchased = TransactionStatus.purchased.rawValue
        return try await database.read { db in
            let bought: SQLQueryString = #"""
                SELECT DISTINCT "accountId" FROM "storeTransaction" WHERE "productId" = \#(bind: productId) AND "status" = \#(bind: purchased)
                """#
            var accounts = Set(try await db.raw(bought).all().map { try $0.decode(column: "accountId", as: String.self) })
            if let published = product?.publicationDate, !subscriptions.isEmpty {
                // The one coverage rule, as the content route applies it to a subscriber's receipt:
                // each account's paid periods of the series, then its billing grace windows.
                let periods = try await TransactionRows(db).list { $0.where("productId", .in, subscriptions).where("status", .equal, purchased) }
                let graces = try await GraceWindowRow.list(products: subscriptions, in: db)
                var held: [String: SeriesCoverage] = [:]
                for period in periods {
                    guard let start = period.purchaseDate, let end = period.expiresDate else { continue }
                    held[period.accountId, default: SeriesCoverage(periods: [])].periods.append(SubscriptionCoverage(purchased: start, expires: end))
                }
                for grace in graces {
                    held[grace.accountId, default: SeriesCoverage(periods: [])].graceWindows.append(grace.window)
                }
                for (account, coverage) in held where coverage.covers(published, seriesIssueDates: issueDates) {
                    accounts.insert(account)
                }
            }
            return accounts.count
        }
    }

    /// Removes a withdrawn product on purpose: its owners' devices can no longer download it.
    /// - Throws: ``StoreError/hasOwners(_:owners:)`` while accounts own it and `force` is false.
    /// - Returns: how many accounts owned it.
    public func removeWithdrawn(_ productId: String, force: Bool) async throws -> Int {
        let owners = try await owners(of: productId)
        guard owners == 0 || force else { throw StoreError.hasOwners(productId, owners: owners) }
        try await catalog.removeWithdrawn(productId)
        logger.notice("withdrawn product removed", metadata: ["product": "\(productId)", "owners": "\(owners)"])
        return owners
    }

    /// Accounts holding a subscription period that is live at `now` (not revoked).
    public func activeSubscribers() async throws -> Int {
        let query = OverviewCounts.activeSubscribers(at: clock.now())
        return try await database.read { db in try await db.raw(query).first(decoding: Counted.self)?.count ?? 0 }
    }

    /// Renewals charged since `since` (a subscription period after its first), and subscriptions
    /// that expired since then (churn): the console's overview.
    public func subscriptionFigures(since: Date) async throws -> (renewals: Int, expired: Int) {
        try await database.read { db in
            (try await db.raw(OverviewCounts.renewals(since: since)).first(decoding: Counted.self)?.count ?? 0,
             try await db.raw(OverviewCounts.expired(since: since)).first(decoding: Counted.self)?.count ?? 0)
        }
    }

    /// Introductory offers taken since `since` (a subscription's first period bought with one),
    /// by kind, and how many of those subscriptions went on to a period at the normal price.
    public func offerFigures(since: Date) async throws -> OfferFigures {
        try await database.read { db in
            struct Taken: Decodable { var offerType: String; var count: Int }
            let rows = try await db.raw(OverviewCounts.offersTaken(since: since)).all(decoding: Taken.self)
            return OfferFigures(taken: Dictionary(uniqueKeysWithValues: rows.map { ($0.offerType, $0.count) }),
                                converted: try await db.raw(OverviewCounts.offersConverted(since: since)).first(decoding: Counted.self)?.count ?? 0)
        }
    }

    /// A quarter's sales per country, rate and currency (``AdminTaxRow``), summed from the ledger
    /// (refunds and credits taking back their share of tax), for an EU One-Stop-Shop return.
    /// - Throws: `invalid_request` for a quarter that is not like 2026Q4.
    public func tax(quarter: String) async throws -> [AdminTaxRow] {
        guard let range = TaxQuarter.range(quarter) else {
            throw StoreError.invalidRequest("quarter must be a year and a quarter, like 2026Q4, not \"\(quarter.prefix(16))\"")
        }
        struct Row: Decodable {
            var country: String?; var taxBasisPoints: Int?; var currency: String; var sales: Int; var refunds: Int; var gross: Int; var tax: Int
        }
        let rows = try await database.read { db in
            try await db.raw(#"""
                SELECT "country", "taxBasisPoints", "currency",
                    CAST(SUM(CASE WHEN "kind" = 'charge' THEN 1 ELSE 0 END) AS BIGINT) AS "sales",
                    CAST(SUM(CASE WHEN "kind" <> 'charge' AND "amountCents" <> 0 THEN 1 ELSE 0 END) AS BIGINT) AS "refunds",
                    CAST(SUM("amountCents") AS BIGINT) AS "gross", CAST(SUM("taxCents") AS BIGINT) AS "tax"
                FROM "ledgerEntry" WHERE "createdAt" >= \#(bind: range.start) AND "createdAt" < \#(bind: range.end)
                GROUP BY "country", "taxBasisPoints", "currency"
                ORDER BY "country", "taxBasisPoints", "currency"
                """#).all(decoding: Row.self)
        }
        return rows.filter { $0.sales > 0 || $0.gross != 0 }.map {
            AdminTaxRow(country: $0.country, rateBasisPoints: $0.taxBasisPoints, currency: $0.currency, sales: $0.sales, refunds: $0.refunds,
                        grossCents: $0.gross, taxCents: $0.tax)
        }
    }

    private struct Counted: Decodable {
        var count: Int
    }

    /// `WHERE a AND b …`, or nothing.
    private static func whereClause(_ conditions: [SQLQueryString]) -> SQLQueryString {
        guard let first = conditions.first else { return "" }
        return conditions.dropFirst().reduce(" WHERE " + first) { $0 + " AND " + $1 }
    }

    /// A transaction query narrowed by date, product and state.
    private static func narrow(_ select: SQLSelectBuilder, _ filter: ListFilter) -> SQLSelectBuilder {
        var select = select
        if let since = filter.since { select = select.where("createdAt", .greaterThanOrEqual, since) }
        if let product = filter.productId { select = select.where("productId", .equal, product) }
        if let state = filter.state { select = select.where("status", .equal, state) }
        return select
    }

    /// One account as its operator sees it: balance, holdings, every transaction and the ledger.
    public func adminAccount(_ id: String) async throws -> AdminAccountView {
        try RequestText.check(id, field: "the account ID in the path")
        let summary = try await accounts.summary(of: id)
        let ledger = try await accounts.charges(accountId: id).map {
            AdminAccountView.Charge(transactionId: $0.transactionId, kind: $0.kind.rawValue, amountCents: $0.amountCents, currency: $0.currency, reason: $0.reason)
        }
        let (transactions, account, signIn, devices, audit) = try await database.read { db in
            (try await TransactionRows(db).list { $0.where("accountId", .equal, id) }, try await AccountRows(db).find(id), try await Accounts.signIn(accountId: id, in: db),
             try await Accounts.devices(of: id, in: db), try await Accounts.auditList(id, in: db))
        }
        var view = AdminAccountView(summary: summary, charges: ledger, transactions: transactions.map(AdminTransactionRow.init))
        view.email = signIn?.email
        view.disabled = account?.disabledAt != nil
        view.deleted = account?.deletedAt != nil
        view.devices = devices.map { DeviceInfo(id: $0.id, name: $0.name, createdAt: $0.createdAt, lastSeenAt: $0.lastSeenAt, current: false) }
        view.audit = audit
        return view
    }

    /// Ask to Buy requests waiting for an answer, oldest first (a filter's state is ignored: it is `deferred`).
    public func pendingRequests(_ filter: ListFilter = ListFilter()) async throws -> [AdminTransactionRow] {
        var filter = filter
        filter.state = TransactionStatus.deferred.rawValue
        // Nothing is charged until the answer: shown at what approving would charge now.
        let products = (try? await catalog.storeProducts().products) ?? [:]
        return try await adminTransactions(filter).map { row in
            guard let product = products[row.productId], let cents = Price.cents(product.price.amount) else { return row }
            var priced = row
            priced.amountCents = cents * row.quantity
            priced.currency = product.price.currency
            priced.priceOnApproval = true
            return priced
        }
    }

    /// Sales by day (UTC) and product: charges, refunds and what they came to.
    ///
    /// `filter` keeps the ledger entries written since a moment, of one product, of transactions in
    /// one state. Whole days (no `since`, or a `since` at midnight UTC) without a state are read
    /// from `salesDaySlot`, the rows the store keeps as it writes each ledger entry: the console's
    /// overview reads a row per day and product, not every entry. Anything finer is summed from
    /// the ledger (``salesFromLedger(_:)``); the two agree (SalesByDayTests).
    public func sales(_ filter: ListFilter = ListFilter(), byChannel: Bool = false) async throws -> [AdminSalesRow] {
        let wholeDays = filter.since.map { Calendar.utc.startOfDay(for: $0) == $0 } ?? true
        guard wholeDays, filter.state == nil, !byChannel else { return try await salesFromLedger(filter, byChannel: byChannel) }
        return try await database.read { db in
            // A day's rows are its slots' (``SalesSlot``) summed; CAST, as PostgreSQL's SUM of a
            // BIGINT is a NUMERIC.
            var select = db.select().column("day").column("productId").column("currency")
                .column(SQLRaw(#"CAST(SUM("sales") AS BIGINT) AS "sales""#)).column(SQLRaw(#"CAST(SUM("refunds") AS BIGINT) AS "refunds""#))
                .column(SQLRaw(#"CAST(SUM("netCents") AS BIGINT) AS "netCents""#)).from("salesDaySlot")
            if let since = filter.since { select = select.where("day", .greaterThanOrEqual, Store.day(since)) }
            if let product = filter.productId { select = select.where("productId", .equal, product) }
            select = select.groupBy("day").groupBy("productId").groupBy("currency")
            // Ordered here, as the ledger's sums are: the engines' text collations differ.
            // A day whose rows sum to nothing (a correction took back all it had) is no row.
            return try await select.all(decoding: AdminSalesRow.self)
                .filter { $0.sales != 0 || $0.refunds != 0 || $0.netCents != 0 }
                .sorted { ($0.day, $0.productId, $0.currency) < ($1.day, $1.productId, $1.currency) }
        }
    }

    /// ``sales(_:)`` summed from the ledger entries themselves, for any filter.
    ///
    /// Summed here rather than in SQL: the two engines spell "the UTC day of a timestamp" differently.
    /// With `byChannel`, each row is one channel's (the transaction's payment method's).
    public func salesFromLedger(_ filter: ListFilter = ListFilter(), byChannel: Bool = false) async throws -> [AdminSalesRow] {
        let entries = try await database.read { db in
            var conditions: [SQLQueryString] = []
            if let since = filter.since { conditions.append(#"l."createdAt" >= \#(bind: since)"#) }
            if let product = filter.productId { conditions.append(#"t."productId" = \#(bind: product)"#) }
            if let state = filter.state { conditions.append(#"t."status" = \#(bind: state)"#) }
            let query: SQLQueryString = """
                SELECT l."createdAt" AS "createdAt", t."productId" AS "productId", l."currency" AS "currency", l."kind" AS "kind", l."amountCents" AS "amountCents",
                    t."paymentMethod" AS "paymentMethod"
                FROM "ledgerEntry" l JOIN "storeTransaction" t ON t."id" = l."transactionId"
                """
            return try await db.raw(query + Self.whereClause(conditions) + #" ORDER BY l."id""#).all(decoding: SoldEntry.self)
        }
        var rows: [String: AdminSalesRow] = [:]
        // A refund of what charged nothing is no refund of a sale.
        for entry in entries where LedgerEntry.countsInSales(kind: entry.kind, amountCents: entry.amountCents) {
            let day = Store.day(entry.createdAt)
            let channel = byChannel ? AdminSalesRow.channel(ofPaymentMethod: entry.paymentMethod) : nil
            let key = "\(day)\t\(entry.productId)\t\(entry.currency)\t\(channel ?? "")"
            var row = rows[key] ?? AdminSalesRow(day: day, productId: entry.productId, currency: entry.currency, sales: 0, refunds: 0, netCents: 0, channel: channel)
            if entry.kind == .charge { row.sales += 1 } else { row.refunds += 1 }
            row.netCents += entry.amountCents
            rows[key] = row
        }
        return rows.values.sorted { ($0.day, $0.productId, $0.currency, $0.channel ?? "") < ($1.day, $1.productId, $1.currency, $1.channel ?? "") }
    }

    private struct SoldEntry: Decodable {
        var paymentMethod: String
        var createdAt: Date
        var productId: String
        var currency: String
        var kind: LedgerEntry.Kind
        var amountCents: Int
    }

    /// The events every payment channel sent (Stripe's, Google Play's), newest first, with what
    /// came of each; `unmatchedOnly` keeps those the operator must act on (paid but not granted,
    /// or paid for what the account had).
    /// What waits on the store, for `/metrics`: webhook deliveries pending and given up, channel
    /// events for the operator to act on, messages pending and given up.
    public struct Backlog: Sendable, Equatable {
        public var deliveriesPending = 0
        public var deliveriesFailed = 0
        public var eventsToActOn = 0
        public var mailPending = 0
        public var mailFailed = 0
    }

    public func backlog() async throws -> Backlog {
        try await database.read { db in
            func count(_ sql: SQLQueryString) async throws -> Int {
                try await db.raw(sql).first(decodingColumn: "count", as: Int.self) ?? 0
            }
            var backlog = Backlog()
            backlog.deliveriesPending = try await count(#"SELECT COUNT(*) AS "count" FROM "delivery" WHERE "state" = 'pending'"#)
            backlog.deliveriesFailed = try await count(#"SELECT COUNT(*) AS "count" FROM "delivery" WHERE "state" = 'failed'"#)
            backlog.eventsToActOn = try await count(#"SELECT COUNT(*) AS "count" FROM "channelEvent" WHERE "outcome" IN "# + SQLQueryString(ChannelEventOutcome.toActOnSQL))
            backlog.mailPending = try await count(#"SELECT COUNT(*) AS "count" FROM "mailMessage" WHERE "state" = 'pending'"#)
            backlog.mailFailed = try await count(#"SELECT COUNT(*) AS "count" FROM "mailMessage" WHERE "state" = 'failed'"#)
            return backlog
        }
    }

    public func channelEvents(unmatchedOnly: Bool, limit: Int = 500) async throws -> [AdminChannelEventRow] {
        try await database.read { db in
            var query = db.select().column("*").from("channelEvent")
            // Spelt as the partial index's predicate is, so that both engines use it.
            if unmatchedOnly { query = query.where(SQLRaw(#""outcome" IN "# + ChannelEventOutcome.toActOnSQL)) }
            return try await query.orderBy("receivedAt", .descending).limit(limit).all(decoding: AdminChannelEventRow.self)
        }
    }

    /// Content requests answered, by product and day; `filter` keeps the days from its `since`'s
    /// UTC day on, and one product (a state does not apply).
    public func downloadStats(_ filter: ListFilter = ListFilter()) async throws -> [AdminDownloadRow] {
        try await database.read { db in
            var select = db.select().column("*").from("downloadStat")
            if let since = filter.since { select = select.where("day", .greaterThanOrEqual, ListFilter.day(since)) }
            if let product = filter.productId { select = select.where("productId", .equal, product) }
            return try await select.orderBy("day").orderBy("productId").all(decoding: AdminDownloadRow.self)
        }
    }

    /// Counts one answered content request (200 or 206) and the bytes it was to send.
    public func recordDownload(productId: String, bytes: Int64) async {
        let day = Store.day(clock.wallNow())
        do {
            try await database.write { db in
                try await db.raw(#"""
                    INSERT INTO "downloadStat" ("productId", "day", "requests", "bytes") VALUES (\#(bind: productId), \#(bind: day), 1, \#(bind: bytes))
                    ON CONFLICT ("productId", "day") DO UPDATE SET "requests" = "downloadStat"."requests" + 1, "bytes" = "downloadStat"."bytes" + excluded."bytes"
                    """#).run()
            }
        } catch {
            logger.warning("could not count a download", metadata: ["product": "\(productId)", "error": "\(error)"])
        }
    }
}

extension AdminTransactionRow {
    /// The operator's view of a stored transaction.
    init(_ record: TransactionRecord) {
        self.init(
            transactionId: record.id, accountId: record.accountId, productId: record.productId, kind: record.kind,
            quantity: record.quantity, status: record.status, paymentMethod: record.paymentMethod, amountCents: record.amountCents,
            currency: record.currency, createdAt: record.createdAt, finished: record.finishedAt != nil,
            revokedAt: record.revokedAt, revocationReason: record.revocationReason,
            creditsSpent: record.creditsSpent > 0 ? record.creditsSpent : nil)
    }
}

/// Introductory offers in a window (``Reports/offerFigures(since:)``).
public struct OfferFigures: Sendable, Equatable {
    /// First periods bought with an offer, by its kind (`freeTrial`, `payAsYouGo`, `payUpFront`).
    public var taken: [String: Int]
    /// Of those subscriptions, how many went on to a period at the normal price.
    public var converted: Int

    public init(taken: [String: Int], converted: Int) {
        self.taken = taken
        self.converted = converted
    }
}

/// The console overview's counts over subscriptions' periods, one query each. Each names the kind
/// as a literal, so both engines read the periods through the partial index on subscriptions
/// (`storeTransaction_subscriptions`) and none scans every transaction: a store sells far more
/// books and credits than periods (`ReportsTests` reads their plans on SQLite).
enum OverviewCounts {
    static func activeSubscribers(at now: Date) -> SQLQueryString {
        #"""
        SELECT CAST(COUNT(DISTINCT "accountId") AS BIGINT) AS "count" FROM "storeTransaction"
        WHERE "kind" = 'subscription' AND "expiresDate" > \#(bind: now) AND "status" = \#(bind: TransactionStatus.purchased.rawValue)
        """#
    }

    static func renewals(since: Date) -> SQLQueryString {
        #"""
        SELECT CAST(COUNT(*) AS BIGINT) AS "count" FROM "storeTransaction"
        WHERE "kind" = 'subscription' AND "id" <> "originalTransactionId" AND "createdAt" >= \#(bind: since)
        """#
    }

    static func expired(since: Date) -> SQLQueryString {
        #"""
        SELECT CAST(COUNT(*) AS BIGINT) AS "count" FROM "subscription" WHERE "state" = 'expired' AND "updatedAt" >= \#(bind: since)
        """#
    }

    static func offersTaken(since: Date) -> SQLQueryString {
        #"""
        SELECT "offerType", CAST(COUNT(*) AS BIGINT) AS "count" FROM "storeTransaction"
        WHERE "kind" = 'subscription' AND "offerType" IS NOT NULL AND "id" = "originalTransactionId" AND "createdAt" >= \#(bind: since)
        GROUP BY "offerType" ORDER BY "offerType"
        """#
    }

    /// Both sides are subscriptions' periods (a period's original is its subscription's first).
    /// Without the kind on the later periods (`t`) this scanned every transaction: 544 ms of the
    /// overview's 600 over 1,000,000 purchases of credits (`make bench` section 9, 2026-11-30
    /// 22:40; 12.6 ms on 2026-11-28, before offers were counted); 1 ms with it.
    static func offersConverted(since: Date) -> SQLQueryString {
        #"""
        SELECT CAST(COUNT(DISTINCT t."originalTransactionId") AS BIGINT) AS "count" FROM "storeTransaction" t
        JOIN "storeTransaction" f ON f."id" = t."originalTransactionId"
        WHERE t."kind" = 'subscription' AND f."kind" = 'subscription'
            AND f."offerType" IS NOT NULL AND f."createdAt" >= \#(bind: since) AND t."offerType" IS NULL
            AND t."status" = 'purchased' AND t."amountCents" > 0
        """#
    }

    /// Every count, by name, for tests that read their plans.
    static func all(since: Date, now: Date) -> [(name: String, query: SQLQueryString)] {
        [("activeSubscribers", activeSubscribers(at: now)), ("renewals", renewals(since: since)), ("expired", expired(since: since)),
         ("offersTaken", offersTaken(since: since)), ("offersConverted", offersConverted(since: since))]
    }
}
