import Crypto
import Foundation
import JWTKit
import KioskCore
import Logging
import SQLKit

/// The receipt signing keys every instance of a store shares, kept in its database.
///
/// The newest key that is not retired signs; every key that is not retired verifies and is listed
/// in `/.well-known/jwks.json`. `kiosk keys rotate` adds a key: instances pick it up within
/// ``refreshInterval`` (or at once, when they meet a receipt signed with a key they do not know),
/// and receipts signed with the older keys keep verifying everywhere until those are retired.
public actor SigningKeys: ReceiptKeySource {
    /// How old the keys an instance holds may be before it reads them again.
    public static let refreshInterval: TimeInterval = 5

    private let database: ServerDatabase
    private let logger: Logger
    /// The store whose receipts these keys sign: what every receipt carries and is checked for.
    public nonisolated let identity: StoreIdentity
    private var collection = JWTKeyCollection()
    private var loadedKIDs: [String] = []
    /// When the keys were last read, on the monotonic clock (a stepped wall clock must not stall or hurry reloads).
    private var loadedAt: ContinuousClock.Instant?
    /// The `kid` new receipts are signed with.
    public private(set) var signingKID = ""
    /// The body of `/.well-known/jwks.json`.
    private var published: ReceiptKeySet

    /// Loads the keys, creating the store's first one when there is none. A key file from an
    /// earlier Kiosk (`signing-key.json` in the data folder) is added to the keys whenever it is
    /// there and they lack it, dated by the file, so the receipts it signed keep verifying. It was
    /// read only when the database had no key yet: an instance without the file starting at the
    /// same moment made the first key, and the file was left unread for good, its receipts refused
    /// as never issued (3 of 4 starts of two instances, 2026-11-28), and a corrupt file went
    /// unnoticed. A key file whose key was retired leaves it retired.
    /// - Throws: ``ServerSetupError`` when the legacy key file exists but cannot be read.
    init(database: ServerDatabase, identity: StoreIdentity, legacyKeyFile: URL?, logger: Logger) async throws {
        self.database = database
        self.logger = logger
        self.identity = identity
        self.published = ReceiptKeySet(keys: [], identity: identity, retired: [])
        if let legacyKeyFile, let data = try SecretFile.read(legacyKeyFile, what: "signing key (receipts signed with it would stop verifying)") {
            guard let stored = try? JSONDecoder().decode(StoredKey.self, from: data), (try? EdDSA.PrivateKey(d: stored.d, curve: .ed25519)) != nil else {
                throw ServerSetupError(path: legacyKeyFile.path, problem: "is not a signing key Kiosk can read",
                    action: "restore it from a backup; only if it is lost for good, move it aside to make a new key (receipts signed with the old one will stop verifying)")
            }
            // Dated by the file, so a key another instance made a moment ago still signs; the old one verifies.
            let written = (try? FileManager.default.attributesOfItem(atPath: legacyKeyFile.path)[.modificationDate]) as? Date
            if try await Self.insert(stored, into: database, at: written ?? Date()) {
                logger.info("imported the signing key file into the database", metadata: ["kid": "\(stored.kid)"])
            }
        }
        if try await Self.list(in: database).isEmpty {
            try await Self.insertFirst(Self.newKey(), into: database)
        }
        try await reload()
    }

    /// Adds a new key that signs from now on; the older ones keep verifying.
    /// - Returns: the new key's `kid`.
    static func rotate(_ database: ServerDatabase) async throws -> String {
        let key = newKey()
        try await insert(key, into: database, at: Date())
        return key.kid
    }

    /// A new Ed25519 key, named by its public half.
    private static func newKey() -> StoredKey {
        let key = Curve25519.Signing.PrivateKey()
        let kid = "ed25519-" + FileDigest.sha256(of: key.publicKey.rawRepresentation).prefix(16)
        return StoredKey(kid: kid, d: base64URL(key.rawRepresentation))
    }

    /// Adds `key` as the store's first key, unless there is a key already. Instances starting
    /// together on a new database each found none and each added its own, so each re-issued the
    /// receipts the others signed (two keys in 3 of 3 starts of two instances, 2026-11-28). The
    /// look and the insert are one transaction, and instances take turns at it: SQLite's writer
    /// lock; on PostgreSQL, where two inserts in READ COMMITTED each miss the other's uncommitted
    /// row, the migrations' advisory lock. The later one finds the first one's key.
    /// - Returns: whether `key` was added.
    @discardableResult
    private static func insertFirst(_ key: StoredKey, into database: ServerDatabase) async throws -> Bool {
        try await database.write { db in
            if database.engine == .postgres { try await db.raw("SELECT pg_advisory_xact_lock(7215)").run() }
            guard try await db.raw(#"SELECT "kid" FROM "signingKey" LIMIT 1"#).first() == nil else { return false }
            return try await add(key, at: Date(), in: db)
        }
    }

    /// Retires a key: it signs and verifies nothing any more, and leaves the JWKS.
    ///
    /// The store still holds every purchase the key signed: the transaction list hands each one
    /// out again signed with a current key (see ``reissue(_:)``), so a restore brings them back;
    /// a device that still shows the old receipt for content is refused with a 401 naming the key.
    /// - Returns: how many live (purchased, not revoked) transactions carry a receipt signed by it.
    /// - Throws: ``ServerSetupError`` for an unknown key, or for the last key standing.
    @discardableResult
    static func retire(_ kid: String, in database: ServerDatabase, clock: StoreClock = .wallClock) async throws -> Int {
        try await database.write { db in
            let standing = try await db.raw(#"SELECT "kid" FROM "signingKey" WHERE "retiredAt" IS NULL"#).all().map { try $0.decode(column: "kid", as: String.self) }
            guard standing.contains(kid) else {
                throw ServerSetupError(path: kid, problem: "is not a signing key in use", action: "list the keys with kiosk keys list")
            }
            guard standing.count > 1 else {
                throw ServerSetupError(path: kid, problem: "is the only signing key", action: "run kiosk keys rotate first, then retire it")
            }
            try await db.raw(#"UPDATE "signingKey" SET "retiredAt" = \#(bind: clock.wallNow()) WHERE "kid" = \#(bind: kid)"#).run()
        }
        return try await livePurchases(signedBy: kid, in: database)
    }

    /// How many purchased transactions carry a receipt signed by `kid`. The kid lives only in each
    /// receipt's header, so the receipts are read a page at a time (an operator's command, rare).
    static func livePurchases(signedBy kid: String, in database: ServerDatabase) async throws -> Int {
        var count = 0
        var cursor: Int64 = 0
        while true {
            let after = cursor
            let page = try await database.read { db in
                try await db.raw(#"""
                    SELECT "sequence", "signedTransaction" FROM "storeTransaction"
                    WHERE "status" = 'purchased' AND "signedTransaction" IS NOT NULL AND "sequence" > \#(bind: after)
                    ORDER BY "sequence" LIMIT 5000
                    """#).all(decoding: SignedRow.self)
            }
            count += page.filter { KioskReceiptPolicy.keyID(of: $0.signedTransaction) == kid }.count
            guard let last = page.last?.sequence, page.count == 5000 else { return count }
            cursor = last
        }
    }

    private struct SignedRow: Decodable {
        var sequence: Int64
        var signedTransaction: String
    }

    /// Every key, oldest first, with when it was made and retired.
    static func list(in database: ServerDatabase) async throws -> [KeyInfo] {
        try await database.read { db in
            try await db.raw(#"SELECT "kid", "createdAt", "retiredAt" FROM "signingKey" ORDER BY "createdAt", "kid""#).all(decoding: KeyInfo.self)
        }
    }

    /// Every key, oldest first, with when it was made and retired (the console's list).
    public func list() async throws -> [KeyInfo] {
        try await Self.list(in: database)
    }

    public struct KeyInfo: Codable, Sendable {
        public var kid: String
        public var createdAt: Date
        public var retiredAt: Date?
    }

    /// The compact JWS of `claims`, signed with the newest key.
    public func sign(_ claims: ReceiptClaims) async throws -> String {
        try await refreshIfStale()
        return try await collection.sign(claims, kid: JWKIdentifier(string: signingKID))
    }

    /// The compact JWS of any payload (a notification, a subscription's renewal info), signed
    /// with the same newest key as receipts, so the same JWKS verifies it.
    public func sign<Payload: JWTPayload>(payload: Payload) async throws -> String {
        try await refreshIfStale()
        return try await collection.sign(payload, kid: JWKIdentifier(string: signingKID))
    }

    /// The policy for the keys this instance holds, read again when older than ``refreshInterval``.
    public func currentPolicy() async throws -> KioskReceiptPolicy? {
        try await refreshIfStale()
        return try await policy()
    }

    /// The keys read again for a `kid` this instance has not loaded (rotated on another instance a
    /// moment ago), at most once a second: forged receipts with made-up kids must not turn into
    /// a database read each. The store's identity is its own, so nothing else is worth a read.
    public func freshPolicy(after refusal: ReceiptRefusal, receipt: String) async throws -> KioskReceiptPolicy? {
        guard case .unknownKey(let kid?) = refusal, !loadedKIDs.contains(kid), lastMissReload.map({ ContinuousClock.now - $0 > .seconds(1) }) ?? true else {
            return nil
        }
        lastMissReload = ContinuousClock.now
        try await reload()
        return try await policy()
    }

    private var lastMissReload: ContinuousClock.Instant?

    /// `receipt` signed again with the signing key when the key that signed it is retired (or
    /// otherwise not one this store trusts now); nil when it still verifies as it is.
    ///
    /// The store, not the receipt, is the record of a purchase: the receipt is only its proof. So a
    /// receipt whose key was retired is re-issued with the same claims (read from the store's own
    /// copy, never from a receipt a client presented) rather than leaving the purchase unprovable.
    public func reissue(_ receipt: String) async throws -> String? {
        try await refreshIfStale()
        if let kid = KioskReceiptPolicy.keyID(of: receipt), loadedKIDs.contains(kid) { return nil }
        let claims = try await collection.unverified(receipt, as: ReceiptClaims.self)
        return try await collection.sign(claims, kid: JWKIdentifier(string: signingKID))
    }

    /// The public halves of every key that verifies, the retired `kid`s and the store's identity,
    /// read afresh: a client asks for them when it meets a `kid` it does not know, which may be a
    /// key another instance started signing with a moment ago. (Clients cache the set, so this is
    /// rare, and it is one small query.)
    public func jwks() async throws -> ReceiptKeySet {
        try await reload()
        return published
    }

    /// A policy that verifies under every key the database keeps, retired ones too: what
    /// `kiosk admin check` holds the stored receipts to (was each signed by this store?), never
    /// what a reader's receipt is accepted under.
    public func everyKeptKeyPolicy() async throws -> KioskReceiptPolicy? {
        let all = try await database.read { db in
            try await db.raw(#"SELECT "kid", "privateKey", "retiredAt" FROM "signingKey" ORDER BY "createdAt", "kid""#).all(decoding: KeyRow.self)
        }
        let keys: [JWK] = all.compactMap { row in
            guard let key = try? EdDSA.PrivateKey(d: row.privateKey, curve: .ed25519) else { return nil }
            return .octetKeyPair(.eddsa, identifier: JWKIdentifier(string: row.kid), x: Self.base64URL(key.publicKey.rawRepresentation), y: nil, curve: .ed25519)
        }
        guard !keys.isEmpty else { return nil }
        return try await KioskReceiptPolicy(keySet: ReceiptKeySet(keys: keys, identity: identity, retired: []))
    }

    // MARK: Loading

    private var cachedPolicy: KioskReceiptPolicy?

    private func policy() async throws -> KioskReceiptPolicy {
        if let cachedPolicy { return cachedPolicy }
        let policy = try await KioskReceiptPolicy(keySet: published)
        cachedPolicy = policy
        return policy
    }

    private func refreshIfStale() async throws {
        if loadedAt.map({ ContinuousClock.now - $0 > .seconds(Self.refreshInterval) }) ?? true { try await reload() }
    }

    /// Reads the keys again now (after a rotation by this process, say).
    public func reload() async throws {
        let all = try await database.read { db in
            try await db.raw(#"SELECT "kid", "privateKey", "retiredAt" FROM "signingKey" ORDER BY "createdAt", "kid""#).all(decoding: KeyRow.self)
        }
        loadedAt = ContinuousClock.now
        let rows = all.filter { $0.retiredAt == nil }
        let kids = rows.map(\.kid)
        guard kids != loadedKIDs else { return }
        let collection = JWTKeyCollection()
        var keys: [JWK] = []
        for row in rows {
            guard let key = try? EdDSA.PrivateKey(d: row.privateKey, curve: .ed25519) else {
                logger.error("a signing key in the database cannot be read; it is left out", metadata: ["kid": "\(row.kid)"])
                continue
            }
            await collection.add(eddsa: key, kid: JWKIdentifier(string: row.kid))
            keys.append(.octetKeyPair(.eddsa, identifier: JWKIdentifier(string: row.kid), x: Self.base64URL(key.publicKey.rawRepresentation), y: nil, curve: .ed25519))
        }
        guard let newest = keys.last?.keyIdentifier?.string else {
            throw ServerSetupError(path: database.location.description, problem: "holds no signing key that can be used",
                action: "run kiosk keys rotate to add one (receipts signed with retired keys stay invalid)")
        }
        self.collection = collection
        self.published = ReceiptKeySet(keys: keys, identity: identity, retired: all.filter { $0.retiredAt != nil }.map(\.kid))
        self.cachedPolicy = nil
        self.signingKID = newest
        if !loadedKIDs.isEmpty { logger.info("signing keys changed", metadata: ["signing": "\(newest)", "valid": "\(kids.count)"]) }
        self.loadedKIDs = kids
    }

    /// Adds `key`, made at `date`, unless a key of its `kid` is there already (retired or not).
    /// - Returns: whether it was added.
    @discardableResult
    private static func insert(_ key: StoredKey, into database: ServerDatabase, at date: Date) async throws -> Bool {
        try await database.write { db in
            // In turn with ``insertFirst(_:into:)``: on PostgreSQL a first key made while a legacy
            // key's import was uncommitted came after it, and an instance that loaded between the
            // two commits signed with the other key (one run of a busy-loop series).
            if database.engine == .postgres { try await db.raw("SELECT pg_advisory_xact_lock(7215)").run() }
            return try await add(key, at: date, in: db)
        }
    }

    /// The one insert of a key, in the caller's transaction; false when its `kid` is there already.
    private static func add(_ key: StoredKey, at date: Date, in db: any SQLDatabase) async throws -> Bool {
        try await db.raw(#"""
            INSERT INTO "signingKey" ("kid", "privateKey", "createdAt") VALUES (\#(bind: key.kid), \#(bind: key.d), \#(bind: date))
            ON CONFLICT ("kid") DO NOTHING RETURNING "kid"
            """#).first() != nil
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private struct KeyRow: Decodable {
        var kid: String
        var privateKey: String
        var retiredAt: Date?
    }

    /// The key file an earlier Kiosk kept in its data folder.
    private struct StoredKey: Codable {
        var kid: String
        /// The raw private key, base64url, as a JWK's `d`.
        var d: String
    }
}
