import Foundation
import KioskCore
@testable import KioskServer
@testable import KioskStore
import KioskTestSupport
import SQLKit
import Testing

/// Prices per storefront and tax (issue 65): a reader's storefront, chosen by them, decides the
/// price, the currency and the tax; a storefront without a price is not sold in; each sale
/// records its country, rate and tax, and the quarter's tax report sums the ledger to the cent.
@Suite("Storefronts and tax")
struct StorefrontTaxTests: StoreSuite {
    static let plan = "com.kiosk.magazines.harbor-monthly.subscription.monthly"

    /// The sample store with the EU sample tax table, the small-engines book priced in the US,
    /// Germany and France only, and Harbor Monthly's plan in the US and France.
    static func withTaxes<T: Sendable>(engine: TestEngine, _ body: @Sendable (KioskServer, StoreHTTP, AccountCreated) async throws -> T) async throws -> T {
        try await Self.withStore(engine: engine, prepare: { store in
            try store.editCatalog("books.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.book {
                    products[index]["prices"] = ["US": ["price": "4.99", "currency": "USD"], "DE": ["price": "4.49", "currency": "EUR"],
                                                 "FR": ["price": "4.99", "currency": "EUR"]]
                }
            }
            try store.editCatalog("magazines.json") { products in
                for index in products.indices where products[index]["id"] as? String == Self.plan {
                    products[index]["prices"] = ["US": ["price": "2.49", "currency": "USD"], "FR": ["price": "2.29", "currency": "EUR"]]
                }
            }
        }, configure: { configuration in
            configuration.rateLimits = .off
            configuration.taxes = (try? TaxTable.load(SampleStore.repository.appendingPathComponent("deploy/tax/eu-epublications.json"))) ?? .none
        }, body)
    }

    static func account(_ http: StoreHTTP, storefront: String?) async throws -> AccountCreated {
        let created = try await http.createAccount()
        if let storefront {
            let set = try await http.send("PUT", "/v1/account/storefront", token: created.token, json: #"{"storefront": "\#(storefront)"}"#)
            #expect(set.status == 200, "\(Self.message(set))")
        }
        return created
    }

    static func ledger(_ server: KioskServer, _ accountId: String) async throws -> [LedgerEntry] {
        try await server.store.base.database.read { try await TransactionRows($0).ledger { $0.where("accountId", .equal, accountId) } }
    }

    @Test("the storefront decides price, currency and tax: Germany pays 4.49 EUR holding 7 % VAT (0.29), the receipt says so; Italy, with no price, is refused and charged nothing; no storefront pays the base price", arguments: TestEngine.all)
    func pricesPerStorefront(engine: TestEngine) async throws {
        try await Self.withTaxes(engine: engine) { server, http, anonymous in
            let de = try await Self.account(http, storefront: "de")
            #expect(try await http.send("GET", "/v1/account", token: de.token).decode(AccountSummary.self).storefront == "DE")
            let bought = try await http.pay(Self.book, token: de.token)
            #expect(bought.status < 300, "\(Self.message(bought))")
            let claims = try await Self.verified(bought, by: server)
            #expect(claims.currency == "EUR" && claims.price == 4490 && claims.storefront == "DE", "\(claims)")
            let entry = try #require(try await Self.ledger(server, de.accountId).first)
            // 4.49 × 7 ÷ 107 = 0.2937…: 0.29 of tax, worked by hand.
            #expect(entry.amountCents == 449 && entry.currency == "EUR" && entry.country == "DE" && entry.taxBasisPoints == 700 && entry.taxCents == 29)

            let it = try await Self.account(http, storefront: "IT")
            let refused = try await http.pay(Self.book, token: it.token)
            #expect(refused.status == 409 && (try? refused.decode(APIError.self).code) == "not_sold_here" && Self.message(refused).contains("Italy"), "\(Self.message(refused))")
            #expect(try await Self.ledger(server, it.accountId).isEmpty)

            // No storefront chosen: the catalog's base price, and no tax is guessed.
            let plain = try await http.pay(Self.book, token: anonymous.token)
            #expect(plain.status < 300)
            let base = try #require(try await Self.ledger(server, anonymous.accountId).first)
            #expect(base.amountCents == 499 && base.currency == "USD" && base.country == nil && base.taxCents == 0)

            // A code taking more off than the price here: refused, nothing charged.
            let made = try await http.send("POST", "/v1/admin/codes", token: server.adminToken,
                                           json: #"{"productId": "\#(Self.book)", "count": 1, "benefit": {"kind": "amountOff", "value": 450}}"#).decode(AdminCodesCreated.self)
            let de2 = try await Self.account(http, storefront: "DE")
            let tooMuch = try await http.send("POST", "/v1/payments", token: de2.token, json: """
                {"productId": "\(Self.book)", "quantity": 1, "paymentMethod": "approve", "idempotencyKey": "k1", "offerCode": "\(made.codes[0])"}
                """)
            #expect(tooMuch.status == 409 && (try? tooMuch.decode(APIError.self).code) == "code_other_currency" || (try? tooMuch.decode(APIError.self).code) == "code_exceeds_price", "\(Self.message(tooMuch))")
            #expect(try await Self.ledger(server, de2.accountId).isEmpty)
            // Not a country: refused with the field named.
            let bad = try await http.send("PUT", "/v1/account/storefront", token: it.token, json: #"{"storefront": "XX"}"#)
            #expect(bad.status == 400 && Self.message(bad).contains("storefront"), "\(Self.message(bad))")
            // Chosen at sign-up.
            let signUp = try await http.send("POST", "/v1/accounts", json: #"{"email": "fr@example.com", "password": "a long enough password", "storefront": "FR"}"#)
            #expect(signUp.status == 201, "\(Self.message(signUp))")
            let fr = try signUp.decode(AccountCreated.self)
            #expect(try await http.send("GET", "/v1/account", token: fr.token).decode(AccountSummary.self).storefront == "FR")
        }
    }

    @Test("a quarter's tax per country sums the ledger to the cent: books and a subscription in Germany, France and the US, a renewal and a refund", arguments: TestEngine.all)
    func taxReport(engine: TestEngine) async throws {
        try await Self.withTaxes(engine: engine) { server, http, _ in
            var accounts: [AccountCreated] = []
            for storefront in ["DE", "DE", "FR", "FR", "US"] {
                let account = try await Self.account(http, storefront: storefront)
                accounts.append(account)
                #expect(try await http.pay(Self.book, token: account.token).status < 300)
            }
            // A periodical in France: 2.29 EUR holding 2.1 % (0.05); renewed once.
            let reader = accounts[2]
            let subscribed = try await http.pay(Self.plan, token: reader.token)
            #expect(subscribed.status < 300, "\(Self.message(subscribed))")
            let period = try await Self.verified(subscribed, by: server)
            _ = try await http.send("POST", "/v1/admin/accounts/\(reader.accountId)/sandbox", token: server.adminToken,
                                    json: #"{"advanceSeconds": \#(Int(try #require(period.expires).timeIntervalSince(period.purchased)) + 60)}"#)
            #expect(try await http.send("POST", "/v1/admin/renewals/run", token: server.adminToken).status == 200)
            // One German book refunded.
            let refunded = try #require(try await Self.ledger(server, accounts[0].accountId).first)
            let refund = try await http.send("POST", "/v1/admin/transactions/\(refunded.transactionId)/refund", token: server.adminToken, json: #"{"reason": "test"}"#)
            #expect(refund.status == 200, "\(Self.message(refund))")

            // The quarter the ledger's entries were written in, by the store's own clock (a run
            // across a quarter's end compares each quarter's entries alone).
            let all = try await server.store.base.database.read { try await TransactionRows($0).ledger { $0 } }
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = .gmt
            let written = try #require(all.last?.createdAt)
            let quarter = "\(calendar.component(.year, from: written))Q\((calendar.component(.month, from: written) - 1) / 3 + 1)"
            let range = try #require(TaxQuarter.range(quarter))
            let ledger = all.filter { $0.createdAt >= range.start && $0.createdAt < range.end }
            let rows = try await http.send("GET", "/v1/admin/tax?quarter=\(quarter)", token: server.adminToken).decode([AdminTaxRow].self)
            // Every row is the ledger's entries of its country, rate and currency, summed.
            for row in rows {
                let entries = ledger.filter { $0.country == row.country && $0.taxBasisPoints == row.rateBasisPoints && $0.currency == row.currency }
                #expect(row.grossCents == entries.map(\.amountCents).reduce(0, +) && row.taxCents == entries.map(\.taxCents).reduce(0, +), "\(row)")
                #expect(row.netCents + row.taxCents == row.grossCents)
            }
            #expect(rows.map(\.grossCents).reduce(0, +) == ledger.map(\.amountCents).reduce(0, +), "the report holds the whole ledger")
            guard ledger.count == all.count else { return }
            let germany = try #require(rows.first { $0.country == "DE" })
            #expect(germany.sales == 2 && germany.refunds == 1 && germany.grossCents == 449 && germany.taxCents == 29, "\(germany)")
            let france = rows.filter { $0.country == "FR" }
            #expect(france.first { $0.rateBasisPoints == 210 }.map { $0.grossCents == 458 && $0.taxCents == 10 } == true, "two periods of 2.29 holding 0.05 each: \(france)")
            #expect(france.first { $0.rateBasisPoints == 550 }.map { $0.grossCents == 998 && $0.taxCents == 52 } == true, "two books of 4.99 holding 0.26 each: \(france)")
            #expect(rows.first { $0.country == "US" }.map { $0.taxCents == 0 && $0.rateBasisPoints == nil } == true, "the table names no US rate: no tax")
            let bad = try await http.send("GET", "/v1/admin/tax?quarter=2026Q5", token: server.adminToken)
            #expect(bad.status == 400 && Self.message(bad).contains("quarter"))
        }
    }
}
