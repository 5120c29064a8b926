import Foundation
import KioskCore
import SQLKit

/// The store's time, which renewals, grace, retries and expiry read: the wall clock, or in the
/// sandbox a clock that runs `scale` times faster (8,640 makes a day pass in 10 seconds and a
/// monthly period in about 5 minutes, as Apple's sandbox does), plus each account's own offset
/// (``Subscriptions/setSandbox(accountId:_:)`` moves one account's clock forward).
///
/// The scaled clock is anchored in the database (`storeClock`), so every instance reads the same
/// time and a restart does not send it back: a start with another scale re-anchors it at the
/// time it had reached. Leases and delivery retries are measured on the wall clock.
public struct StoreClock: Sendable {
    /// How many seconds of store time pass in one real second.
    public let scale: Double
    /// The real instant (seconds since 1970) at which the store's time was `storeAnchor`.
    let realAnchor: Double
    let storeAnchor: Double
    /// The wall clock; tests may pass their own.
    let wall: @Sendable () -> Date

    /// The wall clock itself.
    public static let wallClock = StoreClock(scale: 1, realAnchor: 0, storeAnchor: 0, wall: { Date() })

    public init(scale: Double, realAnchor: Double, storeAnchor: Double, wall: @escaping @Sendable () -> Date = { Date() }) {
        self.scale = scale
        self.realAnchor = realAnchor
        self.storeAnchor = storeAnchor
        self.wall = wall
    }

    /// The store's time now, to the millisecond (what both engines keep exactly).
    public func now() -> Date {
        let real = wall().timeIntervalSince1970
        let seconds = scale == 1 && realAnchor == storeAnchor ? real : storeAnchor + (real - realAnchor) * scale
        return Date(timeIntervalSince1970: (seconds * 1000).rounded() / 1000)
    }

    /// The wall clock now, to the millisecond (what both engines keep exactly, so a date read
    /// back compares equal to the one written): when a row was written, leases, delivery retries.
    public func wallNow() -> Date {
        Date(timeIntervalSince1970: (wall().timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    /// An account's time: the store's plus the account's sandbox offset.
    func now(offset: Double) -> Date {
        Date(timeIntervalSince1970: ((now().timeIntervalSince1970 + offset) * 1000).rounded() / 1000)
    }

    /// Reads the store's clock from the database, anchoring it there when it is new or its
    /// scale changed.
    /// - Throws: ``ServerSetupError`` when a production store is asked to run time faster.
    static func load(scale: Double, environment: StoreEnvironment, database: ServerDatabase) async throws -> StoreClock {
        guard scale > 0, scale.isFinite else {
            throw ServerSetupError(path: "--sandbox-time-scale", problem: "must be a number greater than zero, not \(scale)", action: "pass 1 for real time")
        }
        if environment == .production, scale != 1 {
            throw ServerSetupError(path: "--sandbox-time-scale", problem: "is \(scale), but a production store keeps real time",
                action: "leave it out, or serve with --environment sandbox")
        }
        return try await database.write { db in
            let row = try await db.raw(#"SELECT "realAnchor", "storeAnchor", "scale" FROM "storeClock" WHERE "id" = 1 \#(unsafeRaw: database.engine == .postgres ? "FOR UPDATE" : "")"#).first()
            let real = Date().timeIntervalSince1970
            if let row {
                let stored = StoreClock(scale: try row.decode(column: "scale", as: Double.self),
                    realAnchor: try row.decode(column: "realAnchor", as: Double.self), storeAnchor: try row.decode(column: "storeAnchor", as: Double.self))
                if stored.scale == scale { return stored }
                let reached = stored.now().timeIntervalSince1970
                try await db.raw(#"UPDATE "storeClock" SET "realAnchor" = \#(bind: real), "storeAnchor" = \#(bind: reached), "scale" = \#(bind: scale) WHERE "id" = 1"#).run()
                return StoreClock(scale: scale, realAnchor: real, storeAnchor: reached)
            }
            if scale == 1 { return .wallClock }
            try await db.raw(#"INSERT INTO "storeClock" ("id", "realAnchor", "storeAnchor", "scale") VALUES (1, \#(bind: real), \#(bind: real), \#(bind: scale))"#).run()
            return StoreClock(scale: scale, realAnchor: real, storeAnchor: real)
        }
    }
}
