import Foundation
import KioskCore
import SQLKit

/// What `kiosk admin check` asks of the database after a restore, or on any day: every live
/// receipt verifies under a key the store keeps and names its own row, each account's credit
/// balance is what its transactions granted minus what they spent, and each day's sales figures
/// are the sum of that day's ledger. Reads only; a fault is reported, never mended.
public struct StoreAudit: StoreOwner {
    let base: StoreBase

    /// One thing found wrong: what kind, the row it is about, and what was found.
    public struct Fault: Codable, Sendable, Equatable, CustomStringConvertible {
        public var check: String
        public var subject: String
        public var detail: String

        public init(check: String, subject: String, detail: String) {
            (self.check, self.subject, self.detail) = (check, subject, detail)
        }

        public var description: String { "\(check): \(subject): \(detail)" }
    }

    /// What one check looked at, and what it found wrong.
    public struct Outcome: Codable, Sendable {
        public var check: String
        public var examined: Int
        public var faults: [Fault]

        public init(check: String, examined: Int, faults: [Fault]) {
            (self.check, self.examined, self.faults) = (check, examined, faults)
        }
    }

    /// Every check, in order.
    public func run() async throws -> [Outcome] {
        var outcomes: [Outcome] = []
        for (name, check) in [("receipts", receipts), ("balances", balances), ("sales", sales)] as [(String, () async throws -> Outcome)] {
            do {
                outcomes.append(try await check())
            } catch {
                // A sum past what the database holds (an overflow), a row that does not read: said, not thrown.
                outcomes.append(Outcome(check: name, examined: 0, faults: [Fault(check: name, subject: "the whole check",
                                                                                   detail: "could not be made: \(Store.describe(error))")]))
            }
        }
        return outcomes
    }

    /// Every purchased transaction's receipt verifies under a key the store keeps (retired ones
    /// too: a receipt signed before a rotation is signed again only when its device next restores)
    /// and names the transaction, account and product of its row. Read in pages by sequence.
    public func receipts() async throws -> Outcome {
        struct Row: Decodable {
            var sequence: Int64
            var id: String
            var accountId: String
            var productId: String
            var signedTransaction: String?
        }
        guard let policy = try await keys.everyKeptKeyPolicy() else {
            return Outcome(check: "receipts", examined: 0, faults: [Fault(check: "receipts", subject: "signing keys", detail: "the store keeps no key that verifies")])
        }
        var faults: [Fault] = []
        var examined = 0
        var after: Int64 = 0
        while true {
            let from = after
            let page = try await database.read { db in
                try await db.raw(#"""
                    SELECT "sequence", "id", "accountId", "productId", "signedTransaction" FROM "storeTransaction"
                    WHERE "status" = 'purchased' AND "sequence" > \#(bind: from) ORDER BY "sequence" LIMIT 2000
                    """#).all(decoding: Row.self)
            }
            guard let last = page.last else { break }
            after = last.sequence
            for row in page {
                examined += 1
                guard let receipt = row.signedTransaction else {
                    faults.append(Fault(check: "receipts", subject: "transaction \(row.id)", detail: "is purchased and has no signed receipt"))
                    continue
                }
                do {
                    let claims = try await policy.check(receipt)
                    if claims.transactionId != row.id || claims.accountId != row.accountId || claims.productId != row.productId {
                        faults.append(Fault(check: "receipts", subject: "transaction \(row.id)",
                                            detail: "its receipt names transaction \(claims.transactionId) of account \(claims.accountId) for \(claims.productId)"))
                    }
                } catch {
                    faults.append(Fault(check: "receipts", subject: "transaction \(row.id)", detail: "its receipt does not verify (\(error))"))
                }
            }
        }
        return Outcome(check: "receipts", examined: examined, faults: faults)
    }

    /// Each account's credits equal what its standing transactions granted minus what they spent
    /// (a refund takes back what it granted and gives back what it spent; a revocation alone
    /// changes no balance).
    public func balances() async throws -> Outcome {
        struct Row: Decodable {
            var id: String
            var credits: Int64
            var expected: Int64
        }
        let rows = try await database.read { db in
            try await db.raw(#"""
                SELECT a."id", a."credits", CAST(COALESCE((
                    SELECT SUM(t."creditsGranted" - t."creditsSpent") FROM "storeTransaction" t
                    WHERE t."accountId" = a."id" AND t."status" IN ('purchased', 'revoked')
                      AND NOT EXISTS (SELECT 1 FROM "ledgerEntry" l WHERE l."transactionId" = t."id" AND l."kind" = 'refund')
                ), 0) AS BIGINT) AS "expected"
                FROM "account" a
                """#).all(decoding: Row.self)
        }
        let faults = rows.filter { $0.credits != $0.expected }.map {
            Fault(check: "balances", subject: "account \($0.id)", detail: "holds \($0.credits) credits; its transactions granted minus spent come to \($0.expected)")
        }
        return Outcome(check: "balances", examined: rows.count, faults: faults)
    }

    /// Each day's sales figures (per product and currency: sales, refunds, net) equal the sum of
    /// that day's ledger entries that count as sales.
    public func sales() async throws -> Outcome {
        struct Row: Decodable, Hashable {
            var day: String
            var productId: String
            var currency: String
            var sales: Int64
            var refunds: Int64
            var netCents: Int64
        }
        let day = Migrations.ColumnTypes(database.engine).utcDay(#"l."createdAt""#)
        let (figures, ledger) = try await database.read { db in
            let figures = try await db.raw(#"""
                SELECT "day", "productId", "currency", CAST(SUM("sales") AS BIGINT) AS "sales", CAST(SUM("refunds") AS BIGINT) AS "refunds",
                       CAST(SUM("netCents") AS BIGINT) AS "netCents"
                FROM "salesDaySlot" GROUP BY "day", "productId", "currency"
                """#).all(decoding: Row.self)
            let ledger = try await db.raw(#"""
                SELECT \#(unsafeRaw: day) AS "day", t."productId" AS "productId", l."currency" AS "currency",
                       CAST(SUM(CASE WHEN l."kind" = 'charge' THEN 1 ELSE 0 END) AS BIGINT) AS "sales",
                       CAST(SUM(CASE WHEN l."kind" = 'charge' THEN 0 ELSE 1 END) AS BIGINT) AS "refunds",
                       CAST(SUM(l."amountCents") AS BIGINT) AS "netCents"
                FROM "ledgerEntry" l JOIN "storeTransaction" t ON t."id" = l."transactionId"
                WHERE l."kind" = 'charge' OR l."amountCents" <> 0
                GROUP BY 1, 2, 3
                """#).all(decoding: Row.self)
            return (figures, ledger)
        }
        func key(_ row: Row) -> String { "\(row.day) \(row.productId) \(row.currency)" }
        let kept = Dictionary(figures.map { (key($0), $0) }, uniquingKeysWith: { first, _ in first })
        let summed = Dictionary(ledger.map { (key($0), $0) }, uniquingKeysWith: { first, _ in first })
        var faults: [Fault] = []
        for name in Set(kept.keys).union(summed.keys).sorted() {
            let figure = kept[name], sum = summed[name]
            guard figure?.sales != sum?.sales || figure?.refunds != sum?.refunds || figure?.netCents != sum?.netCents else { continue }
            // A day whose figures are all zero and that has no ledger row is the same as no figures.
            if sum == nil, let figure, figure.sales == 0, figure.refunds == 0, figure.netCents == 0 { continue }
            func show(_ row: Row?) -> String { row.map { "\($0.sales) sales, \($0.refunds) refunds, \($0.netCents) net" } ?? "nothing" }
            faults.append(Fault(check: "sales", subject: name, detail: "the day's figures say \(show(figure)); its ledger sums to \(show(sum))"))
        }
        return Outcome(check: "sales", examined: summed.count, faults: faults)
    }
}
