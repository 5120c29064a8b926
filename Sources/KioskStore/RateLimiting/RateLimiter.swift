import Foundation
import HTTPTypes
import Logging
import PostgresNIO
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
///
/// A shared bucket with a large burst lends an instance up to 1 % of it at a time (a lease,
/// spent here within a second; ``leaseSize(_:)``): every purchase of one address (or account)
/// updating its one row took turns on that row's lock, which held purchases from one address to
/// about 1,000 a second on PostgreSQL with the limits on (2,227 with them off). Tokens are taken
/// from the bucket before they are lent, so the instances together never grant more than it
/// holds. A lease not spent within its second is not spent later (a token is never spent long
/// after the bucket refilled): its tokens go back to the bucket with the next take, less those the
/// bucket has refilled since they were taken (``Lease/returnable(at:)``), so a client too slow to
/// spend a lease is not charged for it (a request every 2 s against a bucket of 1,000 an hour spent
/// 10 tokens a request), and no burst exceeds the bucket. Takes that miss the lease at once add their leases up
/// (each overwrote the one before: 392 of 1,000 granted to one account's 16 clients, 2026-12-01).
/// Small limits (a burst under 200) lend one token at a time, exactly as before.
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
    /// Tokens this instance took from shared buckets ahead of its requests.
    private let leases = Mutex<[String: Lease]>([:])

    private struct Lease {
        var tokens: Int
        let limit: RateLimit
        var until: ContinuousClock.Instant
        /// When the earliest of its tokens left the bucket (the start of the take that got them).
        var takenAt: ContinuousClock.Instant

        /// The tokens a lapsed lease gives back at `now`: those the bucket has not refilled since
        /// they were taken. The bucket refills as if they were spent, so giving back all of them
        /// after it had refilled let another instance drain it and this one grant them again: two
        /// instances granted 1,714 in 6.7 s under 1,000 a minute, after 45 s idle (2026-12-01).
        /// What the lease holds plus the bucket then never exceeds the burst.
        func returnable(at now: ContinuousClock.Instant) -> Double {
            max(0, Double(tokens) - max(0, RateLimiter.seconds(now - takenAt)) * limit.perSecond)
        }

        /// A lapsed lease's tokens wait here to go back to the bucket, until it would have
        /// refilled anyway (then giving them back changes nothing), or for ten minutes at most:
        /// kept for a whole day under a limit of N a day, every account of a large store would
        /// leave an entry here. A client idle for longer loses at most 1 % of its burst.
        func isWorthReturning(at now: ContinuousClock.Instant) -> Bool {
            RateLimiter.seconds(now - until) < 600 && returnable(at: now) > 0
        }
    }

    /// How long a leased token may wait to be spent: a second, unless a test says otherwise.
    private let leaseLifetime: Duration

    /// The tokens a take of a shared bucket takes when the bucket has them: 1 % of its burst.
    static func leaseSize(_ limit: RateLimit) -> Int {
        max(1, limit.burst / 100)
    }

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

    init(database: ServerDatabase, logger: Logger, leaseLifetime: Duration = .seconds(1)) {
        self.database = database
        self.logger = logger
        self.leaseLifetime = leaseLifetime
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
        let now = ContinuousClock.now
        // A token of this instance's lease, or else the lapsed lease's tokens to give back with
        // this take (taken out of the map, so two takes never give them back twice).
        let (spent, returning) = leases.withLock { leases -> (Bool, Double) in
            guard var lease = leases[key], lease.tokens > 0 else { return (false, 0) }
            guard lease.limit == limit else {
                leases[key] = nil
                return (false, 0)
            }
            guard lease.until > now else {
                leases[key] = nil
                return (false, lease.returnable(at: now))
            }
            lease.tokens -= 1
            leases[key] = lease.tokens > 0 ? lease : nil
            return (true, 0)
        }
        if spent { return .allowed }
        let take = TakeShared(key: key, burst: Double(limit.burst), perSecond: limit.perSecond, leaseSize: Self.leaseSize(limit), returning: returning)
        let answer = try await database.statement { db in
            try await db.rows(take).first.map { row in
                (tokens: try row.decode(column: "tokens", as: Double.self), taken: Int(try row.decode(column: "taken", as: Int64.self)))
            }
        }
        guard let answer else { return .allowed }
        guard answer.taken >= 1 else {
            // The bucket is empty, but a take of it in flight meanwhile may have lent this instance
            // tokens: one of those before refusing.
            return spendLease(key, limit, at: ContinuousClock.now) ? .allowed : Self.limited(tokens: answer.tokens, limit)
        }
        if answer.taken > 1 {
            let lent = Lease(tokens: answer.taken - 1, limit: limit, until: now + leaseLifetime, takenAt: now)
            leases.withLock { leases in
                // Another take of this bucket in flight at the same time stored its lease first:
                // both are this instance's tokens, so they add up. The later end holds for them
                // all; the two takes overlapped, so the earlier tokens gain less than a round trip.
                guard var lease = leases[key], lease.limit == limit else {
                    leases[key] = lent
                    return
                }
                lease.tokens += lent.tokens
                lease.until = max(lease.until, lent.until)
                lease.takenAt = min(lease.takenAt, lent.takenAt)
                leases[key] = lease
            }
        }
        return .allowed
    }

    /// Spends a token of this instance's lease on `key` if it holds one that has not lapsed.
    private func spendLease(_ key: String, _ limit: RateLimit, at now: ContinuousClock.Instant) -> Bool {
        leases.withLock { leases in
            guard var lease = leases[key], lease.limit == limit, lease.until > now, lease.tokens > 0 else { return false }
            lease.tokens -= 1
            leases[key] = lease.tokens > 0 ? lease : nil
            return true
        }
    }

    /// Forgets the buckets that have refilled, which the server's clean-up pass (`PeriodicService.cleanup`) asks for once
    /// a minute: a missing bucket is a full one. On PostgreSQL, rows idle for a day are deleted (by
    /// then every bucket a `N/day` or faster limit allows has refilled); on SQLite, the buckets of
    /// this process that are full again.
    public func forgetIdleBuckets(now: ContinuousClock.Instant = .now) async {
        leases.withLock { leases in leases = leases.filter { $0.value.until > now || $0.value.isWorthReturning(at: now) } }
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

/// Refills a shared bucket by the time since its last use and takes a lease's tokens from it, or
/// the one token this request needs, or none; PostgreSQL only.
///
/// A prepared statement (``StoreStatement``): at the default limits (a burst under 200 lends one
/// token at a time) every purchase on PostgreSQL takes its account's bucket here, and parsing and
/// planning this UPSERT anew cost PostgreSQL 131–192 µs a statement against 46–49 µs prepared
/// (`pgbench -M simple` against `-M prepared` on this text, 2026-12-01). It was an SQLKit query
/// with its values bound, which PostgresNIO sends unnamed, so planned at every call.
struct TakeShared: StoreStatement {
    typealias Row = any SQLRow
    // $1 the key, $2 the burst, $3 tokens a second, $4 a lease's tokens, $5 the tokens of this
    // instance's lapsed lease given back. The level is the bucket refilled to now (the statement's
    // own time, never less than its last use: a request that started earlier may commit after a
    // later one) with those tokens back, never above the burst. It takes a lease's tokens when the
    // bucket has them, else the one this request needs. (A bucket that is not there is full.)
    //
    // Committed without waiting for the WAL flush (`synchronous_commit` off for this statement's
    // transaction only): a crash of the database can lose the last fraction of a second of token
    // counts, which only lets a client that many more requests, and nothing paid for depends on a
    // bucket. Waiting held the bucket's row lock through each flush, so all the purchases of one
    // address (or of one account) took turns at the disk's pace: 917 purchases a second with the
    // limits on against 2,227 with them off, from one address (docs/benchmarks.md).
    static let sql = #"""
        INSERT INTO "rateLimitBucket" AS b ("key", "tokens", "updatedAt", "granted", "taken")
        SELECT $1, $2 - LEAST($4, $2), extract(epoch from statement_timestamp()), TRUE, CAST(LEAST($4, $2) AS BIGINT)
        FROM (SELECT set_config('synchronous_commit', 'off', true)) AS "unflushed"
        ON CONFLICT ("key") DO UPDATE SET
            "taken" = (CASE WHEN LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) >= $4 THEN CAST($4 AS BIGINT) WHEN LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) >= 1 THEN 1 ELSE 0 END),
            "tokens" = LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) - (CASE WHEN LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) >= $4 THEN CAST($4 AS BIGINT) WHEN LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) >= 1 THEN 1 ELSE 0 END),
            "granted" = LEAST($2, b."tokens" + $5 + GREATEST(0, extract(epoch from statement_timestamp()) - b."updatedAt") * $3) >= 1,
            "updatedAt" = GREATEST(b."updatedAt", extract(epoch from statement_timestamp()))
        RETURNING "tokens", "taken"
        """#
    static let parameterTypes: [PostgresDataType] = [.text, .float8, .float8, .float8, .float8]

    let key: String
    let burst: Double
    let perSecond: Double
    let leaseSize: Int
    let returning: Double

    var parameters: [StatementParameter] { [.text(key), .real(burst), .real(perSecond), .real(Double(leaseSize)), .real(returning)] }
}
