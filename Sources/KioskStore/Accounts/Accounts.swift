import Foundation
import SQLKit
import KioskCore
import Logging

/// The accounts: their creation, their bearer tokens, what each holds, and each account's change
/// feed (its transactions in the order they were written, and the notices that wake its polls).
public struct Accounts: StoreOwner {
    let base: StoreBase

    /// Creates an account with its first device, which gets a fresh secret token (only its hash
    /// is stored). With `signIn`, the account can be signed in to from other devices; without, it
    /// is anonymous, as the sandbox's and the quick start's are.
    /// - Parameter kind: `web` for a browser signing up on the store's pages (its session).
    /// - Parameter storefront: the storefront chosen at sign-up (``Storefront``); nil: none yet.
    public func createAccount(signIn: SignInDetails? = nil, deviceName: String? = nil, kind: DeviceKind = .app, storefront: String? = nil) async throws -> AccountCreated {
        let storefront = try storefront.map(Self.storefrontCode)
        // Checked and hashed before the write: the hash takes a fraction of a second, off the writer.
        var login: NewSignIn?
        if let signIn {
            // The refusals that cost nothing come before the hash (a quarter second).
            let email = try EmailAddress.normalized(signIn.email)
            _ = try Passwords.normalized(signIn.password)
            if try await database.read({ try await Accounts.signIn(email: email, in: $0) }) != nil { throw StoreError.emailTaken(email) }
            login = try await newSignIn(signIn)
        }
        let now = clock.wallNow()
        let id = "acct_" + Store.randomHex(bytes: 8)
        var account = AccountRecord(id: id, tokenHash: "retired:" + id, credits: 0, createdAt: now, revision: 0)
        account.storefront = storefront
        let device = NewDevice(accountId: id, name: signIn?.deviceName ?? deviceName, now: now, kind: kind)
        try await database.write { [login, account] db in
            if let login, try await Accounts.signIn(email: login.email, in: db) != nil { throw StoreError.emailTaken(login.email) }
            try await AccountRows(db).insert(account)
            try await db.insert(into: "device").model(device.record).run()
            if let login {
                try await db.insert(into: "signIn").model(login.record(accountId: id, now: now)).run()
                try await Accounts.askToConfirm(login.email, of: id, policy: base.accountPolicy, at: now, in: db)
            }
        }
        return AccountCreated(accountId: id, token: device.token, deviceId: device.record.id, email: login?.email)
    }

    /// Sets the reader's storefront: the prices, currency and tax of what they buy from now on
    /// (what they bought stands; a subscription renews in the storefront it was bought in).
    /// - Throws: `invalid_request` for text that is no country code; `unknown_account`.
    public func setStorefront(_ text: String, accountId: String) async throws -> AccountSummary {
        let code = try Self.storefrontCode(text)
        guard try await database.write({ try await AccountRows($0).setStorefront(code, of: accountId) }) else { throw StoreError.unknownAccount(accountId) }
        changes.committed(accountId)
        logger.info("storefront chosen", metadata: ["account": "\(accountId)", "storefront": "\(code)"])
        return try await summary(of: accountId)
    }

    /// The storefront the account's holder chose; nil: none.
    public func storefront(of accountId: String) async throws -> String? {
        try await database.read { try await AccountRows($0).find(accountId)?.storefront }
    }

    static func storefrontCode(_ text: String) throws -> String {
        try RequestText.check(text, field: "storefront", maxBytes: 16)
        guard let code = StorefrontCountry.code(text) else {
            throw StoreError.invalidRequest("storefront must be a country code like DE or US (ISO 3166-1 alpha-2), not \"\(text.prefix(16))\"")
        }
        return code
    }

    /// The device a bearer token signs in, or nil when the store knows no such token (never
    /// issued, signed out, or its device removed).
    public func device(forToken token: String) async throws -> DeviceIdentity? {
        let hash = FileDigest.sha256(of: Data(token.utf8))
        if let known = tokens.device(forHash: hash) { return known }
        let mark = tokens.mark()
        let found = try await database.read { try await Accounts.device(tokenHash: hash, in: $0) }
        // A kind this version does not know (a later version's) signs in nothing here: taken for
        // an app, a sync password's key would have opened the API.
        guard let found, let kind = DeviceKind(rawValue: found.kind) else { return nil }
        // A browser's session ends on the server too, however long its cookie is kept.
        if kind == .web, clock.wallNow().timeIntervalSince(found.createdAt) > AccountPolicy.webSessionLifetime {
            return nil
        }
        let identity = DeviceIdentity(accountId: found.accountId, deviceId: found.id, kind: kind)
        tokens.remember(identity, forHash: hash, readAfter: mark)
        await noteSeen(found)
        return identity
    }

    /// The ID of the account a bearer token acts for, or nil when the store does not know the token.
    public func accountId(forToken token: String) async throws -> String? {
        try await device(forToken: token)?.accountId
    }

    /// The balance and what the account owns.
    /// - Parameter makingToken: whether to make the account's ``appAccountToken(of:)`` when it has
    ///   none (the account's own devices ask; the operator's look makes nothing).
    public func summary(of accountId: String, makingToken: Bool = false) async throws -> AccountSummary {
        let now = try await accountNow(accountId)
        var summary = try await database.read { db in
            guard let account = try await AccountRows(db).find(accountId) else {
                throw StoreError.unknownAccount(accountId)
            }
            let purchased = try await TransactionRows(db).list {
                $0.where("accountId", .equal, accountId).where("status", .equal, TransactionStatus.purchased.rawValue)
            }
            let owned = Array(Set(purchased.filter { $0.kind == .nonConsumable }.map(\.productId))).sorted()
            var latestExpiry: [String: Date] = [:]
            for record in purchased where record.kind == .subscription {
                if let expires = record.expiresDate, expires > latestExpiry[record.productId] ?? .distantPast {
                    latestExpiry[record.productId] = expires
                }
            }
            let subscriptions = latestExpiry.keys.sorted().map { id in
                SubscriptionStatus(productId: id, expiresDate: latestExpiry[id] ?? now, active: (latestExpiry[id] ?? now) > now)
            }
            var summary = AccountSummary(accountId: account.id, credits: account.credits, owned: owned, subscriptions: subscriptions)
            summary.storefront = account.storefront
            summary.appAccountToken = try await db.select().column("appAccountToken").from("account").where("id", .equal, accountId)
                .first()?.decode(column: "appAccountToken", as: String?.self)
            return summary
        }
        if makingToken, summary.appAccountToken == nil { summary.appAccountToken = try await appAccountToken(of: accountId) }
        return summary
    }

    /// The UUID the account's iOS app passes to StoreKit's purchase (`appAccountToken`), made the
    /// first time it is asked for: an App Store transaction that carries it is granted to this
    /// account only (``AppStoreBridge/claim(_:accountId:)``).
    /// - Returns: nil for a deleted account.
    public func appAccountToken(of accountId: String) async throws -> String? {
        let made = UUID().uuidString.lowercased()
        return try await database.write { db in
            // A deleted account gets none (its token was erased with it).
            try await AccountRows(db).giveAppAccountToken(made, to: accountId)
        }
    }

    /// The account an App Store `appAccountToken` was made for, if any.
    func account(forAppAccountToken token: String) async throws -> String? {
        try await database.read { try await AccountRows($0).owner(ofAppAccountToken: token) }
    }

    /// The account's change feed: its transactions written after `cursor` (a change number), in
    /// the order they were written, each once with its latest state. A transaction written again
    /// (approved, declined, revoked, refunded, its receipt signed again) comes again. The full walk
    /// from no cursor sees every transaction of the account once.
    ///
    /// With `wait`, a request with nothing after its cursor is held until the account changes (in
    /// any instance: see ``ChangeNotifier``) or `wait` passes, then answered with what is there.
    public func transactions(accountId: String, after cursor: String?, wait: Duration? = nil, catalog known: String? = nil, limit: Int = 100) async throws -> TransactionPage {
        guard let wait else { return try await page(accountId: accountId, after: cursor, limit: limit) }
        // The wait is measured on the monotonic clock. A change of the account's transactions
        // that brings nothing after the cursor (another instance's notice of a change this
        // poll's read already saw, or of an older one) waits out the rest instead of answering
        // empty early; any other wake (a removed device, the catalog, a stop) answers at once.
        let deadline = ContinuousClock.now + wait
        while true {
            switch try await lookForChanges(accountId: accountId, after: cursor, catalog: known, limit: limit) {
            case .page(let page):
                return page
            case .wait(let waiter):
                let woke = await waiter.wait(upTo: deadline - ContinuousClock.now, in: changes)
                if woke == .transactions, ContinuousClock.now < deadline { continue }
                if woke == .timeout { return try await quietPage(after: cursor) }
                return try await page(accountId: accountId, after: cursor, limit: limit)
            }
        }
    }

    /// What one look at the change feed found for a long poll.
    public enum FeedLook: Sendable {
        /// Something is after the cursor, or the device's catalog is not the one served: answer it.
        case page(TransactionPage)
        /// Nothing yet: the waiter, registered before the read, so a change committed between the
        /// read and the wait still wakes it. Wait on it, then look again after a change of the
        /// account's transactions, or answer ``page(accountId:after:limit:)`` after any other wake.
        case wait(ChangeNotifier.Waiter)
    }

    /// One look at the change feed after `cursor` for a long poll (see ``FeedLook``).
    /// - Parameter known: the ETag of the catalog the device holds; another one is answered at once.
    public func lookForChanges(accountId: String, after cursor: String?, catalog known: String?, limit: Int = 100) async throws -> FeedLook {
        let after = try Self.position(after: cursor)
        let waiter = changes.register(accountId)
        let found: [TransactionRecord]
        do {
            found = try await database.read { try await TransactionRows($0).changed(accountId: accountId, after: after, limit: limit + 1) }
        } catch {
            changes.unregister(waiter)
            throw error
        }
        // A device whose catalog is not the one served now is told at once, not after the wait.
        let served = try? await catalog.storeProducts().etag
        let catalogIsNew = known.map { known in served.map { !TransactionPage.sameCatalog(known, $0) } ?? false } ?? false
        guard found.isEmpty, !catalogIsNew else {
            changes.unregister(waiter)
            return .page(try await page(of: found, after: cursor, limit: limit))
        }
        return .wait(waiter)
    }

    /// The change feed after `cursor`, as it is now.
    public func page(accountId: String, after cursor: String?, limit: Int = 100) async throws -> TransactionPage {
        let after = try Self.position(after: cursor)
        let found = try await database.read { try await TransactionRows($0).changed(accountId: accountId, after: after, limit: limit + 1) }
        return try await page(of: found, after: cursor, limit: limit)
    }

    /// The answer to a wait that ran out with nothing waking it: nothing after the cursor, with no
    /// read. The waiter was registered before the look that found nothing, and every commit of the
    /// account's transactions wakes it (on PostgreSQL a lost `LISTEN` wakes every poll), so the
    /// feed is as that look saw it. Replaces a second read a poll: the first was most of a waiting
    /// device's cost (docs/benchmarks.md section 8).
    public func quietPage(after cursor: String?) async throws -> TransactionPage {
        _ = try Self.position(after: cursor)
        return TransactionPage(transactions: [], cursor: cursor, hasMore: false, catalog: try? await catalog.storeProducts().etag)
    }

    /// Where a cursor points: -1 for none, so the full walk also sees a row no write numbered (one
    /// written by hand, at 0).
    private static func position(after cursor: String?) throws -> Int64 {
        guard let cursor, !cursor.isEmpty else { return -1 }
        guard let value = Int64(cursor), value >= 0 else { throw StoreError.invalidRequest("after must be a cursor from an earlier page") }
        return value
    }

    private func page(of found: [TransactionRecord], after cursor: String?, limit: Int) async throws -> TransactionPage {
        let records = try await receipts.withCurrentReceipts(found)
        let page = records.prefix(limit)
        return TransactionPage(
            transactions: page.map(\.wire), cursor: page.last?.changeSequence.map(String.init) ?? cursor,
            hasMore: records.count > limit, catalog: try? await catalog.storeProducts().etag)
    }

    /// The ledger of an account: charges and refunds, oldest first; it sums to what was really paid.
    public func charges(accountId: String) async throws -> [LedgerEntry] {
        try await database.read { db in try await TransactionRows(db).ledger { $0.where("accountId", .equal, accountId) } }
    }

    /// Whether other instances share this store and tell one another of their changes
    /// (PostgreSQL's LISTEN and NOTIFY); an SQLite store has one instance.
    public var hearsOtherInstances: Bool { database.engine == .postgres }

    /// Listens for the changes other instances announce, until cancelled or the connection drops
    /// (then it throws): `listening` once the LISTEN is in place, `received` with each payload
    /// (an account ID, or ``ChangeNotifier/catalogNotice``). Returns at once on SQLite.
    public func listenForChanges(logger: Logger, listening: @Sendable () -> Void, received: @Sendable (String) -> Void) async throws {
        try await database.listen(on: ChangeNotifier.channel, logger: logger, listening: listening, received: received)
    }
}
