import KioskCore

/// What went wrong on the client, naming the thing at fault and what to do.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    case noServer
    /// Nothing answered: the connection was refused or the host not found, so no request left.
    case serverUnreachable(url: String, detail: String)
    /// The connection broke or timed out after the request may have left: the store may have
    /// acted on it, and the same request (with its idempotency key) is sent again later.
    case answerLost(url: String, detail: String)
    /// A saved purchase belongs to another store than the one this device now talks to.
    case otherStore(productId: String, madeFor: String, current: String)
    /// A saved purchase belongs to another account than the one this device now uses (`current`,
    /// nil for none); `madeFor` is nil when it was sent under an account this device no longer
    /// knows. It is never sent under another: the store's idempotency keys are each account's, so
    /// it would be charged again.
    case otherAccount(productId: String, madeFor: String?, current: String?, sent: Bool)
    /// The server answered with an error body `{code, message}`.
    case serverError(url: String, status: Int, code: String, message: String)
    case badResponse(url: String, detail: String)
    /// Something answered that is not a Kiosk store (a web page, say); `what` says what it sent.
    case notAStore(url: String, status: Int, what: String)
    case unknownProduct(String)
    /// The store no longer sells it (its owners keep it).
    case offSale(String)
    case paymentsDisabled
    case invalidRequest(String)
    case receiptRejected(transactionId: String, reason: String)
    /// A local file or folder could not be used.
    case local(path: String, problem: String, action: String)
    /// A product ID from the server (or the database) breaks ``ProductID``'s rule; nothing was written for it.
    case unsafeProductID(String, source: String)

    public var description: String {
        switch self {
        case .noServer:
            return "no server is known yet; pass --server URL or set KIOSK_SERVER"
        case .serverUnreachable(let url, let detail):
            return "cannot reach \(url) (\(detail)); check the server is running and try again"
        case .answerLost(let url, let detail):
            return "no answer from \(url) (\(detail)); check the server is running and try again"
        case .otherStore(let productId, let madeFor, let current):
            return "\(productId): this purchase was saved for the store at \(madeFor), so it is not sent to \(current) and nothing was charged there; "
                + "it is sent once this device talks to that store again (--server \(madeFor)), or `kiosk cancel --purchase \(productId)` drops it if that store never received it"
        case .otherAccount(let productId, let madeFor, let current, let sent):
            let owner = madeFor.map { "account \($0)" } ?? "an account this device no longer uses"
            let held = current.map { "so it is not sent under account \($0), which is charged nothing for it" } ?? "and this device has no account now, so it is not sent"
            let remedy = sent
                ? "it may have been charged there already"
                : "it was never sent, so `kiosk cancel --purchase \(productId)` drops it"
            return "\(productId): this purchase was saved for \(owner), \(held); "
                + "it is sent once this device is signed in to that account again (kiosk login --email EMAIL, or kiosk account link TOKEN); \(remedy)"
        case .serverError(let url, let status, _, let message):
            return "\(url) answered \(status): \(message)"
        case .badResponse(let url, let detail):
            return "\(url) sent a response Kiosk cannot read (\(detail)); is this a Kiosk server?"
        case .notAStore(let url, let status, let what):
            return "\(url) answered \(status) with \(what), not a Kiosk store's JSON; check the server URL (--server, or kiosk config get server) names a Kiosk store"
        case .unknownProduct(let id):
            return "no product \"\(id)\" in the local catalog; run `kiosk sync` and check the ID with `kiosk products`"
        case .offSale(let id):
            return "\(id) is no longer for sale, so nothing was charged; if this account owns it, kiosk restore brings it back"
        case .paymentsDisabled:
            return "payments are turned off on this device; turn them on with `kiosk config payments on`"
        case .invalidRequest(let detail):
            return detail
        case .receiptRejected(let transactionId, let reason):
            return "the receipt of transaction \(transactionId) was not accepted: \(reason); nothing was granted"
        case .local(let path, let problem, let action):
            return "\(path): \(problem); \(action)"
        case .unsafeProductID(let id, let source):
            return "\(source) names a product \(ProductID.problem(id)); it was refused and nothing was written for it"
        }
    }

    /// True for a saved purchase that belongs to another store.
    public var isOtherStore: Bool {
        if case .otherStore = self { return true }
        return false
    }

    /// True for a saved purchase that belongs to another account.
    public var isOtherAccount: Bool {
        if case .otherAccount = self { return true }
        return false
    }

    /// True when the store refused this device's token (401 to a call that acts for the account):
    /// the device was signed out elsewhere (removed, signed out everywhere, a password reset, the
    /// account disabled or deleted). Receipts' and sign-ins' own 401s have codes of their own.
    public var isSignedOut: Bool {
        if case .serverError(_, 401, let code, _) = self { return code == "unauthorized" || code == "signed_out" }
        return false
    }

    /// True when the server could not be reached at all: the request may be sent again later.
    public var isUnreachable: Bool {
        switch self {
        case .serverUnreachable, .answerLost: return true
        default: return false
        }
    }
}
