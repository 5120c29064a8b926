import Foundation
import KioskCore
import SQLKit

/// Offer codes (issue 65): the operator makes them, a reader redeems one for a product free (a
/// book, an issue, or one period of a subscription). The one writer of `offerCode` and
/// `offerCodeRedemption`.
///
/// - **Kept hashed.** A code's SHA-256 of its normalized text (``OfferCodeText``) is its row's key:
///   the codes leave the store once, in the answer that made them. A one-time code is 16 of 31
///   letters and digits no one mistakes for another (79 bits); a custom code is the operator's
///   word, guessable by design, which its limit bounds.
/// - **Once each, whatever the races.** A redemption is one write with its grant: the account's
///   redemption row (one per code and account), and the code's count moved only while under its
///   limit, not expired and not revoked (a compare-and-set); all of it or nothing.
/// - **Throttled** by the caller (the routes' limits per account and per address).
public struct OfferCodes: StoreOwner {
    let base: StoreBase

    static let alphabet = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789")
    static let maxBatch = 10_000

    /// Makes a batch of one-time codes, or one custom code with its limit.
    /// - Throws: `invalid_request` naming the field at fault; `unknown_product`; `code_taken` for a
    ///   custom code that exists already.
    public func create(_ request: AdminCodesRequest) async throws -> AdminCodesCreated {
        try RequestText.check(request.productId, field: "productId")
        // Off sale: every redemption would be refused.
        let product = try await sellable(request.productId)
        guard product.kind != .consumable else { throw StoreError.invalidRequest("a code gives a book, an issue or a subscription's period; \(product.id) is a credit pack") }
        let benefit = request.benefit ?? .free
        try Self.check(benefit, on: product)
        if let expires = request.expiresAt, expires <= clock.wallNow() {
            throw StoreError.invalidRequest("expiresAt is in the past; give a date codes may still be redeemed by")
        }
        if let expires = request.expiresAt, expires >= Date(timeIntervalSince1970: 7_258_118_400) {
            throw StoreError.invalidRequest("expiresAt must be before 2200; leave it out for codes that never expire")
        }
        let codes: [String]
        let limit: Int
        switch (request.count, request.code) {
        case (let count?, nil):
            guard (1...Self.maxBatch).contains(count) else { throw StoreError.invalidRequest("count must be from 1 to \(Self.maxBatch), not \(count)") }
            guard request.limit == nil || request.limit == 1 else { throw StoreError.invalidRequest("one-time codes are redeemed once each; leave out limit") }
            var generator = SystemRandomNumberGenerator()
            codes = (0..<count).map { _ in
                let characters = (0..<16).map { _ in Self.alphabet[Int(generator.next(upperBound: UInt64(Self.alphabet.count)))] }
                return stride(from: 0, to: 16, by: 4).map { String(characters[$0..<$0 + 4]) }.joined(separator: "-")
            }
            limit = 1
        case (nil, let code?):
            let normalized = OfferCodeText.normalized(code)
            guard (4...32).contains(normalized.count), code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                throw StoreError.invalidRequest("code must be 4 to 32 letters and digits (dashes allowed), such as HARBOR2026")
            }
            guard let wanted = request.limit, (1...1_000_000).contains(wanted) else {
                throw StoreError.invalidRequest("a custom code needs limit: how many accounts may redeem it, 1 to 1000000")
            }
            codes = [normalized]
            limit = wanted
        default:
            throw StoreError.invalidRequest("give count (one-time codes) or code and limit (one custom code), not both")
        }
        let batch = "batch_" + Store.randomHex(bytes: 6)
        let now = clock.wallNow()
        do {
            try await database.write { db in
                for code in codes {
                    try await db.raw(#"""
                        INSERT INTO "offerCode" ("id", "codeHash", "batch", "kind", "productId", "redemptionLimit", "redeemed", "expiresAt", "createdAt",
                            "benefit", "benefitValue")
                        VALUES (\#(bind: "code_" + Store.randomHex(bytes: 8)), \#(bind: Self.hash(OfferCodeText.normalized(code))), \#(bind: batch),
                                \#(bind: request.count == nil ? "custom" : "oneTime"), \#(bind: product.id), \#(bind: limit), 0,
                                \#(bind: request.expiresAt), \#(bind: now), \#(bind: benefit.kind), \#(bind: benefit.value))
                        """#).run()
                }
            }
        } catch where database.isUniqueViolation(error) {
            throw StoreError(.wrongState, code: "code_taken", message: "the code \(codes.first ?? "") exists already; choose another")
        }
        logger.notice("offer codes made", metadata: ["batch": "\(batch)", "product": "\(product.id)", "codes": "\(codes.count)", "benefit": "\(benefit.kind)"])
        return AdminCodesCreated(batch: batch, productId: product.id, codes: codes, limit: limit, expiresAt: request.expiresAt, benefit: benefit)
    }

    /// A benefit the product can take: an introductory offer only on a subscription that has one,
    /// 1 to 99 percent off (100 is `free`), an amount off below the price.
    private static func check(_ benefit: CodeBenefit, on product: Product) throws {
        switch benefit {
        case .free:
            return
        case .introductoryOffer:
            guard product.kind == .subscription, product.introductoryOffer != nil else {
                throw StoreError.invalidRequest("\(product.id) has no introductory offer for a code to give; give it one in the catalog, or choose another benefit")
            }
        case .percentOff(let percent):
            guard (1...99).contains(percent) else {
                throw StoreError.invalidRequest("percentOff must be 1 to 99, not \(percent) (a code that gives the product free is the free kind)")
            }
        case .amountOff(let cents):
            let price = try Store.cents(product.price)
            guard cents >= 1, cents < price else {
                throw StoreError.invalidRequest("amountOff must be at least 0.01 and less than \(product.id)'s price, \(Price.shown(cents: price, product.price.currency)), not \(Price.shown(cents: cents, product.price.currency))")
            }
        }
    }

    /// Every batch, newest first, with how many were redeemed.
    public func list() async throws -> [AdminCodeBatchRow] {
        struct Row: Decodable {
            var batch: String; var productId: String; var kind: String; var codes: Int; var limit: Int; var redeemed: Int
            var expiresAt: Date?; var revokedAt: Date?; var createdAt: Date; var benefit: String; var benefitValue: Int?
        }
        return try await database.read { db in
            try await db.raw(#"""
                SELECT "batch", MIN("productId") AS "productId", MIN("kind") AS "kind", CAST(COUNT(*) AS BIGINT) AS "codes",
                    CAST(SUM("redemptionLimit") AS BIGINT) AS "limit", CAST(SUM("redeemed") AS BIGINT) AS "redeemed",
                    MIN("expiresAt") AS "expiresAt", MIN("revokedAt") AS "revokedAt", MIN("createdAt") AS "createdAt",
                    MIN("benefit") AS "benefit", MIN("benefitValue") AS "benefitValue"
                FROM "offerCode" GROUP BY "batch" ORDER BY MIN("createdAt") DESC, "batch"
                """#).all(decoding: Row.self)
        }.map { AdminCodeBatchRow(batch: $0.batch, productId: $0.productId, kind: $0.kind, codes: $0.codes, limit: $0.limit, redeemed: $0.redeemed,
                                  expiresAt: $0.expiresAt, revokedAt: $0.revokedAt, createdAt: $0.createdAt,
                                  benefit: CodeBenefit(kind: $0.benefit, value: $0.benefitValue)) }
    }

    /// Withdraws every code of `batch` not yet redeemed: from now on each is refused. Redemptions
    /// made stand (what they granted is the reader's).
    /// - Returns: how many codes it withdrew; `unknown_batch` when none has that batch.
    public func revoke(batch: String) async throws -> Int {
        try RequestText.check(batch, field: "the batch in the path")
        let now = clock.wallNow()
        let (withdrawn, exists) = try await database.write { db in
            let exists = try await db.select().column("id").from("offerCode").where("batch", .equal, batch).first() != nil
            let rows = try await db.raw(#"""
                UPDATE "offerCode" SET "revokedAt" = \#(bind: now)
                WHERE "batch" = \#(bind: batch) AND "revokedAt" IS NULL AND "redeemed" < "redemptionLimit" RETURNING "id"
                """#).all()
            return (rows.count, exists)
        }
        guard exists else { throw StoreError(.unknownProduct, code: "unknown_batch", message: "no codes have the batch \(batch); kiosk admin codes lists them") }
        logger.notice("offer codes withdrawn", metadata: ["batch": "\(batch)", "codes": "\(withdrawn)"])
        return withdrawn
    }

    /// Redeems `code` for `accountId`: its product, free, signed and delivered as any purchase.
    ///
    /// The redemption's rows are written in the grant's own transaction (``Payments``' `alongside`):
    /// the account's redemption row and the code's count, moved only while under its limit, not
    /// expired and not withdrawn. Either all of it commits or nothing does, on either engine, so a
    /// crash can neither spend a code without its grant nor grant without spending it. The grant
    /// is keyed by the code and the account: redeemed again, it answers the same transaction.
    /// - Throws: `invalid_code` for a code that is unknown, used up, expired or withdrawn (one
    ///   answer for all four: a guesser learns nothing from it); `already_owned` when the account
    ///   holds the product (the code stays unused); `off_sale`.
    public func redeem(_ text: String, accountId: String) async throws -> RedeemCodeResponse {
        let normalized = OfferCodeText.normalized(text)
        guard (4...64).contains(normalized.count), text.utf8.count <= 128 else { throw Self.invalid }
        let (code, redeemedBefore, now) = try await live(normalized, accountId: accountId)
        // Off sale: refused before the code is spent (the operator withdraws its codes, or puts it back on sale).
        let product = try await sellable(code.productId)
        if let benefit = code.benefit, benefit.isUsedWhenBuying {
            throw StoreError(.wrongState, code: "code_used_when_buying",
                             message: "this code gives \(benefit.described(currency: product.price.currency)) on \(product.id): use it when buying (kiosk buy \(product.id) --code CODE, or the code field of the shop's buy page)")
        }
        let reference = "code:\(code.id):\(accountId)"
        if !redeemedBefore { try await refuseIfOwned(product, accountId: accountId) }
        let months = product.periodMonths ?? 1
        // A subscription's code gives one period from now (not an introductory offer's length).
        let period = Calendar.utc.date(byAdding: .month, value: months, to: now).map { (start: now, end: $0) }
        let granted = try await payments.grantPaid(
            productId: product.id, quantity: 1, accountId: accountId, reference: reference, method: PaidBy.code.rawValue,
            amountCents: 0, currency: product.price.currency, period: product.kind == .subscription ? period : nil,
            offer: product.kind == .subscription ? (type: "offerCode", period: "P\(months)M") : nil,
            alongside: { record, db in
                // Owned meanwhile (a purchase in between): the code is not spent on a free re-buy.
                if record.isFreeRebuy { throw Self.owned(product.id) }
                try await Self.spend(Use(codeId: code.id, benefit: .free), accountId: accountId, transactionId: record.id, now: now, in: db)
                return true
            }).record
        logger.info("offer code redeemed", metadata: ["code": "\(code.id)", "product": "\(product.id)", "transaction": "\(granted.id)"])
        let answered = try await receipts.withCurrentReceipts([granted])[0]
        return RedeemCodeResponse(productId: product.id, transaction: answered.wire)
    }

    /// A code to use when buying `product`: its benefit, once it is found live and for that product.
    struct Use: Sendable {
        var codeId: String
        var benefit: CodeBenefit
        /// The web checkout of this account's that holds the code reserved, when it does.
        var reservedIntent: String? = nil
    }

    /// Checks a code given with a purchase of `product` (``Payments``' `pay`): live, for that product,
    /// of a kind used when buying, not used by this account before. It is spent by ``spend(_:accountId:transactionId:now:in:)``
    /// in the purchase's own write, which checks it again.
    /// - Throws: `invalid_code` (unknown, used up, expired, withdrawn, or used by this account);
    ///   `code_for_another_product`; `code_redeemed_alone` for a code that gives its product free.
    /// - Parameter reservedByCheckout: a web checkout asks: the code its own open checkout reserved
    ///   is answered with that checkout (the reader's second click), not refused.
    func use(_ text: String, for product: Product, accountId: String, reservedByCheckout: Bool = false) async throws -> Use {
        try RequestText.check(text, field: "offerCode", maxBytes: 128)
        let normalized = OfferCodeText.normalized(text)
        guard (4...64).contains(normalized.count) else { throw Self.invalid }
        let (code, redeemedBefore, _) = try await live(normalized, accountId: accountId)
        var reservedIntent: String?
        if redeemedBefore {
            let spentFor = try await database.read { db in
                try await db.select().column("transactionId").from("offerCodeRedemption").where("codeId", .equal, code.id)
                    .where("accountId", .equal, accountId).first()?.decode(column: "transactionId", as: String?.self)
            } ?? nil
            guard reservedByCheckout, let spentFor, spentFor.hasPrefix("intent:") else { throw Self.invalid }
            reservedIntent = String(spentFor.dropFirst("intent:".count))
        }
        guard code.productId == product.id else {
            throw StoreError(.invalidRequest, code: "code_for_another_product", message: "this code is for \(code.productId), not \(product.id); buy that product with it")
        }
        guard let benefit = code.benefit, benefit.isUsedWhenBuying else {
            throw StoreError(.invalidRequest, code: "code_redeemed_alone", message: "this code gives \(product.id) free: redeem it on its own (kiosk redeem-code CODE), nothing to pay")
        }
        return Use(codeId: code.id, benefit: benefit, reservedIntent: reservedIntent)
    }

    /// The code a web checkout reserved, by its ID, for pricing that checkout again.
    func reserved(_ codeId: String) async throws -> Use? {
        struct Row: Decodable { var benefit: String; var benefitValue: Int? }
        guard let row = try await database.read({ db in
            try await db.select().columns("benefit", "benefitValue").from("offerCode").where("id", .equal, codeId).first(decoding: Row.self)
        }), let benefit = CodeBenefit(kind: row.benefit, value: row.benefitValue) else { return nil }
        return Use(codeId: codeId, benefit: benefit)
    }

    /// A code's row as a redemption reads it.
    struct CodeRow: Decodable {
        var id: String; var productId: String; var redemptionLimit: Int; var redeemed: Int; var expiresAt: Date?; var revokedAt: Date?
        var benefitKind: String; var benefitValue: Int?
        var benefit: CodeBenefit? { CodeBenefit(kind: benefitKind, value: benefitValue) }
    }

    /// The code with this normalized text, whether the account redeemed it before, and the
    /// account's time (a subscription's dates are on it: the sandbox may run it ahead).
    /// - Throws: `invalid_code` for an unknown code, or (not redeemed by this account before) a
    ///   used-up, expired or withdrawn one: one answer for all, before anything else is said of it
    ///   (an "already owned" would tell a guesser the code exists). The write checks again.
    private func live(_ normalized: String, accountId: String) async throws -> (CodeRow, redeemedBefore: Bool, now: Date) {
        guard let code = try await database.read({ db in
            try await db.select().columns("id", "productId", "redemptionLimit", "redeemed", "expiresAt", "revokedAt", "benefitValue")
                .column(SQLColumn("benefit"), as: "benefitKind").from("offerCode")
                .where("codeHash", .equal, Self.hash(normalized)).first(decoding: CodeRow.self)
        }) else { throw Self.invalid }
        let redeemedBefore = try await database.read { db in
            try await db.select().column("codeId").from("offerCodeRedemption").where("codeId", .equal, code.id).where("accountId", .equal, accountId).first()
        } != nil
        let now = try await accountNow(accountId)
        if !redeemedBefore, code.revokedAt != nil || code.redeemed >= code.redemptionLimit || (code.expiresAt.map { $0 <= now } ?? false) {
            throw Self.invalid
        }
        return (code, redeemedBefore, now)
    }

    /// Spends the code for `transactionId`, in the grant's or the purchase's own transaction: the
    /// account's redemption row (one per code and account: a second is refused by the key) and the
    /// code's count, moved only while under its limit, not expired and not withdrawn.
    /// - Throws: `invalid_code` when it is used up, expired or withdrawn: the whole write goes.
    static func spend(_ use: Use, accountId: String, transactionId: String, now: Date, in db: any SQLDatabase) async throws {
        try await db.raw(#"""
            INSERT INTO "offerCodeRedemption" ("codeId", "accountId", "transactionId", "redeemedAt")
            VALUES (\#(bind: use.codeId), \#(bind: accountId), \#(bind: transactionId), \#(bind: now))
            """#).run()
        let moved = try await db.raw(#"""
            UPDATE "offerCode" SET "redeemed" = "redeemed" + 1
            WHERE "id" = \#(bind: use.codeId) AND "redeemed" < "redemptionLimit" AND "revokedAt" IS NULL
                AND ("expiresAt" IS NULL OR "expiresAt" > \#(bind: now))
            RETURNING "id"
            """#).all()
        guard !moved.isEmpty else { throw Self.invalid }
    }

    /// The web's checkout reserved the code under its intent (``spend(_:accountId:transactionId:now:in:)``
    /// with `intent:<id>`): the grant its payment made takes the intent's place, in the grant's own transaction.
    static func attach(codeId: String, intent: String, to transactionId: String, in db: any SQLDatabase) async throws {
        try await db.raw(#"""
            UPDATE "offerCodeRedemption" SET "transactionId" = \#(bind: transactionId)
            WHERE "codeId" = \#(bind: codeId) AND "transactionId" = \#(bind: "intent:" + intent)
            """#).run()
    }

    /// A checkout that lapsed unpaid gives back the code it reserved: its redemption row and its
    /// count, both or neither (the count moves only when the row was there to delete).
    static func release(codeId: String, intent: String, in db: any SQLDatabase) async throws {
        let deleted = try await db.raw(#"""
            DELETE FROM "offerCodeRedemption" WHERE "codeId" = \#(bind: codeId) AND "transactionId" = \#(bind: "intent:" + intent) RETURNING "codeId"
            """#).all()
        guard !deleted.isEmpty else { return }
        try await db.raw(#"UPDATE "offerCode" SET "redeemed" = "redeemed" - 1 WHERE "id" = \#(bind: codeId) AND "redeemed" > 0"#).run()
    }

    /// A code on what the account holds would be spent for nothing: refused, the code kept.
    private func refuseIfOwned(_ product: Product, accountId: String) async throws {
        let owned: Bool
        switch product.kind {
        case .nonConsumable:
            owned = try await receipts.accountOwns(accountId, product)
        case .subscription:
            owned = try await database.read { try await SubscriptionRows($0).unended(accountId: accountId, among: [product.id]) } != nil
        case .consumable:
            owned = false
        }
        if owned { throw Self.owned(product.id) }
    }

    static func owned(_ productId: String) -> StoreError {
        StoreError(.wrongState, code: "already_owned", message: "the account has \(productId) already; the code stays unused for another product or reader")
    }

    static let invalid = StoreError(.invalidRequest, code: "invalid_code",
                                    message: "this code cannot be redeemed: it is unknown, used up, expired or withdrawn; check its letters, or ask whoever gave it")

    static func hash(_ normalized: String) -> String {
        FileDigest.sha256(of: Data(normalized.utf8))
    }
}
