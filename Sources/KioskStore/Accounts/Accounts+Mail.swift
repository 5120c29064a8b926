import Foundation
import KioskCore
import SQLKit

/// What an account's mail needs of its sign-in: a reset link asked for by email, a new address
/// confirmed, the choice of new-issue mail. Each secret a message carries is made as the message
/// is sent (``mailedCode(for:)``) and only its hash is kept, so the outbox holds none.
extension Accounts {
    /// How long an emailed reset code works: short, as the link in a mailbox may be read by others later.
    static let mailedResetLifetime: TimeInterval = 3_600
    /// At most one reset message per address in this time, whoever asks.
    static let resetMailSpacing: TimeInterval = 60

    /// A new sign-in's address is asked to be confirmed, in the write that adds it.
    static func askToConfirm(_ email: String, of accountId: String, policy: AccountPolicy, at now: Date, in db: any SQLDatabase) async throws {
        guard policy.sendsMail else { return }
        try await Mail.enqueue(.confirmAddress, to: email, accountId: accountId, values: [:], key: "confirm:\(accountId):\(UUID().uuidString)", at: now, in: db)
    }

    /// Someone asks for a password reset for `email`: when it is an account's sign-in (and no
    /// reset message went to it in the last minute), a message with a link and a code is queued.
    /// The answer is the same whether or not the address is known, and takes no longer.
    /// - Throws: `not_found`-like ``StoreError`` when the store sends no mail.
    public func requestPasswordReset(email text: String) async throws {
        guard base.accountPolicy.sendsMail else { throw StoreError.noMail }
        guard let email = try? EmailAddress.normalized(text) else { return }
        let now = clock.wallNow()
        try await database.write { db in
            guard let signIn = try await Accounts.signIn(email: email, in: db) else { return }
            let recent = try await db.raw(#"""
                SELECT 1 AS "found" FROM "mailMessage" WHERE "recipient" = \#(bind: email) AND "template" = \#(bind: MailTemplate.passwordReset.rawValue)
                AND "createdAt" > \#(bind: now.addingTimeInterval(-Self.resetMailSpacing))
                """#).first()
            guard recent == nil else { return }
            if try await AccountRows(db).find(signIn.accountId)?.disabledAt != nil { return }
            try await Mail.enqueue(.passwordReset, to: email, accountId: signIn.accountId, values: [:],
                                   key: "reset:\(signIn.accountId):\(UUID().uuidString)", at: now, in: db)
            try await Accounts.audit(signIn.accountId, "reset_requested", by: "holder", "a reset link by email", at: now, in: db)
        }
    }

    /// The secret a message carries, made now: a reset code (replacing any earlier one, working
    /// for an hour) or a confirmation token, its hash kept. Nil when the message has no secret
    /// or no longer applies (the address changed, or is confirmed already): it is then not sent.
    public func mailedCode(for message: Mail.Due) async throws -> (needed: Bool, code: String?) {
        guard let accountId = message.accountId else { return (false, nil) }
        let now = clock.wallNow()
        switch message.template {
        case .passwordReset:
            var generator = SystemRandomNumberGenerator()
            let letters = (0..<16).map { _ in Self.userCodeAlphabet[Int.random(in: 0..<Self.userCodeAlphabet.count, using: &generator)] }
            let code = stride(from: 0, to: 16, by: 4).map { String(letters[$0..<$0 + 4]) }.joined(separator: "-")
            let set = try await database.write { db in
                try await db.raw(#"""
                    UPDATE "signIn" SET "resetCodeHash" = \#(bind: Self.hash(Self.normalizedUserCode(code))), "resetExpiresAt" = \#(bind: now.addingTimeInterval(Self.mailedResetLifetime))
                    WHERE "accountId" = \#(bind: accountId) AND "email" = \#(bind: message.recipient) RETURNING "accountId"
                    """#).first() != nil
            }
            return (true, set ? code : nil)
        case .confirmAddress:
            let token = Store.randomHex(bytes: 24)
            let set = try await database.write { db in
                try await db.raw(#"""
                    UPDATE "signIn" SET "confirmTokenHash" = \#(bind: Self.hash(token))
                    WHERE "accountId" = \#(bind: accountId) AND "email" = \#(bind: message.recipient) AND "emailConfirmedAt" IS NULL RETURNING "accountId"
                    """#).first() != nil
            }
            return (true, set ? token : nil)
        default:
            return (false, nil)
        }
    }

    /// Confirms the address whose message carried `token` (its link). Once: the token is spent.
    /// - Returns: the confirmed address.
    /// - Throws: ``StoreError`` `invalid_request` for a token that confirms nothing (used, replaced, unknown).
    public func confirmAddress(token: String) async throws -> String {
        let now = clock.wallNow()
        let hash = Self.hash(token)
        let confirmed = try await database.write { db -> (String, String)? in
            guard let row = try await db.raw(#"""
                UPDATE "signIn" SET "emailConfirmedAt" = \#(bind: now), "confirmTokenHash" = NULL
                WHERE "confirmTokenHash" = \#(bind: hash) AND "emailConfirmedAt" IS NULL RETURNING "accountId", "email"
                """#).first() else { return nil }
            let accountId = try row.decode(column: "accountId", as: String.self)
            try await Accounts.audit(accountId, "email_confirmed", by: "holder", "by the link mailed to it", at: now, in: db)
            return (accountId, try row.decode(column: "email", as: String.self))
        }
        guard let confirmed else {
            throw StoreError.invalidRequest("this confirmation link has been used or replaced; sign in to ask for a new one")
        }
        return confirmed.1
    }

    /// Turns the account's new-issue mail on or off (off by default).
    /// - Throws: `no_sign_in` for an account without an address.
    public func setNewIssueMail(_ on: Bool, accountId: String) async throws {
        let changed = try await database.write { db in
            try await db.raw(#"UPDATE "signIn" SET "newIssueMail" = \#(bind: on ? 1 : 0) WHERE "accountId" = \#(bind: accountId) RETURNING "accountId""#).first() != nil
        }
        guard changed else { throw StoreError.noSignIn(accountId) }
    }
}
