import Foundation
import SQLKit

/// The one writer of the `account` table: every statement that reads or changes an account's row
/// is here, and its methods are the row's transitions (a payment's compare-and-set, a change
/// number taken, a deletion, a disable). The owners (``Accounts``, ``Payments``, ``Receipts``,
/// ``Subscriptions``) call these inside their own write transactions; none spells the table.
///
/// Every writer of an account takes its row first (on PostgreSQL, its lock until the commit), so
/// the account's revisions and change numbers follow its commits.
struct AccountRows {
    let db: any SQLDatabase

    init(_ db: any SQLDatabase) { self.db = db }

    func find(_ id: String) async throws -> AccountRecord? {
        try await db.select().column("*").from("account").where("id", .equal, id).first(decoding: AccountRecord.self)
    }

    /// The account's row, locked until this write commits (PostgreSQL; SQLite's writer is alone
    /// already): every change of an account's devices takes it first, so two sign-ins at the
    /// device limit cannot both count nine and both add a tenth.
    @discardableResult
    func lock(_ accountId: String) async throws -> AccountRecord {
        guard let account = try await db.select().column("*").from("account").where("id", .equal, accountId).for(.update)
            .first(decoding: AccountRecord.self) else {
            throw StoreError.unknownAccount(accountId)
        }
        return account
    }

    /// ``lock(_:)`` for a write that gives the account a way in (a device, a sign-in, an approved
    /// code): refused when the operator disabled it or its holder deleted it, decided under the
    /// lock, so a disable or a deletion committed meanwhile is seen.
    func lockActive(_ accountId: String) async throws {
        let account = try await lock(accountId)
        if account.deletedAt != nil { throw StoreError.accountDeleted(accountId) }
        if account.disabledAt != nil { throw StoreError.accountDisabled }
    }

    func insert(_ account: AccountRecord) async throws {
        try await db.insert(into: "account").model(account).run()
    }

    /// Gives the account `made` as its App Store `appAccountToken` unless it has one already (a
    /// compare-and-set: two first requests at once keep the first written) or was deleted.
    /// - Returns: the account's token (nil for a deleted account).
    func giveAppAccountToken(_ made: String, to accountId: String) async throws -> String? {
        try await db.raw(#"""
            UPDATE "account" SET "appAccountToken" = \#(bind: made)
            WHERE "id" = \#(bind: accountId) AND "appAccountToken" IS NULL AND "deletedAt" IS NULL
            """#).run()
        guard let row = try await db.select().column("appAccountToken").from("account").where("id", .equal, accountId).first() else {
            throw StoreError.unknownAccount(accountId)
        }
        return try row.decode(column: "appAccountToken", as: String?.self)
    }

    /// The account an App Store `appAccountToken` was made for, if any.
    func owner(ofAppAccountToken token: String) async throws -> String? {
        try await db.select().column("id").from("account").where("appAccountToken", .equal, token.lowercased())
            .first()?.decode(column: "id", as: String.self)
    }

    /// Takes the account's next change number (and its row's lock).
    func nextChange(of accountId: String) async throws -> Int64 {
        try await db.raw(#"""
            UPDATE "account" SET "lastChange" = "lastChange" + 1 WHERE "id" = \#(bind: accountId) RETURNING "lastChange"
            """#).first(decodingColumn: "lastChange", as: Int64.self) ?? 0
    }

    /// Moves the account to its next revision, so a payment still deciding on the old one finds
    /// it moved (a revocation takes the row first this way).
    /// The account's storefront, at its next revision: a purchase decided at the old prices
    /// meanwhile finds the account moved and decides again.
    /// - Returns: whether the account has a row.
    func setStorefront(_ storefront: String, of accountId: String) async throws -> Bool {
        try await db.raw(#"""
            UPDATE "account" SET "storefront" = \#(bind: storefront), "revision" = "revision" + 1 WHERE "id" = \#(bind: accountId) RETURNING "id"
            """#).all().count == 1
    }

    func moveRevision(of accountId: String) async throws {
        try await db.raw(#"UPDATE "account" SET "revision" = "revision" + 1 WHERE "id" = \#(bind: accountId)"#).run()
    }

    /// A refund's credits: `delta` (returned less withdrawn) added, at the next revision.
    /// - Returns: the balance after it, or nil when the account has no row.
    func addCredits(_ delta: Int, to accountId: String) async throws -> Int? {
        try await db.raw(#"""
            UPDATE "account" SET "credits" = "credits" + \#(bind: delta), "revision" = "revision" + 1
            WHERE "id" = \#(bind: accountId) RETURNING "credits"
            """#).first(decodingColumn: "credits", as: Int.self)
    }

    /// The compare-and-set a payment commits under (``advanceStep(account:from:adding:)``); it
    /// also takes the account's next change number.
    /// - Returns: the account's new balance and the change number, or nil when it did not move.
    func advance(_ id: String, from revision: Int64?, adding delta: Int) async throws -> (credits: Int, change: Int64)? {
        let plan = WritePlan(steps: [Self.advanceStep(account: id, from: revision, adding: delta)], result: [("advanced", "credits")])
        guard let rows = try await db.run(plan) else { return nil }
        return (Int(try rows.integer("advanced", "credits")), try rows.integer("advanced", "lastChange"))
    }

    /// Whether the account is deleted or disabled: nobody can use what is granted to it.
    func isClosed(_ accountId: String) async throws -> Bool {
        guard let account = try await find(accountId) else { return false }
        return account.deletedAt != nil || account.disabledAt != nil
    }

    /// Refuses a decision the store makes for the account itself (an Ask to Buy approved, the
    /// operator's grant) once its holder deleted it: nobody can use what it would charge or grant.
    /// Called inside the decision's write after its compare-and-set took the row, so a deletion
    /// committed meanwhile is seen. (Money a channel took already is granted and taken back where
    /// the channel's record says so.)
    func refuseIfDeleted(_ accountId: String) async throws {
        if try await find(accountId)?.deletedAt != nil { throw StoreError.accountDeleted(accountId) }
    }

    /// The holder deleted the account: the row stays (the ledger names it), its token is erased.
    func markDeleted(_ accountId: String, at now: Date) async throws {
        try await db.update("account").set("deletedAt", to: now).set("appAccountToken", to: SQLLiteral.null).where("id", .equal, accountId).run()
    }

    func setDisabled(_ accountId: String, at disabledAt: Date?) async throws {
        try await db.update("account").set("disabledAt", to: disabledAt).where("id", .equal, accountId).run()
    }

    // MARK: - Steps of the one-statement writes (``RecordPurchase``, ``RecordRenewalStep``)

    /// The compare-and-set a payment commits under: the account moves to its next revision, its
    /// balance by `delta`, only while it is still at `revision`, the snapshot the payment was
    /// decided on. A decision that depends on nothing the account holds (a consumable's charge,
    /// `revision` nil) moves it from whatever revision it is at, as long as the balance stays
    /// between 0 and the largest integer: the one thing such a decision needs of the account,
    /// checked here, where no other payment can come between the check and the write (the row is
    /// locked, or on SQLite the writer is this connection). The CASE keeps the bound's arithmetic
    /// from overflowing on either engine. It also takes the account's next change number.
    /// Returns `credits` and `lastChange`.
    static func advanceStep(account id: String, from revision: Int64?, adding delta: Int) -> PlanStep {
        let delta = PlanSQL.bind(.integer(Int64(delta)))
        let revision = PlanSQL.bind(.integer(revision))
        return PlanStep(
            name: "advanced",
            write: .update("account", set: [
                ("revision", [.text(#""revision" + 1"#)]),
                ("credits", [.text(#""credits" + "#), delta]),
                ("lastChange", [.text(#""lastChange" + 1"#)]),
            ]),
            conditions: [
                [.text(#""id" = "#), .bind(.text(id))],
                [.text("CASE WHEN "), revision, .text(#" IS NOT NULL THEN "revision" = "#), revision,
                 .text(" WHEN "), delta, .text(#" >= 0 THEN "credits" <= 9223372036854775807 - "#), delta,
                 .text(#" ELSE "credits" >= -"#), delta, .text(" END")],
            ],
            returning: ["credits", "lastChange"])
    }

    /// A new subscription period is a change the account's devices learn of through the feed: the
    /// account's revision and change number move (its row locked until the commit), after the
    /// step `after` and only when `moves`. Returns `lastChange`.
    static func renewalStep(account id: String?, moves: Bool, after: String) -> PlanStep {
        PlanStep(
            name: "advanced",
            write: .update("account", set: [("revision", [.text(#""revision" + 1"#)]), ("lastChange", [.text(#""lastChange" + 1"#)])]),
            after: [after],
            conditions: [[.text(#""account"."id" = "#), .bind(.text(id))], [.bind(.flag(moves))]],
            returning: ["lastChange"])
    }
}
