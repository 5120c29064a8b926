import ArgumentParser
import Foundation
import KioskClient
import KioskCore

/// `kiosk transactions --since DATE --product ID --state STATE`: applied to this device's own
/// rows (the admin lists send the same options to the server, which applies them in its query).
struct TransactionFilters: ParsableArguments {
    @Option(help: ArgumentHelp("Only transactions made since this date: YYYY-MM-DD (UTC), an ISO 8601 time, or a time ago (30m, 24h, 7d).", valueName: "date"))
    var since: String?

    @Option(help: ArgumentHelp("Only this product's transactions.", valueName: "id"))
    var product: String?

    @Option(help: ArgumentHelp("Only transactions in this state: \(PaymentState.allNames).", valueName: "state"))
    var state: String?

    func validate() throws {
        _ = try filter()
    }

    /// The options as a ``ListFilter``.
    /// - Throws: `ValidationError` naming a date or a state that cannot be read.
    func filter() throws -> ListFilter {
        if let state, PaymentState(rawValue: state) == nil {
            throw ValidationError("--state \"\(state)\" is not a transaction state: \(PaymentState.allNames)")
        }
        do {
            return ListFilter(since: try since.map { try ListFilter.date($0) }, productId: product, state: state)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// The views the filter keeps, in their order.
    func apply(_ views: [TransactionView]) throws -> [TransactionView] {
        let filter = try filter()
        return views.filter { view in
            (filter.since.map { view.record.createdAt >= $0 } ?? true)
                && (filter.productId.map { view.record.productId == $0 } ?? true)
                && (filter.state.map { view.record.state.rawValue == $0 } ?? true)
        }
    }
}

extension PaymentState {
    /// Every state's name, for help and errors.
    static var allNames: String {
        allCases.map(\.rawValue).joined(separator: ", ")
    }
}

/// What a transaction cost, as the cached catalog prices it: `4.99 USD`, `9.98 USD` for two,
/// `3 credits` when paid with credits; nil when the catalog no longer has the product.
func shownPrice(_ record: PaymentRecord, _ product: Product?) -> String? {
    if record.paymentMethod == PaymentRecord.notCharged { return "nothing charged (already owned)" }
    if record.paymentMethod == PaidBy.operator.rawValue { return "nothing charged (granted by the store)" }
    guard let product else { return nil }
    if record.paymentMethod == "credits" {
        return product.creditPrice.map { "\($0 * record.quantity) credits" }
    }
    guard let cents = Price.cents(product.price.amount) else { return product.price.description }
    return Price.shown(cents: cents * record.quantity, product.price.currency)
}
