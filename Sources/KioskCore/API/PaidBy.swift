/// How a stored transaction was paid: the `paymentMethod` a transaction row, the operator's lists
/// and the device's copy carry, named once (these were bare strings, `"owned"` 26 times and
/// `"credits"` 30). The sandbox's request methods are ``PaymentMethod``; these are what they and
/// every other way of paying come to.
public enum PaidBy: String, Sendable, Codable, CaseIterable {
    /// The sandbox's pretend payments (``PaymentMethod``).
    case approve, decline, cancel, `defer`
    /// Credits spent on a product with a credit price.
    case credits
    /// A free re-buy: paid for (or approved) while the account already held it; nothing charged.
    case owned
    /// A period the sandbox's renewal worker charged.
    case renewal
    /// A payment channel's grant: the web (Stripe), Google Play, the App Store.
    case stripe, play, appstore
    /// Granted by the operator by hand (`kiosk admin grant`), charging nothing.
    case `operator`
    /// Redeemed with an offer code (`kiosk redeem-code`), charging nothing.
    case code
    /// Written again from the store's own signed receipt, which a device presented after a restore
    /// had lost its row (`Reinstatements`): paid for in the time the backup did not hold.
    case receipt

    /// The methods only a sandbox writes: a database holding one was a sandbox's.
    public static let sandboxOnly: [PaidBy] = [.approve, .defer, .decline, .cancel, .renewal]
}
