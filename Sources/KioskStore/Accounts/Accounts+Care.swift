import Foundation
import KioskCore
import SQLKit

/// One row of an account's audit list.
struct AccountAuditRecord: Codable, Sendable {
    var id: Int64?
    var accountId: String
    var at: Date
    var action: String
    var actor: String
    var detail: String

    var wire: AccountAuditEntry { AccountAuditEntry(at: at, action: action, actor: actor, detail: detail) }
}

extension Accounts {
    /// Adds a line to the account's audit list, in the caller's write.
    static func audit(_ accountId: String, _ action: String, by actor: String, _ detail: String, at now: Date, in db: any SQLDatabase) async throws {
        try await db.insert(into: "accountAudit").model(AccountAuditRecord(id: nil, accountId: accountId, at: now, action: action, actor: actor, detail: detail)).run()
    }

    static func auditList(_ accountId: String, in db: any SQLDatabase) async throws -> [AccountAuditEntry] {
        try await db.select().column("*").from("accountAudit").where("accountId", .equal, accountId).orderBy("id")
            .all(decoding: AccountAuditRecord.self).map(\.wire)
    }
}

/// The person's rights over their account (export, deletion) and the operator's help (disable,
/// enable, a reset code), each kept in the account's audit list.
extension Accounts {
    /// How long an operator's reset code works.
    static let resetCodeLifetime: TimeInterval = 86_400

    /// Everything the store holds about the account, as one document (`kiosk account export`).
    public func export(_ accountId: String) async throws -> AccountExport {
        let subscriptions = try await subscriptions.list(accountId: accountId)
        let now = clock.wallNow()
        return try await database.read { db in
            guard let account = try await AccountRows(db).find(accountId) else { throw StoreError.unknownAccount(accountId) }
            let signIn = try await Accounts.signIn(accountId: accountId, in: db)
            let devices = try await Accounts.devices(of: accountId, in: db)
            let transactions = try await TransactionRows(db).list { $0.where("accountId", .equal, accountId) }
            let ledger = try await TransactionRows(db).ledger { $0.where("accountId", .equal, accountId) }
            return AccountExport(
                exportedAt: now,
                account: .init(id: account.id, createdAt: account.createdAt, credits: account.credits, disabled: account.disabledAt != nil),
                signIn: signIn.map { .init(email: $0.email, createdAt: $0.createdAt, passwordChangedAt: $0.passwordChangedAt) },
                devices: devices.map { DeviceInfo(id: $0.id, name: $0.name, createdAt: $0.createdAt, lastSeenAt: $0.lastSeenAt, current: false) },
                transactions: transactions.map(\.wire), subscriptions: subscriptions,
                ledger: ledger.map { .init(transactionId: $0.transactionId, kind: $0.kind.rawValue, amountCents: $0.amountCents, currency: $0.currency, createdAt: $0.createdAt) },
                audit: try await Accounts.auditList(accountId, in: db))
        }
    }

    /// What a deletion erases and what it keeps, as `kiosk account delete` and docs/accounts.md say.
    static let erasedOnDeletion = [
        "the sign-in: email and password hash",
        "every device: names and token hashes (each is signed out)",
        "device codes the account approved and has not used",
        "the app account tokens an app gave its purchases",
        "auto-renewal of every subscription (each ends at its period's end)",
        "where the account is in each book (reading progress its devices synced)",
    ]
    static let keptOnDeletion = [
        "the ledger (charges and refunds) and the transactions' IDs, products, dates and amounts: bookkeeping law keeps them for years",
        "the account ID they are filed under, which no longer leads to a person",
        "the audit line saying the holder deleted the account",
    ]

    /// Erases the account's personal data and signs out every device; the money's records stay,
    /// filed under the account's ID alone. Subscriptions stop renewing first, so nothing is charged
    /// to an account nobody can reach.
    /// - Parameter password: the sign-in's password, asked again so that a device left unlocked
    ///   cannot delete the account; an anonymous account's token is all it has.
    public func delete(_ accountId: String, password: String?) async throws -> AccountDeleted {
        if let signIn = try await database.read({ try await Accounts.signIn(accountId: accountId, in: $0) }) {
            guard let password else { throw StoreError.passwordNeeded }
            guard try await base.passwords.verify(password, hash: signIn.passwordHash) else { throw StoreError.wrongPassword }
        }
        for subscription in try await subscriptions.list(accountId: accountId).subscriptions where subscription.autoRenew {
            do {
                _ = try await subscriptions.setAutoRenew(accountId: accountId, originalTransactionId: subscription.originalTransactionId, on: false)
            } catch {
                // The deletion goes on (the reader asked for it). A channel that could not be told
                // bills on: each renewal it sends for the deleted account is kept unmatched, for the
                // operator to cancel and refund (docs/channels.md).
                logger.warning("a deleted account's subscription could not be turned off at its channel",
                               metadata: ["subscription": "\(subscription.originalTransactionId)", "renewsThrough": "\(subscription.renewsThrough ?? "the store")"])
            }
        }
        let now = clock.wallNow()
        try await database.write { db in
            try await AccountRows(db).lock(accountId)
            try await db.delete(from: "device").where("accountId", .equal, accountId).run()
            try await db.delete(from: "signIn").where("accountId", .equal, accountId).run()
            try await Accounts.clearApprovedCodes(of: accountId, in: db)
            try await TransactionRows(db).forgetAppAccountTokens(of: accountId)
            try await SubscriptionRows(db).forgetAppAccountTokens(of: accountId)
            try await ReadingProgress.erase(accountId, in: db)
            try await AccountRows(db).markDeleted(accountId, at: now)
            try await Accounts.audit(accountId, "deleted", by: "holder", "personal data erased; the ledger kept", at: now, in: db)
        }
        devicesChanged(accountId)
        return AccountDeleted(accountId: accountId, erased: Self.erasedOnDeletion, kept: Self.keptOnDeletion)
    }

    /// The operator disables an account: every device is signed out and none signs in until it is
    /// enabled again. Its purchases and its ledger are untouched. An anonymous account's devices are
    /// kept, refused while it is disabled: their tokens are its only way in (a reset code needs a
    /// sign-in), and deleting them lost the account for good.
    public func disable(_ accountId: String, reason: String) async throws -> AccountAuditEntry {
        try await setDisabled(accountId, true, reason: reason)
    }

    /// The operator enables a disabled account; its holder signs in again.
    public func enable(_ accountId: String, reason: String) async throws -> AccountAuditEntry {
        try await setDisabled(accountId, false, reason: reason)
    }

    private func setDisabled(_ accountId: String, _ disabled: Bool, reason: String) async throws -> AccountAuditEntry {
        try RequestText.check(accountId, field: "the account ID in the path")
        let now = clock.wallNow()
        let detail = String(String.UnicodeScalarView(reason.unicodeScalars.filter { !NewDevice.isHidden($0) }.prefix(200)))
        let entry = try await database.write { db -> AccountAuditEntry in
            if try await AccountRows(db).lock(accountId).deletedAt != nil { throw StoreError.accountDeleted(accountId) }
            try await AccountRows(db).setDisabled(accountId, at: disabled ? now : nil)
            let anonymous = try await Accounts.signIn(accountId: accountId, in: db) == nil
            if disabled {
                if !anonymous { try await db.delete(from: "device").where("accountId", .equal, accountId).run() }
                // A code approved before and not yet taken would sign a device in all the same.
                try await Accounts.clearApprovedCodes(of: accountId, in: db)
            }
            let action = disabled ? "disabled" : "enabled"
            let effect = disabled ? (anonymous ? "its devices refused until enabled" : "every device signed out")
                : (anonymous ? "its devices may sign in again" : "may sign in again")
            try await Accounts.audit(accountId, action, by: "operator", detail.isEmpty ? effect : detail, at: now, in: db)
            return AccountAuditEntry(at: now, action: action, actor: "operator", detail: detail)
        }
        if disabled { devicesChanged(accountId) }
        return entry
    }

    /// The operator gives a locked-out holder a one-time code that sets a new password (it works
    /// for ``resetCodeLifetime``; a new code replaces the last). Only its hash is kept.
    public func issueResetCode(_ accountId: String) async throws -> ResetCodeIssued {
        try RequestText.check(accountId, field: "the account ID in the path")
        var generator = SystemRandomNumberGenerator()
        let letters = (0..<16).map { _ in Self.userCodeAlphabet[Int.random(in: 0..<Self.userCodeAlphabet.count, using: &generator)] }
        let code = stride(from: 0, to: 16, by: 4).map { String(letters[$0..<$0 + 4]) }.joined(separator: "-")
        let now = clock.wallNow()
        let expires = now.addingTimeInterval(Self.resetCodeLifetime)
        let email = try await database.write { db -> String in
            if try await AccountRows(db).lock(accountId).deletedAt != nil { throw StoreError.accountDeleted(accountId) }
            guard let signIn = try await Accounts.signIn(accountId: accountId, in: db) else { throw StoreError.noSignIn(accountId) }
            try await db.update("signIn").set("resetCodeHash", to: Self.hash(Self.normalizedUserCode(code))).set("resetExpiresAt", to: expires)
                .where("accountId", .equal, accountId).run()
            try await Accounts.audit(accountId, "reset_code_issued", by: "operator", "a one-time reset code, until \(ISO8601DateFormatter().string(from: expires))", at: now, in: db)
            return signIn.email
        }
        return ResetCodeIssued(accountId: accountId, email: email, code: code, expiresAt: expires)
    }

    /// The holder sets a new password with the operator's code: every device is signed out, the
    /// code is used up, and this device gets a token. A wrong email and a wrong code are one answer.
    /// - Parameter kind: `.web` for the account page's reset form: its browser gets a web session.
    public func resetPassword(_ request: PasswordResetRequest, kind: DeviceKind = .app) async throws -> DeviceSignIn {
        let email = (try? EmailAddress.normalized(request.email)) ?? request.email
        let newHash = try await base.passwords.hash(request.password)
        let codeHash = Self.hash(Self.normalizedUserCode(request.code))
        let now = clock.wallNow()
        let (device, accountId) = try await database.write { db -> (NewDevice, String) in
            // The code is taken under a compare-and-set: of two resets with it at once, one wins.
            guard let accountId = try await db.update("signIn")
                .set("passwordHash", to: newHash).set("passwordChangedAt", to: now)
                .set("resetCodeHash", to: SQLLiteral.null).set("resetExpiresAt", to: SQLLiteral.null)
                .where("email", .equal, email).where("resetCodeHash", .equal, codeHash).where("resetExpiresAt", .greaterThan, now)
                .returning("accountId").first(decodingColumn: "accountId", as: String.self) else {
                throw StoreError.resetRefused
            }
            try await AccountRows(db).lockActive(accountId)
            try await db.delete(from: "device").where("accountId", .equal, accountId).run()
            try await Accounts.clearApprovedCodes(of: accountId, in: db)
            try await Accounts.audit(accountId, "password_reset", by: "holder", "with a reset code; every device signed out", at: now, in: db)
            let (device, _) = try await addDevice(to: accountId, name: request.deviceName, replacing: nil, kind: kind, in: db)
            return (device, accountId)
        }
        devicesChanged(accountId)
        return DeviceSignIn(accountId: accountId, deviceId: device.record.id, token: device.token, email: email)
    }

    /// The account that signs in with `email`, for the operator's search.
    public func account(email: String) async throws -> String? {
        guard let normalized = try? EmailAddress.normalized(email) else { return nil }
        return try await database.read { try await Accounts.signIn(email: normalized, in: $0)?.accountId }
    }
}
