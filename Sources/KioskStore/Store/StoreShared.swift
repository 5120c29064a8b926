import Foundation
import SQLKit
import KioskCore

extension StoreOwner {
    /// The account's sandbox settings, or the defaults.
    static func sandbox(_ accountId: String, in db: any SQLDatabase) async throws -> SandboxAccount {
        try await db.select().column("*").from("sandboxAccount").where("accountId", .equal, accountId)
            .first(decoding: SandboxAccount.self) ?? .defaults(accountId)
    }

    /// The account's time: the store's clock plus the account's sandbox offset.
    func accountNow(_ accountId: String) async throws -> Date {
        // A production store keeps real time, whatever a sandbox run left in the database.
        guard environment == .sandbox else { return clock.now(offset: 0) }
        let offset = try await database.read { try await Self.sandbox(accountId, in: $0) }.clockOffset
        return clock.now(offset: offset)
    }

    /// The claims a purchased transaction's receipt carries.
    func claims(of record: TransactionRecord) -> ReceiptClaims {
        ReceiptClaims(
            transactionId: record.id, originalTransactionId: record.originalTransactionId, productId: record.productId,
            kind: record.kind, quantity: record.quantity, accountId: record.accountId, purchaseDate: record.purchaseDate ?? record.createdAt,
            expiresDate: record.expiresDate, environment: keys.identity.environment, issuer: keys.identity.issuer,
            appAccountToken: record.appAccountToken)
    }


    func transaction(_ id: String) async throws -> TransactionRecord {
        guard let record = try await database.read({ try await $0.storeTransaction(id) }) else {
            throw StoreError.unknownTransaction(id)
        }
        return record
    }

    func product(_ id: String) async throws -> Product {
        guard let product = try await catalog.storeProducts().products[id] else { throw StoreError.unknownProduct(id) }
        return product
    }

    /// A product that can be sold now: in the catalog and not off sale.
    func sellable(_ id: String) async throws -> Product {
        let product = try await product(id)
        guard product.forSale != false else { throw StoreError.offSale(id) }
        return product
    }

}

extension Store {

    /// `yyyy-MM-dd` in UTC, as the catalog's publication dates and the sales figures count days.
    static func day(_ date: Date) -> String {
        SubscriptionCoverage.day(date)
    }

    /// Two stored dates are the same instant (to the millisecond both engines keep).
    static func sameInstant(_ a: Date?, _ b: Date?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return abs(a.timeIntervalSince(b)) < 0.001
    }

    /// "4.99" → 499. The catalog loader has already checked the format and bounded the amount.
    static func cents(_ price: Price) throws -> Int {
        guard let cents = Price.cents(price.amount) else { throw StoreError.invalidRequest("bad price \(price.amount)") }
        return cents
    }

    /// `bytes` random bytes in lowercase hex (IDs, tokens, instance names).
    public static func randomHex(bytes: Int) -> String {
        FileDigest.hex(randomBytes(bytes))
    }

    /// `count` bytes from the system's generator, eight a call: each call is a `getrandom`
    /// system call, and a byte a call made a purchase's IDs 26 of them (1 % of the server's time).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    /// A new transaction's ID: `txn_` and 20 hex digits, the first 11 the milliseconds since 1970
    /// and the last 9 random (36 bits). Two IDs made in one millisecond collide once in about 70
    /// billion pairs; a collision is refused by the unique index and the payment decided again.
    ///
    /// **Performance layer.** Replaces 20 random hex digits: each new transaction then went into a
    /// random leaf of three indexes (the transaction's ID, its ledger entry's, and through them the
    /// pages written back at each commit); made in time order, they go to the right-hand leaf that
    /// the last one dirtied. See ``Store/newNotificationID()`` and docs/benchmarks.md for the figure.
    static func newTransactionID(now: Date = Date()) -> String {
        "txn_" + timeOrderedHex(now, randomDigits: 9)
    }

    /// A new notification's `notificationUUID`: a version 7 UUID (RFC 9562), in time order for
    /// the same reason as ``newTransactionID(now:)``; App Store's are version 4, and a publisher
    /// reads either as an opaque UUID.
    static func newNotificationID(now: Date = Date()) -> String {
        var bytes = randomBytes(16)
        let milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
        bytes[6] = 0x70 | (bytes[6] & 0x0f)
        bytes[8] = 0x80 | (bytes[8] & 0x3f)
        let hex = FileDigest.hex(bytes)
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }

    /// The milliseconds since 1970 in 11 hex digits (enough until the year 2527), then `randomDigits` random ones.
    private static func timeOrderedHex(_ now: Date, randomDigits: Int) -> String {
        let milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        let time = String(milliseconds, radix: 16)
        let padded = String(repeating: "0", count: max(0, 11 - time.count)) + time.suffix(11)
        return padded + randomHex(bytes: (randomDigits + 1) / 2).prefix(randomDigits)
    }
}

extension Calendar {
    public static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()
}
