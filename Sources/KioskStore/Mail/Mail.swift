import Foundation
import KioskCore
import SQLKit

/// What a message of the store's says: its template's name, which the sender renders with its values.
public enum MailTemplate: String, Codable, Sendable, CaseIterable {
    /// A link and a code that set a new password (made as the message is sent).
    case passwordReset = "password-reset"
    /// A link that confirms a new sign-in's address (made as the message is sent).
    case confirmAddress = "confirm-address"
    /// A purchase, a subscription started or renewed.
    case receipt
    /// A renewal's payment failed; the subscription runs on in its grace period, if any.
    case renewalFailed = "renewal-failed"
    /// The grace period ended without a payment: the subscription lapsed.
    case graceEnded = "grace-ended"
    /// A new issue of a series the reader subscribes to (only when they asked for it).
    case newIssue = "new-issue"
}

/// The store's mail: an outbox of messages, sent by the mail worker through SMTP with retry, as the
/// webhooks are; never inside a purchase's transaction. The one writer of `mailMessage`,
/// `mailCursor` and `mailedIssue`.
///
/// Messages come from three places: an account's own request (a password reset, a new sign-in's
/// confirmation), written in that request's write; the notification log every purchase and renewal
/// already writes (receipts, reminders), read here after the fact, so a purchase writes nothing
/// more; and the catalog (a new issue), compared with the issues announced before.
///
/// A message holds no secret: a reset code or a confirmation token is made when its message is
/// sent (``Accounts/mailedCode(for:template:)``), and only its hash is kept.
public struct Mail: StoreOwner {
    let base: StoreBase

    /// A message due to be sent, as claimed by one pass.
    public struct Due: Sendable, Equatable {
        public var id: Int64
        public var accountId: String?
        public var recipient: String
        public var template: MailTemplate
        public var values: [String: String]
        public var attempts: Int
        public var createdAt: Date
    }

    /// How the worker paces itself: a pass's size, how long a claim holds, when a failure is tried
    /// again, and when a message that never went is given up.
    public struct Schedule: Sendable {
        public var batch = 20
        public var lease: TimeInterval = 120
        public var firstRetry: TimeInterval = 30
        public var lastRetry: TimeInterval = 3_600
        public var giveUpAfter: TimeInterval = 3 * 86_400
        public init() {}
    }

    // MARK: Writing messages

    /// Adds a message to the outbox, in the caller's write; one per `key` (a second is dropped).
    static func enqueue(_ template: MailTemplate, to recipient: String, accountId: String?, values: [String: String], key: String,
                        at now: Date, in db: any SQLDatabase) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(values), as: UTF8.self)
        try await db.raw(#"""
            INSERT INTO "mailMessage" ("dedupeKey", "accountId", "recipient", "template", "values", "state", "attempts", "nextAttemptAt", "createdAt")
            VALUES (\#(bind: key), \#(bind: accountId), \#(bind: recipient), \#(bind: template.rawValue), \#(bind: json), 'pending', 0, \#(bind: now), \#(bind: now))
            ON CONFLICT ("dedupeKey") DO NOTHING
            """#).run()
    }

    /// How far back a pass reads the notification log on PostgreSQL, where sequence numbers are
    /// taken at insert and committed in any order: a notification committed after later ones is
    /// still within this many of the newest when the next pass reads. (SQLite commits in order.)
    static let lookback: Int64 = 1_000

    /// Turns the notifications written since the last pass into messages: a receipt for each
    /// purchase, subscription and renewal, and a reminder for each failed renewal and lapsed grace
    /// period, to accounts whose address is confirmed. Every instance may run it: the cursor moves
    /// under its row's lock, and each notification's message has one key.
    /// - Returns: the messages written.
    @discardableResult
    public func collect(limit: Int = 500) async throws -> Int {
        let products = (try? await catalog.storeProducts().products) ?? [:]
        let now = clock.wallNow()
        let lookback = database.engine == .postgres ? Self.lookback : 0
        return try await database.write { db in
            try await db.raw(#"INSERT INTO "mailCursor" ("id", "notificationSequence") VALUES (1, 0) ON CONFLICT ("id") DO NOTHING"#).run()
            let lock = database.engine == .postgres ? " FOR UPDATE" : ""
            let cursor = try await db.raw(#"SELECT "notificationSequence" FROM "mailCursor" WHERE "id" = 1"# + SQLQueryString(lock)).first(decodingColumn: "notificationSequence", as: Int64.self) ?? 0
            struct Row: Decodable {
                var sequence: Int64
                var id: String
                var accountId: String
                var type: String
                var subtype: String?
                var transactionId: String?
                var email: String
                var productId: String?
                var amountCents: Int?
                var currency: String?
                var expiresDate: Date?
            }
            let rows = try await db.raw(#"""
                SELECT n."sequence", n."id", n."accountId", n."type", n."subtype", n."transactionId", s."email",
                       t."productId", t."amountCents", t."currency", t."expiresDate"
                FROM "notification" n
                JOIN "signIn" s ON s."accountId" = n."accountId" AND s."emailConfirmedAt" IS NOT NULL
                LEFT JOIN "storeTransaction" t ON t."id" = n."transactionId"
                WHERE n."sequence" > \#(bind: max(0, cursor - lookback))
                  AND n."type" IN ('ONE_TIME_CHARGE', 'SUBSCRIBED', 'DID_RENEW', 'DID_FAIL_TO_RENEW', 'GRACE_PERIOD_EXPIRED')
                ORDER BY n."sequence" LIMIT \#(bind: limit)
                """#).all(decoding: Row.self)
            let newest = try await db.raw(#"SELECT MAX("sequence") AS "newest" FROM "notification""#).first(decodingColumn: "newest", as: Int64?.self) ?? nil
            var written = 0
            for row in rows {
                let template: MailTemplate = switch row.type {
                case StoreNotification.Kind.didFailToRenew: .renewalFailed
                case StoreNotification.Kind.gracePeriodExpired: .graceEnded
                default: .receipt
                }
                let product = row.productId.flatMap { products[$0] }
                var values = ["productId": row.productId ?? "", "title": product?.title ?? row.productId ?? "", "transactionId": row.transactionId ?? ""]
                if let cents = row.amountCents, cents > 0, let currency = row.currency {
                    values["amount"] = String(format: "%d.%02d %@", cents / 100, cents % 100, currency)
                }
                if let expires = row.expiresDate { values["until"] = Store.day(expires) }
                if row.type == StoreNotification.Kind.didRenew { values["renewal"] = "yes" }
                try await Self.enqueue(template, to: row.email, accountId: row.accountId, values: values, key: "notification:\(row.id)", at: now, in: db)
                written += 1
            }
            // Past what was read; with a full page, only as far as the page went.
            let reached = rows.count == limit ? (rows.last?.sequence ?? cursor) : max(cursor, newest ?? cursor)
            try await db.raw(#"UPDATE "mailCursor" SET "notificationSequence" = \#(bind: max(cursor, reached)) WHERE "id" = 1"#).run()
            return written
        }
    }

    /// Announces each issue not seen before to the readers who asked for new-issue mail and hold
    /// a subscription to its series now. The issues of the first catalog are only noted (a store
    /// turning mail on does not announce its back catalogue).
    @discardableResult
    public func announceIssues(_ products: [String: Product]) async throws -> Int {
        let issues = products.values.filter { $0.kind == .nonConsumable && $0.series != nil && $0.forSale != false }
        guard !issues.isEmpty else { return 0 }
        let now = clock.wallNow()
        let plansBySeries = Dictionary(grouping: products.values.filter { $0.kind == .subscription && $0.series != nil }, by: { $0.series ?? "" })
            .mapValues { $0.map(\.id) }
        return try await database.write { db in
            let seen = Set(try await db.raw(#"SELECT "productId" FROM "mailedIssue""#).all(decodingColumn: "productId", as: String.self))
            let first = seen.isEmpty
            var written = 0
            for issue in issues.sorted(by: { $0.id < $1.id }) where !seen.contains(issue.id) {
                try await db.raw(#"INSERT INTO "mailedIssue" ("productId", "seenAt") VALUES (\#(bind: issue.id), \#(bind: now)) ON CONFLICT ("productId") DO NOTHING"#).run()
                guard !first, let plans = plansBySeries[issue.series ?? ""], !plans.isEmpty else { continue }
                let readers = try await db.raw(#"""
                    SELECT DISTINCT s."accountId", s."email" FROM "signIn" s
                    JOIN "storeTransaction" t ON t."accountId" = s."accountId"
                    WHERE s."newIssueMail" = 1 AND s."emailConfirmedAt" IS NOT NULL AND t."kind" = 'subscription' AND t."status" = 'purchased'
                      AND t."expiresDate" > \#(bind: now) AND t."productId" IN \#(SQLGroupExpression(plans.map { SQLBind($0) as any SQLExpression }))
                    """#).all()
                for reader in readers {
                    let accountId = try reader.decode(column: "accountId", as: String.self)
                    try await Self.enqueue(.newIssue, to: try reader.decode(column: "email", as: String.self), accountId: accountId,
                                           values: ["productId": issue.id, "title": issue.title, "date": issue.publicationDate ?? ""],
                                           key: "issue:\(issue.id):\(accountId)", at: now, in: db)
                    written += 1
                }
            }
            return written
        }
    }

    // MARK: Sending

    /// Claims up to `schedule.batch` due messages for this instance until the lease ends.
    public func claimDue(_ schedule: Schedule) async throws -> [Due] {
        let now = clock.wallNow()
        let lease = now.addingTimeInterval(schedule.lease)
        let instance = self.instance
        let skipLocked = database.engine == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        struct Row: Decodable {
            var id: Int64
            var accountId: String?
            var recipient: String
            var template: String
            var values: String
            var attempts: Int
            var createdAt: Date
        }
        let rows = try await database.write { db in
            try await db.raw(#"""
                UPDATE "mailMessage" SET "claimedBy" = \#(bind: instance), "nextAttemptAt" = \#(bind: lease), "attempts" = "attempts" + 1
                WHERE "id" IN (SELECT "id" FROM "mailMessage" WHERE "state" = 'pending' AND "nextAttemptAt" <= \#(bind: now)
                               ORDER BY "id" LIMIT \#(bind: schedule.batch)\#(unsafeRaw: skipLocked))
                RETURNING "id", "accountId", "recipient", "template", "values", "attempts", "createdAt"
                """#).all(decoding: Row.self)
        }
        return rows.compactMap { row in
            guard let template = MailTemplate(rawValue: row.template) else { return nil }
            let values = (try? JSONDecoder().decode([String: String].self, from: Data(row.values.utf8))) ?? [:]
            return Due(id: row.id, accountId: row.accountId, recipient: row.recipient, template: template, values: values,
                       attempts: row.attempts, createdAt: row.createdAt)
        }
    }

    /// Records a message sent; its values are cleared (what it said is the reader's, not the store's).
    public func sent(_ id: Int64) async throws {
        let now = clock.wallNow()
        let instance = self.instance
        try await database.write { db in
            try await db.raw(#"""
                UPDATE "mailMessage" SET "state" = 'sent', "sentAt" = \#(bind: now), "values" = '{}', "lastError" = NULL
                WHERE "id" = \#(bind: id) AND "claimedBy" = \#(bind: instance) AND "state" = 'pending'
                """#).run()
        }
    }

    /// Records a failed attempt: tried again later (the wait doubling from `firstRetry` up to
    /// `lastRetry`), or given up after `giveUpAfter` since it was written.
    public func failed(_ message: Due, error: String, _ schedule: Schedule) async throws {
        let now = clock.wallNow()
        let wait = min(schedule.lastRetry, schedule.firstRetry * pow(2, Double(max(0, message.attempts - 1))))
        let givenUp = now.timeIntervalSince(message.createdAt) >= schedule.giveUpAfter
        let instance = self.instance
        try await database.write { db in
            try await db.raw(#"""
                UPDATE "mailMessage" SET "state" = \#(bind: givenUp ? "failed" : "pending"), "nextAttemptAt" = \#(bind: now.addingTimeInterval(wait)),
                    "lastError" = \#(bind: String(error.prefix(500)))
                WHERE "id" = \#(bind: message.id) AND "claimedBy" = \#(bind: instance) AND "state" = 'pending'
                """#).run()
        }
        if givenUp { logger.error("a message was given up after failing since it was written", metadata: ["mail": "\(message.id)", "template": "\(message.template.rawValue)", "error": "\(error)"]) }
    }

    /// Messages waiting to be sent, and those given up: for `/metrics`.
    public func counts() async throws -> (pending: Int, failed: Int) {
        try await database.read { db in
            let rows = try await db.raw(#"SELECT "state", COUNT(*) AS "count" FROM "mailMessage" WHERE "state" IN ('pending', 'failed') GROUP BY "state""#).all()
            var counts = (pending: 0, failed: 0)
            for row in rows {
                let count = try row.decode(column: "count", as: Int.self)
                if try row.decode(column: "state", as: String.self) == "pending" { counts.pending = count } else { counts.failed = count }
            }
            return counts
        }
    }

    /// Every message to `recipient`, newest first (the operator's look, and the tests').
    public func messages(to recipient: String) async throws -> [(template: MailTemplate, state: String, attempts: Int)] {
        try await database.read { db in
            try await db.raw(#"SELECT "template", "state", "attempts" FROM "mailMessage" WHERE "recipient" = \#(bind: recipient) ORDER BY "id" DESC"#).all().map {
                (MailTemplate(rawValue: try $0.decode(column: "template", as: String.self)) ?? .receipt,
                 try $0.decode(column: "state", as: String.self), try $0.decode(column: "attempts", as: Int.self))
            }
        }
    }
}
