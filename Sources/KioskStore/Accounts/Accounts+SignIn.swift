import Foundation
import KioskCore
import SQLKit

/// An account's sign-in: the email it is found by and a bcrypt hash of its password (``Passwords``).
struct SignInRecord: Codable, Sendable {
    var accountId: String
    var email: String
    var passwordHash: String
    var createdAt: Date
    var passwordChangedAt: Date
    /// The SHA-256 of a one-time reset code the operator gave, and when it stops working.
    var resetCodeHash: String?
    var resetExpiresAt: Date?
}

/// A sign-in checked and hashed, before the write that keeps it.
struct NewSignIn: Sendable {
    let email: String
    let passwordHash: String

    func record(accountId: String, now: Date) -> SignInRecord {
        SignInRecord(accountId: accountId, email: email, passwordHash: passwordHash, createdAt: now, passwordChangedAt: now)
    }
}

extension Accounts {
    static func signIn(email: String, in db: any SQLDatabase) async throws -> SignInRecord? {
        try await db.select().column("*").from("signIn").where("email", .equal, email).first(decoding: SignInRecord.self)
    }

    static func signIn(accountId: String, in db: any SQLDatabase) async throws -> SignInRecord? {
        try await db.select().column("*").from("signIn").where("accountId", .equal, accountId).first(decoding: SignInRecord.self)
    }
}

extension Accounts {
    /// Checks a sign-in's email and password and hashes the password (off the writer).
    func newSignIn(_ details: SignInDetails) async throws -> NewSignIn {
        let email = try EmailAddress.normalized(details.email)
        return NewSignIn(email: email, passwordHash: try await base.passwords.hash(details.password))
    }

    /// Gives an anonymous account a sign-in; it keeps its purchases and its devices. The asking
    /// device takes the name `details` gives, if any.
    /// - Throws: `has_sign_in` when it has one; `email_taken` when another account signs in with that email.
    public func addSignIn(to device: DeviceIdentity, _ details: SignInDetails) async throws -> String {
        // The refusals that cost nothing come before the hash, which costs a quarter second.
        let email = try EmailAddress.normalized(details.email)
        _ = try Passwords.normalized(details.password)
        try await database.read { db in
            if try await Accounts.signIn(accountId: device.accountId, in: db) != nil { throw StoreError.hasSignIn(device.accountId) }
            if try await Accounts.signIn(email: email, in: db) != nil { throw StoreError.emailTaken(email) }
        }
        let login = try await newSignIn(details)
        let now = clock.wallNow()
        let accountId = device.accountId
        try await database.write { db in
            try await AccountRows(db).lockActive(accountId)
            if try await Accounts.signIn(accountId: accountId, in: db) != nil { throw StoreError.hasSignIn(accountId) }
            if try await Accounts.signIn(email: login.email, in: db) != nil { throw StoreError.emailTaken(login.email) }
            try await db.insert(into: "signIn").model(login.record(accountId: accountId, now: now)).run()
            try await Accounts.askToConfirm(login.email, of: accountId, policy: base.accountPolicy, at: now, in: db)
            if let name = details.deviceName {
                try await db.update("device").set("name", to: NewDevice.cleanName(name, id: device.deviceId)).where("id", .equal, device.deviceId).run()
            }
        }
        return login.email
    }

    /// Signs a device in with an email and a password: it gets a token of its own.
    ///
    /// A wrong email and a wrong password are one answer (``StoreError/signInRefused``) in the
    /// same time: the password is checked against a decoy hash when the email is unknown. The
    /// caller limits the attempts (per email and per address) before asking.
    /// - Throws: `invalid_credentials`; `device_limit` with the devices' names.
    public func signIn(_ request: SignInRequest, kind: DeviceKind = .app) async throws -> DeviceSignIn {
        let email = (try? EmailAddress.normalized(request.email)) ?? request.email
        let found = try await database.read { try await Accounts.signIn(email: email, in: $0) }
        guard try await base.passwords.verify(request.password, hash: found?.passwordHash), let found else {
            throw StoreError.signInRefused
        }
        let (device, replaced) = try await database.write { db in
            // The sign-in may have gone (deleted, password changed) since the check: checked again, unchanged.
            guard let still = try await Accounts.signIn(accountId: found.accountId, in: db), still.passwordHash == found.passwordHash else {
                throw StoreError.signInRefused
            }
            return try await addDevice(to: found.accountId, name: request.deviceName, replacing: request.replacing, kind: kind, in: db)
        }
        if replaced { devicesChanged(found.accountId) }
        return DeviceSignIn(accountId: found.accountId, deviceId: device.record.id, token: device.token, email: found.email)
    }

    /// The account whose email and password these are, without signing a device in: what a
    /// reading app sends with each OPDS request (HTTP Basic). The same bcrypt check, decoy and all,
    /// as ``signIn(_:kind:)``; a disabled or deleted account is refused as a wrong password is.
    /// - Throws: `invalid_credentials`.
    public func accountId(email: String, password: String) async throws -> String {
        let normalized = (try? EmailAddress.normalized(email)) ?? email
        let found = try await database.read { try await Accounts.signIn(email: normalized, in: $0) }
        guard try await base.passwords.verify(password, hash: found?.passwordHash), let found else {
            throw StoreError.signInRefused
        }
        let account = try await database.read { try await AccountRows($0).find(found.accountId) }
        guard let account, account.disabledAt == nil, account.deletedAt == nil else { throw StoreError.signInRefused }
        base.verifiedPasswords.remember(base.verifiedPasswords.key(email: normalized, password: password), accountId: found.accountId, passwordHash: found.passwordHash)
        return found.accountId
    }

    /// The account of `email` and `password` when this process checked that very pair within a
    /// few minutes and nothing about the sign-in or the account has changed since (no bcrypt; see
    /// ``VerifiedPasswords``); nil otherwise, and the caller checks them as a sign-in
    /// (``accountId(email:password:)``, under the sign-in limits).
    /// Whether this email and password were refused in the last few minutes and the sign-in is as
    /// it was then: a reading app still sending a password changed since sends it with every
    /// request, and were each counted against the email's sign-in limit, its owner would be locked
    /// out of every sign-in. Each other password tried still counts.
    public func recentlyRefused(email: String, password: String) async throws -> Bool {
        let normalized = (try? EmailAddress.normalized(email)) ?? email
        guard let refused = base.verifiedPasswords.refused(base.verifiedPasswords.key(email: normalized, password: password)) else { return false }
        let current = try await database.read { try await Accounts.signIn(email: normalized, in: $0)?.passwordHash }
        return current == refused.passwordHash
    }

    /// Remembers that this pair was refused (``recentlyRefused(email:password:)``).
    public func rememberRefused(email: String, password: String) async throws {
        let normalized = (try? EmailAddress.normalized(email)) ?? email
        let current = try await database.read { try await Accounts.signIn(email: normalized, in: $0)?.passwordHash }
        base.verifiedPasswords.rememberRefused(base.verifiedPasswords.key(email: normalized, password: password), passwordHash: current)
    }

    public func recentlyVerifiedAccountId(email: String, password: String) async throws -> String? {
        let normalized = (try? EmailAddress.normalized(email)) ?? email
        guard let known = base.verifiedPasswords.lookup(base.verifiedPasswords.key(email: normalized, password: password)) else { return nil }
        return try await database.read { db in
            guard let found = try await Accounts.signIn(email: normalized, in: db), found.accountId == known.accountId, found.passwordHash == known.passwordHash,
                  let account = try await AccountRows(db).find(found.accountId), account.disabledAt == nil, account.deletedAt == nil
            else { return nil }
            return found.accountId
        }
    }
}
