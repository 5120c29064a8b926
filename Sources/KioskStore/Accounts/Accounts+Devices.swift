import Crypto
import Foundation
import KioskCore
import SQLKit

/// One device of an account: its own token (kept as a SHA-256), the name it chose, when it was
/// signed in and last seen.
struct DeviceRecord: Codable, Sendable {
    var id: String
    var accountId: String
    var tokenHash: String
    var name: String
    var createdAt: Date
    var lastSeenAt: Date
    /// `app`, or `web` for the account page's session in a browser.
    var kind: String
}

/// A device about to be signed in, and its token, which leaves the store only in the answer.
struct NewDevice: Sendable {
    /// A control or format character: not shown as itself, or changing how what follows is shown.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        // U+2800, the braille pattern blank, draws nothing and is no space.
        if scalar.properties.isDefaultIgnorableCodePoint || scalar.value == 0x2800 { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned: return true
        default: return false
        }
    }

    let token: String
    let record: DeviceRecord

    /// - Parameter token: the device's token when the caller made it (a sync password's key);
    ///   by default 32 random bytes.
    init(accountId: String, name: String?, now: Date, kind: DeviceKind = .app, token: String = Store.randomHex(bytes: 32)) {
        self.token = token
        let id = "dev_" + Store.randomHex(bytes: 8)
        record = DeviceRecord(id: id, accountId: accountId, tokenHash: FileDigest.sha256(of: Data(token.utf8)),
                              name: Self.cleanName(name, id: id), createdAt: now, lastSeenAt: now, kind: kind.rawValue)
    }

    /// The name as the list shows it: one line of at most 64 characters; the device's ID's tail when empty.
    static func cleanName(_ name: String?, id: String) -> String {
        // No controls (C0 and C1) and no format characters (bidi overrides among them), which
        // could make a listed name read as another.
        let line = String(String.UnicodeScalarView((name ?? "").unicodeScalars.filter { !NewDevice.isHidden($0) }))
            .trimmingCharacters(in: .whitespaces)
        // 64 scalars, not 64 characters: a character may carry any number of combining marks.
        return line.isEmpty ? "device \(id.suffix(4))" : String(String.UnicodeScalarView(line.unicodeScalars.prefix(64)))
    }
}

extension Accounts {
    /// The device a token's hash signs in, unless its account is disabled: an anonymous account's
    /// devices are kept while it is disabled (their tokens are its only way back in) and refused here.
    static func device(tokenHash: String, in db: any SQLDatabase) async throws -> DeviceRecord? {
        try await db.raw(#"""
            SELECT "device".* FROM "device" JOIN "account" ON "account"."id" = "device"."accountId"
            WHERE "device"."tokenHash" = \#(bind: tokenHash) AND "account"."disabledAt" IS NULL
            """#).first(decoding: DeviceRecord.self)
    }

    static func devices(of accountId: String, in db: any SQLDatabase) async throws -> [DeviceRecord] {
        try await db.select().column("*").from("device").where("accountId", .equal, accountId)
            .orderBy("createdAt").orderBy("id").all(decoding: DeviceRecord.self)
    }
}

extension Accounts {
    /// How many devices an account may have, and how sign-ins are checked.
    var policy: AccountPolicy { base.accountPolicy }

    /// The account's devices, oldest first; `current` marks the one asking.
    public func devices(of accountId: String, current: String?) async throws -> DeviceList {
        let (rows, email) = try await database.read { db in
            (try await Accounts.devices(of: accountId, in: db), try await Accounts.signIn(accountId: accountId, in: db)?.email)
        }
        return DeviceList(
            devices: rows.map { DeviceInfo(id: $0.id, name: $0.name, createdAt: $0.createdAt, lastSeenAt: $0.lastSeenAt, current: $0.id == current, kind: $0.kind) },
            limit: policy.maxDevices, email: email)
    }

    /// Signs a device out at once: its token is refused from its next request on, on every
    /// instance, and its waiting long poll ends (``ChangeNotifier/devicesChanged(_:)``).
    /// - Parameters:
    ///   - idOrName: the device's ID, or its name when no other device of the account has it.
    ///   - force: remove the last device of an account without a sign-in all the same.
    /// - Returns: the removed device.
    /// - Throws: `last_device` for the last device of an account without a sign-in that holds
    ///   something, unless `force`: its token is the account's only way in (a reset code needs a
    ///   sign-in), so the account and all it paid for would be lost for good.
    @discardableResult
    public func removeDevice(_ idOrName: String, of accountId: String, force: Bool = false) async throws -> DeviceInfo {
        let removed = try await database.write { db in
            let account = try await AccountRows(db).lock(accountId)
            let devices = try await Accounts.devices(of: accountId, in: db)
            let device = try Self.pick(idOrName, among: devices)
            if !force, devices.count == 1, try await Accounts.signIn(accountId: accountId, in: db) == nil {
                let holds = try await db.select().column("id").from("storeTransaction").where("accountId", .equal, accountId)
                    .where("status", .in, [TransactionStatus.purchased.rawValue, TransactionStatus.deferred.rawValue]).limit(1).first() != nil
                if holds || account.credits > 0 { throw StoreError.lastDevice(device.id) }
            }
            try await db.delete(from: "device").where("id", .equal, device.id).run()
            return device
        }
        devicesChanged(accountId)
        return DeviceInfo(id: removed.id, name: removed.name, createdAt: removed.createdAt, lastSeenAt: removed.lastSeenAt, current: false)
    }

    /// Every device of the account signed out, and the codes it approved that no device took yet
    /// (one would sign a device in after the clean-up): the page's "sign out everywhere".
    public func signOutEverywhere(_ accountId: String) async throws {
        try await database.write { db in
            try await AccountRows(db).lock(accountId)
            try await db.delete(from: "device").where("accountId", .equal, accountId).run()
            try await Accounts.clearApprovedCodes(of: accountId, in: db)
        }
        devicesChanged(accountId)
    }

    /// `kiosk logout`: the device signs itself out.
    public func signOut(_ device: DeviceIdentity) async throws {
        try await database.write { db in
            try await db.delete(from: "device").where("id", .equal, device.deviceId).run()
        }
        devicesChanged(device.accountId)
    }

    /// Which device `idOrName` names among `devices`: its ID, else its only one of that name.
    static func pick(_ idOrName: String, among devices: [DeviceRecord]) throws -> DeviceRecord {
        if let byId = devices.first(where: { $0.id == idOrName }) { return byId }
        let named = devices.filter { $0.name == idOrName }
        guard named.count <= 1 else { throw StoreError.ambiguousDevice(idOrName, ids: named.map(\.id)) }
        guard let device = named.first else { throw StoreError.unknownDevice(idOrName) }
        return device
    }

    /// Adds a device to the account inside the caller's write, at most ``AccountPolicy/maxDevices``:
    /// the one over it is refused with the names to choose from, unless `replacing` names one to
    /// remove in the same step.
    /// - Returns: the new device, and whether one was replaced (the caller tells the instances once committed).
    func addDevice(to accountId: String, name: String?, replacing: String?, kind: DeviceKind = .app, token: String? = nil,
                   in db: any SQLDatabase) async throws -> (NewDevice, replaced: Bool) {
        try await AccountRows(db).lockActive(accountId)
        var existing = try await Accounts.devices(of: accountId, in: db)
        var replaced = false
        // The account page keeps one browser signed in: a new sign-in there ends the last one,
        // so browsers closed without signing out do not fill the device list.
        if kind == .web {
            let earlier = existing.filter { $0.kind == DeviceKind.web.rawValue }
            for device in earlier { try await db.delete(from: "device").where("id", .equal, device.id).run() }
            existing.removeAll { $0.kind == DeviceKind.web.rawValue }
            replaced = !earlier.isEmpty
        }
        if let replacing {
            let gone = try Self.pick(replacing, among: existing)
            try await db.delete(from: "device").where("id", .equal, gone.id).run()
            existing.removeAll { $0.id == gone.id }
            replaced = true
        }
        // A sync password opens nothing but the account's reading places, so it has a limit of its
        // own and never takes a reading device's room.
        if kind == .sync {
            let passwords = existing.filter { $0.kind == DeviceKind.sync.rawValue }
            guard passwords.count < AccountPolicy.maxSyncPasswords else { throw StoreError.syncPasswordLimit(AccountPolicy.maxSyncPasswords) }
        } else {
            let devices = existing.filter { $0.kind != DeviceKind.sync.rawValue }
            guard devices.count < policy.maxDevices else {
                throw StoreError.deviceLimit(policy.maxDevices, devices: devices.map(\.name))
            }
        }
        let device = token.map { NewDevice(accountId: accountId, name: name, now: clock.wallNow(), kind: kind, token: $0) }
            ?? NewDevice(accountId: accountId, name: name, now: clock.wallNow(), kind: kind)
        try await db.insert(into: "device").model(device.record).run()
        return (device, replaced)
    }

    /// A device of `accountId` was removed: this process forgets its tokens and wakes its polls,
    /// and on PostgreSQL every other instance does the same.
    func devicesChanged(_ accountId: String) {
        tokens.forget(account: accountId)
        changes.devicesChanged(accountId)
    }

    /// Another instance removed a device of the account named in `notice` (its LISTEN payload):
    /// forgets the account's tokens here, then wakes its polls, which find their device gone.
    /// - Returns: false when `notice` is no such notice.
    public func heardDevicesChanged(_ notice: String) -> Bool {
        guard let accountId = ChangeNotifier.accountOfDevicesNotice(notice) else { return false }
        tokens.forget(account: accountId)
        changes.signal(accountId, .devices)
        return true
    }

    /// The LISTEN connection dropped and notices of removed devices may have been missed: every
    /// remembered token is looked up again.
    public func forgetRememberedTokens() {
        tokens.forgetAll()
    }

    /// Records that the device was seen, at most once an hour (a write per request would cost
    /// every request a write); a compare-and-set, so two instances seeing it at once write once.
    func noteSeen(_ device: DeviceRecord) async {
        let now = clock.wallNow()
        guard now.timeIntervalSince(device.lastSeenAt) >= 3600 || now < device.lastSeenAt else { return }
        do {
            try await database.write { db in
                try await db.update("device").set("lastSeenAt", to: now).where("id", .equal, device.id)
                    .where("lastSeenAt", .equal, device.lastSeenAt).run()
            }
        } catch {
            // Only the list's "last seen" is late; the request goes on.
            logger.warning("could not note when a device was last seen", metadata: ["device": "\(device.id)", "error": "\(Store.describe(error))"])
        }
    }
}

/// What signs in: a device's own client, or the account page in a browser.
public enum DeviceKind: String, Sendable, Equatable {
    /// `sync`: a reading app's progress sync (KOReader's kosync), signed in with a sync password
    /// (``Accounts/makeSyncPassword(for:name:)``); it opens nothing else.
    case app, web, sync
}

/// How accounts sign in, set when the store opens (`kiosk serve --max-devices --password-cost`).
public struct AccountPolicy: Sendable {
    /// bcrypt's cost for new passwords (see ``Passwords``).
    public var passwordCost: UInt8 = 12
    /// How many devices one account may have signed in at once.
    public var maxDevices = 10
    /// How long a device code (RFC 8628) may wait for its approval.
    public var deviceCodeLifetime: TimeInterval = 600
    /// How often a device polls with its code, in seconds.
    public var deviceCodeInterval = 5
    /// How many sync passwords (``DeviceKind/sync``) one account may have; they are not devices
    /// in ``maxDevices``'s count.
    public static let maxSyncPasswords = 5
    /// How long the account page's browser stays signed in, from its sign-in.
    public static let webSessionLifetime: TimeInterval = 12 * 3600
    /// Whether the store sends mail (`--smtp-url`): only then are confirmations queued and reset
    /// links offered.
    public var sendsMail = false

    public init() {}
}

/// A sync password, shown once: what a reader types into KOReader's progress sync.
public struct SyncPassword: Sendable {
    public var password: String
    public var deviceId: String
}

extension Accounts {
    /// Makes a password for a reading app's progress sync (KOReader's kosync), as one of the
    /// account's devices, removed as any device is. KOReader sends the MD5 of what the reader
    /// typed (its `x-auth-key`), never the password; the store keeps the SHA-256 of that MD5, as
    /// of any device's token. A password is 16 of 31 letters and digits no one mistakes for
    /// another (79 bits: random like a token, so its hash needs no slowing). The account's own
    /// password, bcrypt-hashed, could not be checked against an MD5, and should reach no sync
    /// server anyway.
    public func makeSyncPassword(for accountId: String, name: String?) async throws -> SyncPassword {
        let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<16).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] }
        let password = stride(from: 0, to: 16, by: 4).map { String(characters[$0..<$0 + 4]) }.joined(separator: "-")
        let key = Insecure.MD5.hash(data: Data(password.utf8)).map { String(format: "%02x", $0) }.joined()
        let device = try await database.write { db in
            // Numbered, so the reader can tell which one to sign out (the smallest number free).
            let taken = Set(try await Accounts.devices(of: accountId, in: db).filter { $0.kind == DeviceKind.sync.rawValue }.map(\.name))
            let base = name ?? "Reading progress sync"
            let numbered = (1...AccountPolicy.maxSyncPasswords + 1).map { "\(base) \($0)" }.first { !taken.contains($0) } ?? base
            return try await addDevice(to: accountId, name: numbered, replacing: nil, kind: .sync, token: key, in: db).0
        }
        return SyncPassword(password: password, deviceId: device.record.id)
    }
}
