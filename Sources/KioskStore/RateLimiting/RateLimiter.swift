import Foundation
import HTTPTypes
import Logging
import SQLKit
import Synchronization

/// Token buckets, one per client address or account and kind of request: a request takes a token
/// or is refused with 429 and the seconds until one is back.
///
/// On PostgreSQL the buckets are rows every instance shares, so N instances do not make N times
/// the limit: one UPSERT refills a bucket by the time since its last use and takes a token, in one
/// atomic statement (the row lock orders instances racing on one bucket), timed by the database's
/// clock so that instances whose clocks differ agree. On SQLite (one store, one instance) they
/// live in this process.
public final class RateLimiter: Sendable {
    /// What a bucket answered.
    public enum Outcome: Equatable, Sendable {
        case allowed
        /// Refused: a token is back after this many seconds (at least 1).
        case limited(retryAfter: Int)
    }

    private let database: ServerDatabase
    private let logger: Logger
    private let local = Mutex<[String: LocalBucket]>([:])

    private struct LocalBucket {
        var tokens: Double
        var updatedAt: ContinuousClock.Instant
        /// The limit it was last taken under (buckets of different kinds have different limits).
        var limit: RateLimit

        /// Whether it would be full by `now`: then forgetting it changes nothing.
        func isFull(at now: ContinuousClock.Instant) -> Bool {
            tokens + RateLimiter.seconds(now - updatedAt) * limit.perSecond >= Double(limit.burst)
        }
    }

    init(database: ServerDatabase, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Takes a token from the bucket `key` (made full on first use) under `limit`.
    public func take(_ key: String, _ limit: RateLimit) async throws -> Outcome {
        switch database.engine {
        case .postgres: return try await takeShared(key, limit)
        case .sqlite: return takeLocal(key, limit, now: .now)
        }
    }

    func takeLocal(_ key: String, _ limit: RateLimit, now: ContinuousClock.Instant) -> Outcome {
        local.withLock { buckets in
            if buckets.count > 100_000 {
                // Forget the buckets that have refilled: a missing bucket is a full one.
                buckets = buckets.filter { !$0.value.isFull(at: now) }
            }
            var bucket = buckets[key] ?? LocalBucket(tokens: Double(limit.burst), updatedAt: now, limit: limit)
            bucket.limit = limit
            bucket.tokens = min(Double(limit.burst), bucket.tokens + max(0, Self.seconds(now - bucket.updatedAt)) * limit.perSecond)
            bucket.updatedAt = now
            let granted = bucket.tokens >= 1
            if granted { bucket.tokens -= 1 }
            buckets[key] = bucket
            return granted ? .allowed : Self.limited(tokens: bucket.tokens, limit)
        }
    }

    private func takeShared(_ key: String, _ limit: RateLimit) async throws -> Outcome {
        let burst = Double(limit.burst)
        let rate = limit.perSecond
        let answer = try await database.statement { db -> (tokens: Double, granted: Bool)? in
            // The level the bucket has refilled to now; the statement's own time, never less than
            // the last use (a request that started earlier may commit after a later one).
            let level: SQLQueryString = #"LEAST(\#(bind: burst), b."tokens" + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * \#(bind: rate))"#
            return try await db.raw(#"""
                INSERT INTO "rateLimitBucket" AS b ("key", "tokens", "updatedAt", "granted")
                VALUES (\#(bind: key), \#(bind: burst - 1), extract(epoch from statement_timestamp()), TRUE)
                ON CONFLICT ("key") DO UPDATE SET
                    "tokens" = CASE WHEN \#(level) >= 1 THEN \#(level) - 1 ELSE \#(level) END,
                    "granted" = \#(level) >= 1,
                    "updatedAt" = GREATEST(b."updatedAt", extract(epoch from statement_timestamp()))
                RETURNING "tokens", "granted"
                """#).first().map { row in (try row.decode(column: "tokens", as: Double.self), try row.decode(column: "granted", as: Bool.self)) }
        }
        guard let answer, !answer.granted else { return .allowed }
        return Self.limited(tokens: answer.tokens, limit)
    }

    /// Forgets the buckets that have refilled, which the server's ``CleanupService`` asks for once
    /// a minute: a missing bucket is a full one. On PostgreSQL, rows idle for a day are deleted (by
    /// then every bucket a `N/day` or faster limit allows has refilled); on SQLite, the buckets of
    /// this process that are full again.
    public func forgetIdleBuckets(now: ContinuousClock.Instant = .now) async {
        guard database.engine == .postgres else {
            local.withLock { buckets in buckets = buckets.filter { !$0.value.isFull(at: now) } }
            return
        }
        do {
            try await database.statement { db in
                try await db.raw(#"DELETE FROM "rateLimitBucket" WHERE "updatedAt" < extract(epoch from statement_timestamp()) - 86400"#).run()
            }
        } catch {
            logger.warning("could not delete idle rate limit buckets", metadata: ["error": "\(ServerDatabase.describe(error))"])
        }
    }

    private static func limited(tokens: Double, _ limit: RateLimit) -> Outcome {
        .limited(retryAfter: max(1, Int(((1 - tokens) / limit.perSecond).rounded(.up))))
    }

    fileprivate static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
