import Foundation
import KioskCore
import SQLKit

/// A billing grace window with the subscription and account it belongs to, as the coverage rule
/// (``SeriesCoverage``) reads it: the store checks issue receipts and counts issue owners by it.
struct GraceWindowRow: Decodable, Sendable {
    var productId: String
    var accountId: String
    var startsAt: Date
    var endsAt: Date

    /// The window as a span that covers issues, by the same rule as a paid period.
    var window: SubscriptionCoverage { SubscriptionCoverage(purchased: startsAt, expires: endsAt) }
}

extension GraceWindowRow {
    /// The grace windows of one account, or of every account on subscriptions to `products`.
    static func list(accountId: String? = nil, products: [String]? = nil, in db: any SQLDatabase) async throws -> [GraceWindowRow] {
        var query = db.select().columns(SQLColumn("productId", table: "s"), SQLColumn("accountId", table: "g"),
                                          SQLColumn("startsAt", table: "g"), SQLColumn("endsAt", table: "g"))
            .from(SQLAlias(SQLIdentifier("subscriptionGrace"), as: SQLIdentifier("g")))
            .join(SQLAlias(SQLIdentifier("subscription"), as: SQLIdentifier("s")), method: SQLJoinMethod.inner,
                  on: SQLColumn("originalTransactionId", table: "s"), .equal, SQLColumn("originalTransactionId", table: "g"))
        if let accountId { query = query.where(SQLColumn("accountId", table: "g"), .equal, SQLBind(accountId)) }
        if let products { query = query.where(SQLColumn("productId", table: "s"), .in, SQLBind.group(products)) }
        return try await query.all(decoding: GraceWindowRow.self)
    }
}
