/// A move a purchase row makes from one state to another: the table below is every move there is.
/// The rows' writes take their allowed states from it (a move not in the table cannot be written),
/// and docs/states.md shows it, generated from it (`PaymentTransition.markdownTable`) and checked
/// against it by a test.
struct PaymentTransition: Sendable, Equatable {
    let from: Set<PaymentState>
    let to: PaymentState
    /// What makes the move, as docs/states.md says it.
    let by: String

    static let receiptSaved = PaymentTransition(from: [.purchasing, .deferred], to: .purchased, by: "the store charged (or approved the Ask to Buy) and its verified receipt is stored")
    static let askedToBuy = PaymentTransition(from: [.purchasing], to: .deferred, by: "the store answered Ask to Buy: waiting for approval")
    static let declined = PaymentTransition(from: [.purchasing, .deferred], to: .failed, by: "the store declined it (or its Ask to Buy); nothing charged")
    static let cancelled = PaymentTransition(from: [.purchasing, .deferred], to: .cancelled, by: "the store cancelled it; nothing charged")
    static let cancelledUnsent = PaymentTransition(from: [.purchasing], to: .cancelled, by: "the reader cancelled it before it was ever sent (`kiosk cancel --purchase`)")
    static let delivering = PaymentTransition(from: [.purchased, .restored], to: .delivering, by: "its content is queued; it waits for the install")
    static let finished = PaymentTransition(from: [.purchased, .restored, .delivering], to: .finished, by: "delivered (or nothing to download, or --no-download) and reported to the store")
    static let receiptRefused = PaymentTransition(from: [.purchased, .restored, .delivering], to: .failed, by: "its receipt no longer verifies on this device (altered, or another account's): nothing is delivered on it")
    static let revoked = PaymentTransition(from: Set(PaymentState.owning), to: .revoked, by: "the store refunded or revoked it; its content leaves the library unless another proof covers it")

    /// Every move, in the order docs/states.md lists them. (`restored` rows are inserted in that
    /// state by replay and restore, never moved into it.)
    static let all: [PaymentTransition] = [receiptSaved, askedToBuy, declined, cancelled, cancelledUnsent, delivering, finished, receiptRefused, revoked]

    /// The table docs/states.md carries between its `transitions: PaymentState` markers.
    static var markdownTable: String {
        let order = PaymentState.allCases
        var lines = ["| from | to | when |", "|---|---|---|"]
        for move in all {
            let from = order.filter(move.from.contains).map { "`\($0.rawValue)`" }.joined(separator: ", ")
            lines.append("| \(from) | `\(move.to.rawValue)` | \(move.by) |")
        }
        return lines.joined(separator: "\n")
    }
}
