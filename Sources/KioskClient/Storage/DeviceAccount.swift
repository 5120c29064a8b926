import Foundation
internal import GRDB

/// The account this home acts for: its ID, its token and the email it signs in with, with the
/// cursors of its change feed, which count that one account's changes. Nothing else writes them.
struct DeviceAccount: Sendable {
    let database: ClientDatabase

    /// The account this home acts for, if it has one.
    func current() throws -> (id: String, token: String)? {
        try database.read { db in
            guard let id = try Setting.value(Setting.Key.accountID, in: db),
                  let token = try Setting.value(Setting.Key.accountToken, in: db) else { return nil }
            return (id, token)
        }
    }

    /// The store the account belongs to (its URL as this home last reached it); nil for none.
    func store() throws -> String? {
        try database.read { try Setting.value(Setting.Key.accountStore, in: $0) }
    }

    /// The account's store answered at a new address (its key set names the same issuer).
    func moveStore(to url: String) throws {
        try database.write { try Setting.set(Setting.Key.accountStore, to: url, in: $0) }
    }

    /// The email this home's account signs in with; nil for an anonymous account (or one linked by token).
    func email() throws -> String? {
        try database.read { try Setting.value(Setting.Key.accountEmail, in: $0) }
    }

    /// Forgets the account (its token, email and the cursors of its feed): `kiosk logout`.
    func forget() throws {
        _ = try database.write { db in
            try Setting.deleteAll(db, keys: [Setting.Key.accountID, Setting.Key.accountToken, Setting.Key.accountEmail, Setting.Key.accountStore] + Setting.Key.accountCursors)
        }
    }

    /// Stores the account of `store` and the email it signs in with (nil: none, or none known
    /// here), in one transaction.
    @discardableResult
    func saveSignedIn(id: String, token: String, email: String?, store: String) throws -> (id: String, token: String) {
        try database.write { db in
            let saved = try Self.save(id: id, token: token, replacing: true, store: store, db)
            if let email {
                try Setting.set(Setting.Key.accountEmail, to: email, in: db)
            } else {
                _ = try Setting.deleteOne(db, key: Setting.Key.accountEmail)
            }
            return saved
        }
    }

    /// Stores the account of `store`; with `replacing` false an existing account wins and is returned.
    @discardableResult
    func save(id: String, token: String, replacing: Bool, store: String) throws -> (id: String, token: String) {
        try database.write { try Self.save(id: id, token: token, replacing: replacing, store: store, $0) }
    }

    private static func save(id: String, token: String, replacing: Bool, store: String, _ db: Database) throws -> (id: String, token: String) {
        if !replacing, let existingId = try Setting.value(Setting.Key.accountID, in: db),
           let existingToken = try Setting.value(Setting.Key.accountToken, in: db) {
            return (existingId, existingToken)
        }
        if try Setting.value(Setting.Key.accountID, in: db) != id {
            _ = try Setting.deleteAll(db, keys: Setting.Key.accountCursors)
        }
        try Setting.set(Setting.Key.accountID, to: id, in: db)
        try Setting.set(Setting.Key.accountToken, to: token, in: db)
        try Setting.set(Setting.Key.accountStore, to: store, in: db)
        return (id, token)
    }
}
