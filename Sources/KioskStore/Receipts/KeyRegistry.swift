import Foundation
import Logging

/// The signing keys of a store that may not be running, for the operator's `kiosk keys`: opened on
/// the store's database alone, without the rest of the store. Every instance reads the keys'
/// rows again within ``SigningKeys/refreshInterval``.
public struct KeyRegistry: Sendable {
    let database: ServerDatabase

    /// Opens the store's database (migrating it as a server would).
    public static func open(_ location: DatabaseLocation, logger: Logger) async throws -> KeyRegistry {
        KeyRegistry(database: try await ServerDatabase.open(location, logger: logger))
    }

    /// Every key, oldest first, with when it was made and retired.
    public func list() async throws -> [SigningKeys.KeyInfo] {
        try await SigningKeys.list(in: database)
    }

    /// Adds a new key that signs from now on; the older ones keep verifying.
    /// - Returns: the new key's `kid`.
    public func rotate() async throws -> String {
        try await SigningKeys.rotate(database)
    }

    /// Retires a key (see ``SigningKeys/retire(_:in:clock:)``).
    /// - Returns: how many live transactions carry a receipt signed by it.
    @discardableResult
    public func retire(_ kid: String) async throws -> Int {
        try await SigningKeys.retire(kid, in: database)
    }

    /// Closes the database's connections.
    public func close() async {
        await database.close()
    }
}
