import Foundation
import KioskCore

/// Why the store refused a request: a stable `code` and a sentence for a person.
///
/// The store speaks of accounts, transactions and products, never of HTTP: which status each
/// refusal is on the wire is decided in one place, ``StoreError/status`` in
/// `HTTP/StoreError+HTTP.swift`. A struct over an internal enum, so that a new refusal breaks no
/// caller's `switch` (as hummingbird's `PersistError`).
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// A text or a number the caller sent is unusable (too long, empty, out of range).
        case invalidRequest
        case unknownAccount
        case unknownTransaction
        case unknownProduct
        /// A transaction is not in the state the operation needs (deferred, purchased…).
        case wrongState
        /// The request is understood and refused in this store's environment.
        case forbidden
        /// The purchase cannot be paid: declined, or not enough credits.
        case notPaid
        /// An idempotency key sent again with a different request.
        case keyReused
        /// The account or the store cannot answer now; the same request may succeed later.
        case unavailable
        /// Too many requests of one client or account lately.
        case rateLimited
        /// The caller is nobody the store knows: a sign-in refused, a device signed out.
        case unauthorized
    }

    public let reason: Reason
    /// The wire's stable code, e.g. `unknown_transaction`.
    public let code: String
    public let message: String
    /// Seconds before the same request may succeed, for refusals that pass.
    public let retryAfter: Int?

    init(_ reason: Reason, code: String, message: String, retryAfter: Int? = nil) {
        self.reason = reason
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code): \(message)" }

    // MARK: The refusals

    public static func invalidRequest(_ message: String) -> StoreError {
        StoreError(.invalidRequest, code: "bad_request", message: message)
    }

    public static func unknownAccount(_ id: String) -> StoreError {
        StoreError(.unknownAccount, code: "unknown_account", message: "no account \(id)")
    }

    /// - Parameter ofAccount: the caller is a customer, who may only name their own transactions.
    public static func unknownTransaction(_ id: String, ofAccount: Bool = false) -> StoreError {
        StoreError(.unknownTransaction, code: "unknown_transaction",
            message: ofAccount ? "this account has no transaction \(id)" : "no transaction \(id)")
    }

    public static var appStoreNotConfigured: StoreError {
        StoreError(.unknownProduct, code: "appstore_not_configured",
            message: "this store takes no App Store proofs; start kiosk serve with --app-store-bundle-id")
    }

    public static func unknownProduct(_ id: String) -> StoreError {
        StoreError(.unknownProduct, code: "unknown_product", message: "no product \"\(id)\" in the catalog; run kiosk sync")
    }

    public static func notRedeemable(_ productId: String) -> StoreError {
        StoreError(.wrongState, code: "not_redeemable", message: "\(productId) has no credit price; buy it instead")
    }

    /// An approval or a decline that lost to another decision committed meanwhile.
    public static func settledMeanwhile(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "not_deferred", message: "transaction \(id) is no longer deferred; it was settled meanwhile")
    }

    /// An approval or a decline of a request already settled, naming the state it is in.
    public static func notDeferred(_ id: String, status: TransactionStatus) -> StoreError {
        StoreError(.wrongState, code: "not_deferred", message: "transaction \(id) is \(status.rawValue), not deferred; it was already settled")
    }

    public static func notRevocable(_ id: String, status: TransactionStatus) -> StoreError {
        StoreError(.wrongState, code: "not_purchased", message: "transaction \(id) is \(status.rawValue); only a purchase can be revoked or refunded")
    }

    public static func notFinishable(_ id: String, status: TransactionStatus) -> StoreError {
        StoreError(.wrongState, code: "not_purchased", message: "transaction \(id) is \(status.rawValue); only a purchased transaction can be finished")
    }

    public static func alreadyRevoked(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "already_revoked", message: "transaction \(id) is already revoked; nothing was changed")
    }

    public static func revokedMeanwhile(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "already_revoked", message: "transaction \(id) was revoked meanwhile; nothing was changed")
    }

    public static func alreadyRefunded(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "already_refunded",
            message: "transaction \(id) is already revoked and has nothing left to pay back; nothing was changed")
    }

    public static func creditsSpent(_ id: String, granted: Int, balance: Int) -> StoreError {
        StoreError(.wrongState, code: "credits_spent",
            message: "transaction \(id) is not refunded: it granted \(granted) credits and the balance is \(balance); revoke it without a refund, or refund it once the balance holds \(granted) credits again")
    }

    public static let amountTooLarge = StoreError(.wrongState, code: "amount_too_large", message: "the amount or balance would be too large; buy fewer at once")

    public static func insufficientCredits(_ productId: String, price: Int, balance: Int) -> StoreError {
        StoreError(.notPaid, code: "insufficient_credits",
            message: "\(productId) costs \(price) credits and the balance is \(balance); buy a credit pack first")
    }

    public static func paymentDeclined(_ message: String?) -> StoreError {
        StoreError(.notPaid, code: "payment_declined", message: message ?? "the payment was declined")
    }

    /// - Parameter differences: each field that differs from the first request, e.g. `quantity (2, first 1)`.
    public static func idempotencyKeyReused(_ key: String, differences: [String]) -> StoreError {
        StoreError(.keyReused, code: "idempotency_key_reused",
            message: "idempotency key \(key) was first sent for another request; this one differs in \(differences.joined(separator: ", ")); send it as a new request, with a fresh key")
    }

    public static let accountBusy = StoreError(.unavailable, code: "busy",
        message: "the account is busy with other payments; send the same request again (same idempotency key)")

    public static let starting = StoreError(.unavailable, code: "starting", message: "the store is starting; try again in a few seconds")

    /// - Parameter what: who asked too often, e.g. `too many purchases came from 10.0.0.1`.
    public static func rateLimited(_ what: String, retryAfter: Int) -> StoreError {
        StoreError(.rateLimited, code: "rate_limited",
            message: "\(what) in a short time; nothing was done; try again in \(retryAfter) s", retryAfter: retryAfter)
    }
}

extension StoreError {
    public static func unknownSubscription(_ id: String) -> StoreError {
        StoreError(.unknownTransaction, code: "unknown_subscription",
            message: "the account has no subscription \(id); kiosk subscriptions lists them by original transaction ID")
    }

    public static func subscriptionExpired(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "subscription_expired",
            message: "subscription \(id) has expired and cannot be resumed; buy it again to start a new period")
    }

    public static func sandboxOnly(_ what: String) -> StoreError {
        StoreError(.wrongState, code: "sandbox_only", message: "\(what) exists only in the sandbox; a production store refuses it")
    }

    public static func pretendPayment(_ method: String) -> StoreError {
        StoreError(.forbidden, code: "sandbox_only",
            message: "payment method '\(method)' is the sandbox's pretend payment; this store runs in the production environment and grants only for a real proof of payment (the web shop's checkout, a Google Play purchase or an App Store transaction)")
    }

    /// A channel's purchase (a Play purchase token, an App Store transaction) another account presented first.
    public static func channelPurchaseOwned(_ what: String) -> StoreError {
        StoreError(.wrongState, code: "purchase_owned",
            message: "\(what) was already presented by another account, which it belongs to; it is granted once, to that account")
    }

    public static func channelNotConfigured(_ channel: String, flags: String) -> StoreError {
        StoreError(.unknownProduct, code: "\(channel)_not_configured", message: "this store takes no \(channel == "play" ? "Google Play" : channel) purchases; start kiosk serve with \(flags)")
    }

    /// A channel's proof of payment that does not hold (its signature, its app, its state).
    /// The payment service (Stripe) refused or could not be reached: nothing was bought.
    /// - Parameter retryAfter: seconds before trying again makes sense; nil when it was refused.
    public static func paymentService(_ message: String, retryAfter: Int? = nil) -> StoreError {
        StoreError(.unavailable, code: "payment_service", message: message, retryAfter: retryAfter)
    }

    public static func proofRefused(_ code: String, _ message: String) -> StoreError {
        StoreError(.invalidRequest, code: code, message: message)
    }

    /// A channel's proof whose payment was taken back (refunded, voided) before it was presented.
    public static func paymentWithdrawn(_ what: String) -> StoreError {
        StoreError(.notPaid, code: "payment_withdrawn", message: "\(what) was refunded or voided; it grants nothing")
    }

    public static func renewalNotOffered(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "renewal_not_offered",
                   message: "subscription \(id) cannot renew on this store: it ends at its period's end; buy it again then")
    }

    /// A product that lists its storefronts' prices, none for this account's.
    public static func notSoldHere(_ id: String, storefront: String?) -> StoreError {
        StoreError(.wrongState, code: "not_sold_here",
                   message: "\(id) is not sold in \(storefront.map { "the \(StorefrontCountry.name($0)) (\($0)) storefront" } ?? "a storefront"): it has no price there; the account's storefront is changed on /account or with kiosk storefront")
    }

    public static func offSale(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "off_sale", message: "\(id) is no longer for sale; readers who own it keep downloading it (kiosk restore)")
    }

    /// The store sends no mail (no `--smtp-url`): a reset link cannot be asked for.
    public static var noMail: StoreError {
        StoreError(.unavailable, code: "no_mail", message: "this store sends no mail; ask its operator for a reset code (kiosk admin reset-code)")
    }

    /// A row the store wrote that no longer reads as what it holds (edited by hand, or written by
    /// a Kiosk of another schema): nothing is decided without it.
    public static func unreadableRecord(what: String, reason: String) -> StoreError {
        StoreError(.unavailable, code: "unreadable_record",
            message: "the database's \(what) cannot be read (\(reason)); restore it from a backup (docs/operations.md) or fix the row")
    }

    public static func notWithdrawn(_ id: String, reason: String) -> StoreError {
        StoreError(.wrongState, code: "not_withdrawn", message: "\(id) cannot be removed: \(reason)")
    }

    public static func hasOwners(_ id: String, owners: Int) -> StoreError {
        StoreError(.wrongState, code: "has_owners",
            message: "\(id) is owned by \(owners) account(s), whose devices could no longer download it; remove it anyway with --force")
    }

    public static let subscriptionBusy = StoreError(.unavailable, code: "busy",
        message: "the subscription changed while this was decided; send the same request again")

    public static func unknownWebhook(_ url: String) -> StoreError {
        StoreError(.invalidRequest, code: "unknown_webhook", message: "no webhook is registered for \(url); kiosk admin webhooks list shows them")
    }

    public static func unknownNotification(_ id: String) -> StoreError {
        StoreError(.invalidRequest, code: "unknown_notification", message: "no notification \(id); kiosk admin notifications lists them")
    }
}

// MARK: Sign-ins and devices (issue 46)

extension StoreError {
    /// The one answer to a wrong email and a wrong password alike, so that neither tells whether
    /// an account exists.
    public static let signInRefused = StoreError(.unauthorized, code: "invalid_credentials",
        message: "the email or the password is wrong; check both")

    public static let signedOut = StoreError(.unauthorized, code: "signed_out",
        message: "this device was signed out of its account; sign in again (kiosk login)")

    public static func emailTaken(_ email: String) -> StoreError {
        StoreError(.wrongState, code: "email_taken", message: "\(email) already signs in to an account; sign in with it (kiosk login --email \(email))")
    }

    public static func hasSignIn(_ accountId: String) -> StoreError {
        StoreError(.wrongState, code: "has_sign_in", message: "account \(accountId) already has a sign-in; sign in with it on other devices (kiosk login)")
    }

    /// - Parameter devices: the names of the account's devices, to choose one to remove.
    public static func deviceLimit(_ limit: Int, devices: [String]) -> StoreError {
        StoreError(.wrongState, code: "device_limit",
            message: "the account has \(limit) devices, the most it may have (\(devices.joined(separator: ", "))); remove one on a signed-in device (kiosk devices remove NAME) or sign in with --replace NAME")
    }

    /// Another plan of the subscription's group runs: a second one would be charged beside it.
    public static func planRunning(_ running: String, until: Date, wanted: String) -> StoreError {
        StoreError(.wrongState, code: "plan_running",
                   message: "the account subscribes to \(running) until \(Store.day(until)), a plan of the same group; change its plan instead (kiosk subscription change ID --to \(wanted), or Change plan on /account)")
    }

    public static func syncPasswordLimit(_ limit: Int) -> StoreError {
        StoreError(.wrongState, code: "sync_password_limit",
                   message: "the account has \(limit) sync passwords, the most it may have; sign one out in the device list on /account, then make another")
    }

    public static func lastDevice(_ id: String) -> StoreError {
        StoreError(.wrongState, code: "last_device",
                   message: "\(id) is the only device of an account without a sign-in: removing it loses the account and what it bought for good; give the account a sign-in first (kiosk account create --email EMAIL), or remove it with --force")
    }

    public static func unknownDevice(_ idOrName: String) -> StoreError {
        StoreError(.unknownAccount, code: "unknown_device", message: "the account has no device \"\(idOrName)\"; kiosk devices lists them")
    }

    public static func ambiguousDevice(_ name: String, ids: [String]) -> StoreError {
        StoreError(.invalidRequest, code: "ambiguous_device", message: "more than one device is called \"\(name)\" (\(ids.joined(separator: ", "))); name one by its ID")
    }

    public static let accountDisabled = StoreError(.forbidden, code: "account_disabled",
        message: "the store has disabled this account; write to the store's support to have it enabled again")

    public static let passwordNeeded = StoreError(.forbidden, code: "password_needed",
        message: "deleting an account with a sign-in needs its password again, in the body as {\"password\": …}; nothing was deleted")

    public static func accountDeleted(_ accountId: String) -> StoreError {
        StoreError(.forbidden, code: "account_deleted", message: "account \(accountId) was deleted by its holder; nothing can be done with it")
    }

    public static let wrongPassword = StoreError(.forbidden, code: "wrong_password",
        message: "that is not the account's password; nothing was deleted")

    public static let resetRefused = StoreError(.unauthorized, code: "invalid_reset_code",
        message: "the email or the reset code is wrong, or the code expired or was used; ask the store for a new one")

    public static func noSignIn(_ accountId: String) -> StoreError {
        StoreError(.wrongState, code: "no_sign_in", message: "account \(accountId) has no sign-in, so no password to reset")
    }

    // RFC 8628's answers to a device's poll, under the same codes.
    public static let authorizationPending = StoreError(.invalidRequest, code: "authorization_pending",
        message: "the code is not approved yet; enter it on a signed-in device (kiosk devices approve CODE) or the account page")
    public static let slowDown = StoreError(.invalidRequest, code: "slow_down", message: "polled too soon; wait the interval, 5 seconds more than before")
    public static let expiredCode = StoreError(.invalidRequest, code: "expired_token",
        message: "the code expired or was used already; start again (kiosk login --code)")
    public static let unknownUserCode = StoreError(.unknownAccount, code: "unknown_code",
        message: "no device is waiting with that code, or it expired; check the code the device shows, or start again on it")
}
