import Foundation
internal import GRDB

/// The settings of a home (`setting` rows other than the account's): the remembered server, the
/// store's cached keys, the catalog's ETag and the cursors. Nothing else writes them; the account's
/// own rows belong to ``DeviceAccount``.
struct HomeSettings: Sendable {
    let database: ClientDatabase

    func value(_ key: String) throws -> String? {
        try database.read { try Setting.value(key, in: $0) }
    }

    func set(_ key: String, to value: String) throws {
        try database.write { try Setting.set(key, to: value, in: $0) }
    }

    func remove(_ key: String) throws {
        _ = try database.write { try Setting.deleteOne($0, key: key) }
    }

    /// Remembers the store this home talks to from now on. The keys and the catalog's ETag
    /// cached so far are another store's: they go, so that they never name this one (a purchase
    /// saved for it would carry the other store's key IDs; its catalog would look unchanged).
    func rememberServer(_ url: String) throws {
        try database.write { db in
            let previous = try Setting.value(Setting.Key.server, in: db)
            try Setting.set(Setting.Key.server, to: url, in: db)
            // A home that knew no store keeps what this one's first answers cached.
            if let previous, previous != url {
                _ = try Setting.deleteAll(db, keys: [Setting.Key.jwks, Setting.Key.catalogETag])
            }
        }
    }

    /// Whether purchases are allowed on this device (a device restriction, like parental
    /// controls); unset counts as on.
    func paymentsEnabled() throws -> Bool {
        try value(Setting.Key.paymentsEnabled) != "off"
    }

    /// The one writer of the payments setting: `kiosk config payments` and an app's switch both come here.
    func setPaymentsEnabled(_ enabled: Bool) throws {
        try set(Setting.Key.paymentsEnabled, to: enabled ? "on" : "off")
    }
}
