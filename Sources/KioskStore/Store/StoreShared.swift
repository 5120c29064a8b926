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
        var claims = ReceiptClaims(
            transactionId: record.id, originalTransactionId: record.originalTransactionId, productId: record.productId,
            kind: record.kind, quantity: record.quantity, accountId: record.accountId, purchaseDate: record.purchaseDate ?? record.createdAt,
            expiresDate: record.expiresDate, environment: keys.identity.environment, issuer: keys.identity.issuer,
            appAccountToken: record.appAccountToken, offerType: record.offerType, offerPeriod: record.offerPeriod)
        // What was paid and where: a receipt carries its currency, as the ledger does.
        if record.amountCents > 0 {
            claims.price = Int64(record.amountCents) * 10
            claims.currency = record.currency
        }
        claims.storefront = record.storefront
        return claims
    }


    func transaction(_ id: String) async throws -> TransactionRecord {
        guard let record = try await database.read({ try await TransactionRows($0).find(id) }) else {
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

    /// `count` bytes from the system's generator, eight a call. Replaces a call a byte: each call
    /// is a `getrandom` system call, a transaction ID took 10, and the kernel's generator was
    /// 0.95 % of the server's samples under the purchases bench (2026-11-27).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    static func newTransactionID() -> String { "txn_" + randomHex(bytes: 10) }

    /// A random (version 4) UUID in lowercase, from ``randomBytes(_:)``.
    ///
    /// **Performance layer.** Replaces `UUID()` for a notification's ID: Foundation's opened,
    /// read and closed /dev/urandom for each one, one `openat` a purchase (`perf stat`, 2026-11-30).
    static func newUUID() -> String {
        var bytes = randomBytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
        return UUID(uuid: uuid).uuidString.lowercased()
    }
}

extension Calendar {
    public static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()
}
