import Foundation
import KioskCore
import SQLKit

/// A device code waiting for its approval (RFC 8628); only the codes' hashes are kept.
struct DeviceCodeRecord: Codable, Sendable {
    var deviceCodeHash: String
    var userCodeHash: String
    var deviceName: String
    var createdAt: Date
    var expiresAt: Date
    /// The account that approved it; set once.
    var approvedBy: String?
    /// 1 once the device took its token: a code signs in one device, once.
    var taken: Int64
}

extension Accounts {
    /// Deletes the codes `accountId` approved that no device took yet: a clean-up of the account's
    /// ways in (sign out everywhere, a reset, a disable, a deletion) must not leave one waiting.
    static func clearApprovedCodes(of accountId: String, in db: any SQLDatabase) async throws {
        try await db.delete(from: "deviceCode").where("approvedBy", .equal, accountId).where("taken", .equal, 0).run()
    }
}

/// Signing in a device without a keyboard, as TVs do (OAuth 2.0 Device Authorization Grant, RFC
/// 8628): the device asks for a pair of codes, shows the short one, and polls with the long one;
/// a signed-in device (or the account page) approves the short one for its account; the device's
/// next poll takes a token of its own, once.
extension Accounts {
    /// Letters a person reads off a screen and types without confusion: RFC 8628 §6.1's
    /// consonants (no vowels, so no words). Eight of them are 20⁸ ≈ 2.6 × 10¹⁰ codes.
    static let userCodeAlphabet = Array("BCDFGHJKLMNPQRSTVWXZ")

    /// A new pair of codes for a device called `name`; the caller adds where to enter the code.
    public func startDeviceCode(name: String?) async throws -> DeviceCodeGrant {
        let deviceCode = Store.randomHex(bytes: 32)
        var generator = SystemRandomNumberGenerator()
        let letters = (0..<8).map { _ in Self.userCodeAlphabet[Int.random(in: 0..<Self.userCodeAlphabet.count, using: &generator)] }
        let userCode = String(letters[0..<4]) + "-" + String(letters[4...])
        let now = clock.wallNow()
        let record = DeviceCodeRecord(
            deviceCodeHash: Self.hash(deviceCode), userCodeHash: Self.hash(Self.normalizedUserCode(userCode)),
            deviceName: NewDevice.cleanName(name, id: Store.randomHex(bytes: 2)), createdAt: now,
            expiresAt: now.addingTimeInterval(policy.deviceCodeLifetime), approvedBy: nil, taken: 0)
        try await database.write { db in
            // Codes a day past their expiry are of no use to anyone: cleared as new ones come.
            try await db.delete(from: "deviceCode").where("expiresAt", .lessThan, now.addingTimeInterval(-86_400)).run()
            try await db.insert(into: "deviceCode").model(record).run()
        }
        return DeviceCodeGrant(deviceCode: deviceCode, userCode: userCode, verificationUri: "", expiresIn: Int(policy.deviceCodeLifetime),
                               interval: policy.deviceCodeInterval)
    }

    /// A signed-in device approves the code a waiting device shows, for its own account.
    /// - Throws: `unknown_code` for a code no device waits with (wrong, expired, approved or used).
    public func approveDeviceCode(_ userCode: String, for accountId: String) async throws -> DeviceCodeApproved {
        let hash = Self.hash(Self.normalizedUserCode(userCode))
        let now = clock.wallNow()
        let name = try await database.write { db -> String? in
            // Under the account's lock: a deletion or a disabling committed meanwhile is seen here,
            // and one that comes after clears the approved codes.
            try await AccountRows(db).lockActive(accountId)
            return try await db.update("deviceCode").set("approvedBy", to: accountId)
                .where("userCodeHash", .equal, hash).where("approvedBy", .is, SQLLiteral.null)
                .where("taken", .equal, 0).where("expiresAt", .greaterThan, now)
                .returning("deviceName").first(decodingColumn: "deviceName", as: String.self)
        }
        guard let name else { throw StoreError.unknownUserCode }
        return DeviceCodeApproved(deviceName: name)
    }

    /// The waiting device's poll: its token once the code is approved, once.
    /// - Throws: `authorization_pending` until approved; `expired_token` once expired or taken;
    ///   `device_limit` when the approving account has no room (the device may poll again).
    public func takeDeviceCode(_ deviceCode: String) async throws -> DeviceSignIn {
        let hash = Self.hash(deviceCode)
        let now = clock.wallNow()
        let (signIn, replaced) = try await database.write { db -> (DeviceSignIn, Bool) in
            guard let code = try await db.select().column("*").from("deviceCode").where("deviceCodeHash", .equal, hash)
                .first(decoding: DeviceCodeRecord.self), code.taken == 0, code.expiresAt > now else {
                throw StoreError.expiredCode
            }
            guard let accountId = code.approvedBy else { throw StoreError.authorizationPending }
            // Taken under a compare-and-set: two polls at once give one token.
            guard try await db.update("deviceCode").set("taken", to: 1).where("deviceCodeHash", .equal, hash).where("taken", .equal, 0)
                .returning("taken").first() != nil else {
                throw StoreError.expiredCode
            }
            let (device, replaced) = try await addDevice(to: accountId, name: code.deviceName, replacing: nil, in: db)
            let email = try await Accounts.signIn(accountId: accountId, in: db)?.email
            return (DeviceSignIn(accountId: accountId, deviceId: device.record.id, token: device.token, email: email), replaced)
        }
        if replaced { devicesChanged(signIn.accountId) }
        return signIn
    }

    /// A user code as typed: capitals, without the hyphen or spaces a person may add or leave out.
    public static func normalizedUserCode(_ code: String) -> String {
        String(code.uppercased().filter { $0.isLetter })
    }

    static func hash(_ secret: String) -> String {
        FileDigest.sha256(of: Data(secret.utf8))
    }
}
