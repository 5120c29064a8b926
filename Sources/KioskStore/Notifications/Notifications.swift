import Foundation
import JWTKit
import KioskCore
import KioskTransfer
import SQLKit
import Tracing

/// The publisher's endpoints and the delivery of the outbox to them (`PeriodicService.notifications` in the server).
///
/// Each notification has one `delivery` row per endpoint registered when it was written. A
/// delivery is **claimed** before it is sent (one statement, `FOR UPDATE SKIP LOCKED` on
/// PostgreSQL, with a lease), so several instances never send one delivery at once; it is sent
/// only when every earlier notification of the same account to the same endpoint is delivered
/// (or given up on), so an endpoint hears of an account's changes in order. A 2xx marks it
/// delivered; anything else schedules the next attempt (``NotificationDeliveryConfiguration``).
/// Delivery is at least once: an instance killed between the endpoint's 2xx and its own commit
/// leaves the delivery to be sent again, with the same `notificationUUID`.
public struct Notifications: StoreOwner {
    let base: StoreBase

    // MARK: Endpoints

    public func addWebhook(_ url: String) async throws -> AdminWebhookRow {
        try Self.checkWebhookURL(url)
        return try await database.write { db in
            try await db.raw(#"INSERT INTO "webhook" ("url", "createdAt") VALUES (\#(bind: url), \#(bind: clock.wallNow())) ON CONFLICT ("url") DO NOTHING"#).run()
            guard let row = try await db.select().column("*").from("webhook").where("url", .equal, url).first(decoding: AdminWebhookRow.self) else {
                throw StoreError.unknownWebhook(url)
            }
            return row
        }
    }

    public func webhooks() async throws -> [AdminWebhookRow] {
        try await database.read { try await $0.select().column("*").from("webhook").orderBy("id").all(decoding: AdminWebhookRow.self) }
    }

    /// Removes an endpoint; what was not yet delivered to it is dropped with it.
    public func removeWebhook(_ url: String) async throws -> AdminWebhookRow {
        try await database.write { db in
            guard let row = try await db.select().column("*").from("webhook").where("url", .equal, url).first(decoding: AdminWebhookRow.self) else {
                throw StoreError.unknownWebhook(url)
            }
            try await db.delete(from: "delivery").where("webhookId", .equal, row.id).where("state", .notEqual, "delivered").run()
            try await db.delete(from: "webhook").where("id", .equal, row.id).run()
            return row
        }
    }

    static func checkWebhookURL(_ url: String) throws {
        try RequestText.check(url, field: "url", maxBytes: 2048)
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme), parsed.host != nil else {
            throw StoreError.invalidRequest("url must be an http:// or https:// URL with a host, not \(url)")
        }
    }

    // MARK: The publisher's view

    /// Each notification's delivery to each endpoint, newest first; `failed` keeps those not
    /// delivered (given up, or whose last attempt failed and which will be tried again). Not one
    /// sent again after it was delivered (a resend: pending again, its attempts counted, no error),
    /// which was listed as failing until its POST was recorded.
    public func list(failed: Bool, limit: Int = 500) async throws -> [AdminNotificationRow] {
        try await database.read { db in
            try await db.raw(#"""
                SELECT n."id" AS "notificationId", n."type", n."subtype", n."accountId", n."transactionId", w."url", d."state", d."attempts",
                    d."lastStatus", d."lastError", n."createdAt", d."nextAttemptAt", d."deliveredAt"
                FROM "delivery" d JOIN "notification" n ON n."sequence" = d."notificationSequence" JOIN "webhook" w ON w."id" = d."webhookId"
                \#(unsafeRaw: failed ? #"WHERE d."state" = 'failed' OR (d."state" = 'pending' AND d."lastError" IS NOT NULL)"# : "")
                ORDER BY n."sequence" DESC, w."id" LIMIT \#(bind: limit)
                """#).all(decoding: AdminNotificationRow.self)
        }
    }

    /// Sends a notification again to every endpoint (App Store's "resend"): its deliveries are
    /// pending again, due now.
    public func resendNotification(_ id: String) async throws -> [AdminNotificationRow] {
        try RequestText.check(id, field: "the notification ID in the path")
        let changed = try await database.write { db in
            guard let sequence = try await db.select().column("sequence").from("notification").where("id", .equal, id)
                .first(decodingColumn: "sequence", as: Int64.self) else {
                throw StoreError.unknownNotification(id)
            }
            try await db.update("delivery").set("state", to: "pending").set("nextAttemptAt", to: clock.wallNow())
                .set(SQLIdentifier("claimedBy"), to: SQLLiteral.null).set(SQLIdentifier("claimedUntil"), to: SQLLiteral.null)
                .where("notificationSequence", .equal, sequence).run()
            return sequence
        }
        return try await list(failed: false).filter { _ in changed > 0 }.filter { $0.notificationId == id }
    }

    /// Writes a `TEST` notification to every endpoint (App Store's "Request a Test Notification").
    /// - Returns: its `notificationUUID`.
    public func testNotification() async throws -> String {
        try await database.write { db in
            try await PlannedRows.announce(StoreNotification(type: StoreNotification.Kind.test, subtype: nil, accountId: "", transactionId: nil,
                                                    originalTransactionId: nil, renewalInfo: nil), at: clock.wallNow(), in: db)
            return try await db.select().column("id").from("notification").orderBy("sequence", .descending).limit(1)
                .first(decodingColumn: "id", as: String.self) ?? ""
        }
    }

    // MARK: Delivering

    /// One claimed delivery with what its POST needs.
    struct DueDelivery: Decodable, Sendable {
        var notificationSequence: Int64
        var webhookId: Int64
        var attempts: Int
        var id: String
        var type: String
        var subtype: String?
        var accountId: String
        var transactionId: String?
        var originalTransactionId: String?
        var renewalInfo: String?
        var createdAt: Date
        var url: String
        var signedTransaction: String?
        /// The transaction's payment method, which names the channel the money came through.
        var paymentMethod: String?
        /// The trace the notification was announced in (``TraceParent``).
        var traceParent: String?
    }

    /// Claims the deliveries due now and sends them; returns how many were delivered (2xx).
    ///
    /// Each endpoint has passes of its own, all endpoints at once: a pass waits for its slowest
    /// POST, and an endpoint that answers slowly or not at all (10 s each) must not hold up the
    /// others' notifications.
    @discardableResult
    public func deliverDue(_ configuration: NotificationDeliveryConfiguration, stopping: @escaping @Sendable () -> Bool = { false }) async throws -> Int {
        let endpoints = try await database.read { db in
            try await db.select().column("id").from("webhook").orderBy("id").all(decodingColumn: "id", as: Int64.self)
        }
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for endpoint in endpoints {
                group.addTask { try await self.deliverDue(to: endpoint, configuration, stopping: stopping) }
            }
            return try await group.reduce(0, +)
        }
    }

    /// One endpoint's passes, one after another, until nothing of it is due or a pass delivers nothing.
    private func deliverDue(to endpoint: Int64, _ configuration: NotificationDeliveryConfiguration, stopping: @Sendable () -> Bool) async throws -> Int {
        var total = 0
        while !stopping() {
            let claiming = ContinuousClock.now
            let claimed = try await claimDeliveries(to: endpoint, configuration)
            if claimed.isEmpty { return total }
            let outcomes = try await send(claimed, claimedAt: claiming, configuration)
            try await record(outcomes)
            let delivered = outcomes.count { $0.delivered }
            total += delivered
            // Only successes unblock the next of an account; after failures, wait for their time.
            if delivered == 0 { return total }
        }
        return total
    }

    /// Sends a pass's claims: each account's deliveries one after another, in the order they were
    /// written, its turn ending at its first failure (the rest wait behind it for its retry). The
    /// turns are dealt out to `configuration.connections` threads, each with a connection of its
    /// own; none starts a POST after one request timeout (the rest are released, unsent, for the
    /// next pass), so no claim outlives its lease.
    ///
    /// **Performance layer.** Replaces a pass of at most 32 deliveries, each the oldest of its
    /// account, each POSTed on a thread started for it: under `BENCH_ONLY=purchases` (32 clients
    /// over 200 accounts, a webhook registered) delivery fell behind from the first second, and
    /// each claim then searched a growing backlog. See ``NotificationDeliveryConfiguration/batch``
    /// for the figures.
    private func send(_ claimed: [DueDelivery], claimedAt: ContinuousClock.Instant, _ configuration: NotificationDeliveryConfiguration) async throws -> [DeliveryOutcome] {
        var turns: [String: [DueDelivery]] = [:]
        var order: [String] = []
        for delivery in claimed.sorted(by: { $0.notificationSequence < $1.notificationSequence }) {
            if turns[delivery.accountId] == nil { order.append(delivery.accountId) }
            turns[delivery.accountId, default: []].append(delivery)
        }
        let threads = max(1, min(configuration.connections, order.count))
        var shares = Array(repeating: [[DueDelivery]](), count: threads)
        for (index, account) in order.enumerated() {
            shares[index % threads].append(turns[account] ?? [])
        }
        // Counted from the claim, as its lease is: the last POST may start just before and take
        // one request timeout more, and the record has the lease's last 5 s.
        let deadline = claimedAt + .seconds(configuration.requestTimeout)
        return try await withThrowingTaskGroup(of: [DeliveryOutcome].self) { group in
            for share in shares {
                group.addTask { try await self.post(share, until: deadline, configuration) }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }

    /// Claims up to `configuration.batch` due deliveries to `endpoint` and returns them with what
    /// their POSTs need. Every claim is a run of its account's oldest pending deliveries: none
    /// after one of its account that waits (its retry not due yet, claimed by a pass of this or
    /// another instance, or written a moment ahead of this pass's clock). Those before it go: an
    /// account was left out whole while any of its deliveries waited, so one account buying
    /// without pause on SQLite (each pass meeting a delivery committed just after its clock was
    /// read) had none of its 20,000 notifications sent until it stopped (2026-11-28). The accounts
    /// take turns: the oldest of every account first, then the second of each, and so on, so one
    /// account with a backlog (a burst of purchases, a slow endpoint) does not fill the pass and
    /// hold up the others, as far as ``turnWindow(_:)`` reaches.
    ///
    /// A claim is written as the lease's end in `nextAttemptAt` (and `claimedBy`, `claimedUntil`),
    /// so "waiting" is one range of the `delivery_due` index, whether for a retry or for a pass
    /// in flight; recording the outcome sets the next attempt. On PostgreSQL two instances may pick
    /// the same account at once (neither sees the other's claim before it commits, and `SKIP
    /// LOCKED` hands the second the rows after the first's): each then keeps only the run that
    /// starts at the account's oldest pending delivery and releases the rest unsent.
    private func claimDeliveries(to endpoint: Int64, _ configuration: NotificationDeliveryConfiguration) async throws -> [DueDelivery] {
        let now = clock.wallNow()
        // A pass's turns stop starting POSTs after one request timeout; the last may take one more.
        let lease = now.addingTimeInterval(2 * configuration.requestTimeout + 5)
        let postgres = database.engine == .postgres
        let instance = self.instance
        // The accounts' turns over their oldest pending deliveries (``turnWindow(_:)``): the oldest
        // of each account, then the second of each, … Waiting accounts are one range of `delivery_due`. The pending ones are
        // read through `delivery_pending`, not `delivery_due`, which SQLite's planner chose without
        // statistics, scanning every due delivery each pass. Draining 29,695 waiting deliveries:
        // 5,448 a second before, 8,197 after (2026-11-27).
        let ranked: SQLQueryString = #"""
            SELECT r."notificationSequence", r."webhookId" FROM (
                SELECT q."notificationSequence", q."webhookId",
                    ROW_NUMBER() OVER (PARTITION BY q."accountId" ORDER BY q."notificationSequence") AS "turn"
                FROM (
                    SELECT p."notificationSequence", p."webhookId", p."accountId"
                    FROM "delivery" p \#(unsafeRaw: postgres ? "" : #"INDEXED BY "delivery_pending""#)
                    LEFT JOIN (SELECT w."accountId", MIN(w."notificationSequence") AS "firstWaiting" FROM "delivery" w
                            WHERE w."state" = 'pending' AND w."nextAttemptAt" > \#(bind: now) AND w."webhookId" = \#(bind: endpoint)
                            GROUP BY w."accountId") waiting ON waiting."accountId" = p."accountId"
                    WHERE p."webhookId" = \#(bind: endpoint) AND p."state" = 'pending' AND p."nextAttemptAt" <= \#(bind: now)
                        AND (p."claimedUntil" IS NULL OR p."claimedUntil" < \#(bind: now))
                        AND (waiting."firstWaiting" IS NULL OR p."notificationSequence" < waiting."firstWaiting")
                    ORDER BY p."notificationSequence" LIMIT \#(bind: Self.turnWindow(configuration))
                ) q
            ) r
            ORDER BY r."turn", r."notificationSequence" LIMIT \#(bind: configuration.batch)
            """#
        // On PostgreSQL the picked rows are locked, and rechecked as they are (`FOR UPDATE` in READ
        // COMMITTED), skipping those another instance's claim holds; SQLite has one writer.
        let picked: SQLQueryString = postgres ? #"""
            SELECT d."notificationSequence", d."webhookId" FROM "delivery" d
            WHERE (d."notificationSequence", d."webhookId") IN (\#(ranked)) AND d."state" = 'pending' AND d."nextAttemptAt" <= \#(bind: now)
            FOR UPDATE OF d SKIP LOCKED
            """# : ranked
        let claims = try await database.statement { db in
            try await db.raw(#"""
                UPDATE "delivery" SET "claimedBy" = \#(bind: instance), "claimedUntil" = \#(bind: lease), "nextAttemptAt" = \#(bind: lease)
                WHERE ("notificationSequence", "webhookId") IN (\#(picked))
                RETURNING "notificationSequence", "accountId"
                """#).all()
        }
        guard !claims.isEmpty else { return [] }
        var sequences: [(sequence: Int64, account: String)] = try claims.map {
            (try $0.decode(column: "notificationSequence", as: Int64.self), try $0.decode(column: "accountId", as: String.self))
        }
        if postgres {
            sequences = try await keepRunsInOrder(sequences, endpoint: endpoint, now: now)
            guard !sequences.isEmpty else { return [] }
        }
        let claimed = sequences.map(\.sequence)
        return try await database.read { db in
            try await db.raw(#"""
                SELECT d."notificationSequence", d."webhookId", d."attempts", n."id", n."type", n."subtype", n."accountId", n."transactionId",
                    n."originalTransactionId", n."renewalInfo", n."createdAt", w."url", t."signedTransaction",
                    t."paymentMethod", n."traceParent"
                FROM "delivery" d JOIN "notification" n ON n."sequence" = d."notificationSequence" JOIN "webhook" w ON w."id" = d."webhookId"
                LEFT JOIN "storeTransaction" t ON t."id" = n."transactionId"
                WHERE d."claimedBy" = \#(bind: instance) AND d."webhookId" = \#(bind: endpoint) AND d."notificationSequence" IN \#(SQLGroupExpression(claimed.map { SQLBind($0) as any SQLExpression }))
                """#).all(decoding: DueDelivery.self)
        }
    }

    /// How many of an endpoint's oldest pending deliveries a pass deals into turns. Turns over all
    /// of them cost a sort of the whole backlog each pass, inside SQLite's one writer: a backlog
    /// drained at 4,854 a second (8,197 without turns), and one account's purchases, whose
    /// deliveries queue behind each other, went to p99 120 ms (13 ms without turns). Over this
    /// window: 5,617 a second, and p99 18 ms (2026-11-27). Past it, one account's older backlog
    /// goes first, in order.
    static func turnWindow(_ configuration: NotificationDeliveryConfiguration) -> Int {
        max(1_024, 4 * configuration.batch)
    }

    /// Of this pass's new claims, the ones with no pending delivery of their account before them
    /// that is not this pass's; releases the others, unsent and due, and returns the rest. (Not
    /// "not this instance's": an earlier pass of this instance that failed before its record
    /// leaves claims of its own, which another instance may be taking over at this moment.)
    private func keepRunsInOrder(_ claims: [(sequence: Int64, account: String)], endpoint: Int64, now: Date) async throws -> [(sequence: Int64, account: String)] {
        let instance = self.instance
        let last = claims.map(\.sequence).max() ?? 0
        let accounts = Set(claims.map(\.account)).sorted()
        let others = try await database.read { db in
            try await db.raw(#"""
                SELECT "accountId", MIN("notificationSequence") AS "first" FROM "delivery"
                WHERE "webhookId" = \#(bind: endpoint) AND "state" = 'pending' AND "notificationSequence" < \#(bind: last)
                    AND "notificationSequence" NOT IN \#(SQLGroupExpression(claims.map { SQLBind($0.sequence) as any SQLExpression }))
                    AND "accountId" IN \#(SQLGroupExpression(accounts.map { SQLBind($0) as any SQLExpression }))
                GROUP BY "accountId"
                """#).all()
        }
        var otherFirst: [String: Int64] = [:]
        for row in others {
            otherFirst[try row.decode(column: "accountId", as: String.self)] = try row.decode(column: "first", as: Int64.self)
        }
        let released = claims.filter { claim in otherFirst[claim.account].map { $0 < claim.sequence } ?? false }.map(\.sequence)
        guard !released.isEmpty else { return claims }
        try await database.statement { db in try await Self.release(released, of: endpoint, claimedBy: instance, at: now, in: db) }
        let gone = Set(released)
        return claims.filter { !gone.contains($0.sequence) }
    }

    /// Gives back `instance`'s claims on `sequences` of `endpoint`, unsent and due at `now`.
    private static func release(_ sequences: [Int64], of endpoint: Int64, claimedBy instance: String, at now: Date, in db: any SQLDatabase) async throws {
        try await db.raw(#"""
            UPDATE "delivery" SET "claimedBy" = NULL, "claimedUntil" = NULL, "nextAttemptAt" = \#(bind: now)
            WHERE "webhookId" = \#(bind: endpoint) AND "claimedBy" = \#(bind: instance)
                AND "notificationSequence" IN \#(SQLGroupExpression(sequences.map { SQLBind($0) as any SQLExpression }))
            """#).run()
    }

    /// The body App Store Server Notifications V2 POSTs: `{"signedPayload": "<JWS>"}`.
    func signedBody(_ delivery: DueDelivery) async throws -> Data {
        let environment = keys.identity.environment == .production ? "Production" : "Sandbox"
        var signedRenewalInfo: String?
        if let text = delivery.renewalInfo, var info = try? JSONDecoder().decode(RenewalInfo.self, from: Data(text.utf8)) {
            info.signedDate = RenewalInfo.milliseconds(Date())
            signedRenewalInfo = try await keys.sign(payload: info)
        }
        let payload = NotificationPayload(
            notificationType: delivery.type, subtype: delivery.subtype, notificationUUID: delivery.id, version: "2.0",
            signedDate: RenewalInfo.milliseconds(Date()),
            data: .init(bundleId: keys.identity.issuer, environment: environment, signedTransactionInfo: delivery.signedTransaction,
                        signedRenewalInfo: signedRenewalInfo, status: nil, accountId: delivery.accountId.isEmpty ? nil : delivery.accountId,
                        channel: delivery.paymentMethod.map(AdminSalesRow.channel(ofPaymentMethod:))))
        let jws = try await keys.sign(payload: payload)
        // A compact JWS is base64url and dots, which a JSON string carries as they are. Replaces
        // `JSONEncoder` over the 3 KB token, which looked at it a character at a time: 3.1 % of
        // the server's samples while the outbox drained (2026-11-30).
        return Data(#"{"signedPayload":""#.utf8) + Data(jws.utf8) + Data(#""}"#.utf8)
    }

    /// What one claimed delivery came to, to be written with the rest of its pass: an attempt
    /// (``attempted``), or a claim given back unsent behind a failure or at the pass's deadline.
    struct DeliveryOutcome: Sendable {
        var delivery: DueDelivery
        var attempts: Int
        var status: Int?
        var problem: String?
        var at: Date
        var nextAttemptAt: Date
        var state: String
        var attempted = true
        var delivered: Bool { state == "delivered" }
    }

    /// POSTs some accounts' claimed deliveries, each account's in order, on one thread
    /// (``HTTPClient/sendInTurns(_:until:)``) and decides what comes next for each: delivered on a
    /// 2xx; else the next attempt by the retry schedule, or failed once it would fall past
    /// `giveUpAfter`; those after a failure or past the deadline are released, unsent.
    private func post(_ turns: [[DueDelivery]], until deadline: ContinuousClock.Instant, _ configuration: NotificationDeliveryConfiguration) async throws -> [DeliveryOutcome] {
        var requests: [[KioskTransfer.HTTPRequest]] = []
        // A delivery that could not be signed fails as a POST would (retried on the schedule) and
        // ends its account's turn, rather than failing the pass and every delivery in it.
        var unsigned: [Int: any Error] = [:]
        // Each delivery is a span of the trace its notification was announced in, and its POST
        // carries that span's `traceparent` for the endpoint to continue. The POSTs go out in turns
        // on shared connections, so a span lasts from its turns' start to their answers.
        var spans: [Int: [any Span]] = [:]
        defer { for span in spans.values.joined() { span.end() } }
        for (index, turn) in turns.enumerated() {
            var signed: [KioskTransfer.HTTPRequest] = []
            for delivery in turn {
                do {
                    let span = startSpan("notification delivery", context: TraceParent.context(delivery.traceParent), ofKind: .producer)
                    span.attributes["kiosk.notification.id"] = delivery.id
                    span.attributes["kiosk.notification.type"] = delivery.type
                    span.attributes["kiosk.delivery.attempt"] = delivery.attempts + 1
                    spans[index, default: []].append(span)
                    signed.append(HTTPRequest(method: "POST", url: delivery.url, headers: [("Content-Type", "application/json")] + TraceParent.headers(for: span.context),
                                              body: try await signedBody(delivery),
                                              timeout: Int(configuration.requestTimeout.rounded(.up)), wantsBody: false))
                } catch {
                    logger.error("could not sign a notification", metadata: ["notification": "\(delivery.id)", "error": "\(Store.describe(error))"])
                    unsigned[index] = error
                    break
                }
            }
            requests.append(signed)
        }
        let answers = try await HTTPClient(keepingConnectionsIn: webhookConnections).sendInTurns(requests, until: deadline)
        let now = clock.wallNow()
        var outcomes: [DeliveryOutcome] = []
        for (index, turn) in turns.enumerated() {
            var turnAnswers = index < answers.count ? answers[index] : []
            // The unsigned one failed where the turn's signed requests ended, if the last was delivered
            // (a turn stops at its first failure, so then all of them were).
            if let error = unsigned[index], turnAnswers.count == requests[index].count, (try? turnAnswers.last?.get())?.isSuccess ?? true {
                turnAnswers.append(.failure(error))
            }
            for (position, answer) in turnAnswers.enumerated() where position < (spans[index]?.count ?? 0) {
                guard let span = spans[index]?[position] else { continue }
                switch answer {
                case .success(let response): span.attributes["http.response.status_code"] = response.status
                    if !response.isSuccess { span.setStatus(SpanStatus(code: .error)) }
                // The error's kind, never its words: they name the endpoint's URL, which may hold a secret.
                case .failure(let error):
                    span.attributes["error.type"] = String(describing: type(of: error))
                    span.setStatus(SpanStatus(code: .error))
                }
            }
            for (position, delivery) in turn.enumerated() {
                guard position < turnAnswers.count else {
                    outcomes.append(DeliveryOutcome(delivery: delivery, attempts: delivery.attempts, status: nil, problem: nil, at: now, nextAttemptAt: now,
                                                    state: "pending", attempted: false))
                    continue
                }
                outcomes.append(outcome(of: delivery, turnAnswers[position], at: now, configuration))
            }
        }
        return outcomes
    }

    /// What one attempt came to: delivered on a 2xx; else the next attempt by the retry schedule,
    /// or failed once it would fall past `giveUpAfter`.
    private func outcome(of delivery: DueDelivery, _ answer: Result<KioskTransfer.HTTPResponse, any Error>, at now: Date,
                         _ configuration: NotificationDeliveryConfiguration) -> DeliveryOutcome {
        var status: Int?
        var problem: String?
        switch answer {
        case .success(let response):
            status = response.status
            if !response.isSuccess { problem = "answered \(response.status)" }
        case .failure(let error):
            problem = "\(error)"
        }
        let attempts = delivery.attempts + 1
        let delays = configuration.retryDelays
        let delay = delays.isEmpty ? 60 : delays[min(attempts - 1, delays.count - 1)]
        let state: String
        if problem == nil {
            state = "delivered"
        } else {
            state = now.addingTimeInterval(delay).timeIntervalSince(delivery.createdAt) > configuration.giveUpAfter ? "failed" : "pending"
            logger.info("notification not delivered; retrying later", metadata: [
                "notification": "\(delivery.id)", "url": "\(delivery.url)", "problem": "\(problem ?? "")", "attempts": "\(attempts)"])
        }
        return DeliveryOutcome(delivery: delivery, attempts: attempts, status: status, problem: problem.map { String($0.prefix(500)) },
                               at: now, nextAttemptAt: now.addingTimeInterval(problem == nil ? 0 : delay), state: state)
    }

    /// Writes a pass's outcomes in one transaction (one commit for the pass, not one per POST),
    /// each only under this instance's claim: a delivery whose claim ran out and was taken by
    /// another instance is that instance's to record.
    private func record(_ outcomes: [DeliveryOutcome]) async throws {
        let instance = self.instance
        let now = clock.wallNow()
        let attempted = outcomes.filter(\.attempted)
        let unsent = Dictionary(grouping: outcomes.filter { !$0.attempted }, by: \.delivery.webhookId)
        let postgres = database.engine == .postgres
        // On PostgreSQL a pass that sent everything it claimed (the usual one) is one statement,
        // which commits by itself: no BEGIN and COMMIT round trips either.
        if postgres, unsent.isEmpty {
            try await database.statement { db in try await Self.recordAttemptsAtOnce(attempted, claimedBy: instance, in: db) }
            return
        }
        try await database.write { db in
            if postgres {
                try await Self.recordAttemptsAtOnce(attempted, claimedBy: instance, in: db)
            } else {
                try await Self.recordAttemptsOneByOne(attempted, claimedBy: instance, in: db)
            }
            for (endpoint, given) in unsent {
                try await Self.release(given.map(\.delivery.notificationSequence), of: endpoint, claimedBy: instance, at: now, in: db)
            }
        }
    }

    /// SQLite: a pass's attempts recorded a statement each. Plain statements of fixed text
    /// (prepared once per connection), not the query builder's, whose rendering was 3.5 % of the
    /// server's time at 2,000 deliveries a second. SQLite runs them in this process, so one per
    /// outcome costs no round trip.
    private static func recordAttemptsOneByOne(_ attempted: [DeliveryOutcome], claimedBy instance: String, in db: any SQLDatabase) async throws {
        for outcome in attempted {
            let key = outcome.delivery
            try await db.raw(#"""
                UPDATE "delivery" SET "state" = \#(bind: outcome.state), "attempts" = \#(bind: outcome.attempts),
                    "lastStatus" = \#(bind: outcome.status), "lastError" = \#(bind: outcome.problem),
                    "deliveredAt" = \#(bind: outcome.delivered ? outcome.at : nil), "nextAttemptAt" = \#(bind: outcome.nextAttemptAt),
                    "claimedBy" = NULL, "claimedUntil" = NULL
                WHERE "notificationSequence" = \#(bind: key.notificationSequence) AND "webhookId" = \#(bind: key.webhookId) AND "claimedBy" = \#(bind: instance)
                """#).run()
        }
    }

    /// PostgreSQL: a pass's attempts recorded in one `UPDATE … FROM unnest(…)`, the outcomes sent as
    /// arrays, each row still only under this instance's claim.
    ///
    /// **Performance layer.** Replaces one `UPDATE` per outcome inside BEGIN … COMMIT: a pass of
    /// 256 waited for 258 round trips to PostgreSQL, one after another, and draining a backlog left
    /// the machine 29 % idle at 1,330 deliveries a second. After (`BENCH_ONLY=purchases`,
    /// 2026-11-28 03:05–03:15): 2,533 notifications delivered a second on PostgreSQL against 1,260
    /// in the full run of 01:02 (docs/benchmarks.md).
    ///
    /// The columns a pass cannot carry as arrays follow from its state: `outcome(of:_:at:_:)`
    /// leaves `problem` nil exactly when the state is `delivered`.
    private static func recordAttemptsAtOnce(_ attempted: [DeliveryOutcome], claimedBy instance: String, in db: any SQLDatabase) async throws {
        guard !attempted.isEmpty else { return }
        // Arrays carry no NULL here (PostgresNIO encodes arrays of non-optional values), so: a
        // status of -1 is "no answer" (no HTTP status is negative), and the error and the delivery
        // time follow from the state (a delivered attempt has no problem; every other has one).
        try await db.raw(#"""
            UPDATE "delivery" d SET "state" = o."state", "attempts" = o."attempts",
                "lastStatus" = NULLIF(o."status", -1),
                "lastError" = CASE WHEN o."state" = 'delivered' THEN NULL ELSE o."problem" END,
                "deliveredAt" = CASE WHEN o."state" = 'delivered' THEN o."at" END,
                "nextAttemptAt" = o."nextAttemptAt", "claimedBy" = NULL, "claimedUntil" = NULL
            FROM unnest(CAST(\#(bind: attempted.map(\.delivery.notificationSequence)) AS BIGINT[]),
                        CAST(\#(bind: attempted.map(\.delivery.webhookId)) AS BIGINT[]),
                        CAST(\#(bind: attempted.map(\.state)) AS TEXT[]),
                        CAST(\#(bind: attempted.map { Int64($0.attempts) }) AS BIGINT[]),
                        CAST(\#(bind: attempted.map { Int64($0.status ?? -1) }) AS BIGINT[]),
                        CAST(\#(bind: attempted.map { $0.problem ?? "" }) AS TEXT[]),
                        CAST(\#(bind: attempted.map(\.at)) AS TIMESTAMPTZ[]),
                        CAST(\#(bind: attempted.map(\.nextAttemptAt)) AS TIMESTAMPTZ[]))
                AS o("sequence", "webhookId", "state", "attempts", "status", "problem", "at", "nextAttemptAt")
            WHERE d."notificationSequence" = o."sequence" AND d."webhookId" = o."webhookId" AND d."claimedBy" = \#(bind: instance)
            """#).run()
    }
}

/// The signed payload of a notification, as App Store's `ResponseBodyV2DecodedPayload` names its fields.
struct NotificationPayload: Codable, Sendable, JWTPayload {
    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var version: String
    var signedDate: Int64
    var data: Body

    struct Body: Codable, Sendable {
        /// The store's issuer, where App Store puts the app's bundle ID.
        var bundleId: String
        var environment: String
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
        var status: Int?
        /// Kiosk's account the notification is about (none for `TEST`).
        var accountId: String?
        /// Kiosk's: where the transaction's money was taken (`web`, `play`, `appstore`, `credits`,
        /// `sandbox`); none for a notification about no transaction.
        var channel: String?
    }

    func verify(using algorithm: some JWTAlgorithm) throws {}
}
